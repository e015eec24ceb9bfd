"""The pure half of per-key limits and the per-user running cap: patterns and the plan a claim
follows."""

import itertools
import re
import threading

import pytest

from jobweaver.engine.claim.rules import (
    EXACT_KEY_PRECEDENCE,
    PUT_BACK_BATCH,
    UNCAPPED_ROOM,
    Allowance,
    DispatchRules,
    Limit,
    glob_matches,
    like_pattern,
    limit_for,
    plan,
    plan_users,
    put_back_counts,
    scoped_keys,
    shared_by_limits,
    sharing_patterns,
)
from jobweaver.engine.keys import scoped_key


def key(user_key: str) -> str:
    """An execution's key: the user's, scoped to an owner (the claim counts these)."""
    return scoped_key(7, user_key)


@pytest.mark.parametrize(
    ("pattern", "key", "matches"),
    [
        ("customer-*", "customer-1", True),
        ("customer-*", "customer-", True),
        ("customer-*", "customers-1", False),
        ("*", "anything", True),
        ("a*b*c", "a-x-b-y-c", True),
        ("a*b*c", "a-x-c", False),
        ("exact", "exact", True),
        ("exact", "exactly", False),
        ("50%_off", "50%_off", True),
        ("50%_off", "50x-off", False),  # % and _ are literal, unlike SQL LIKE
        ("a.b", "axb", False),  # . is literal, unlike a regex
        ("a*a", "a", False),  # the first and the last piece may not overlap
        ("a*a", "aa", True),
        ("**", "", True),
        ("*x*", "yyxyy", True),
        ("ab*ba*ab", "abbaab", True),
        ("ab*ba*ab", "abab", False),
    ],
)
def test_glob_matches(pattern, key, matches):
    assert glob_matches(pattern, key) is matches


def test_a_pattern_built_to_backtrack_is_matched_without_backtracking():
    # As a regex, "*a*a*a*a*!" against 200 a's took 4 s and each star more multiplies that;
    # here each piece is one str.find. Run on a thread with a deadline, so a matcher that
    # backtracks again fails this test instead of hanging the suite.
    key = "a" * 10_000
    results: list[bool] = []
    worker = threading.Thread(
        target=lambda: results.extend(
            [glob_matches("*a" * 50 + "*!", key), glob_matches("*a" * 50 + "*", key)]
        ),
        daemon=True,
    )
    worker.start()
    worker.join(timeout=10)
    assert results == [False, True]


def test_the_matcher_agrees_with_a_regex_on_every_short_pattern_and_key():
    # The regex is a fine reference where it cannot blow up: patterns of up to 5 characters.
    def by_regex(pattern: str, key: str) -> bool:
        parts = (re.escape(part) for part in pattern.split("*"))
        return re.fullmatch(".*".join(parts), key, re.DOTALL) is not None

    patterns = ["".join(p) for n in range(6) for p in itertools.product("ab*", repeat=n)]
    keys = ["".join(k) for n in range(6) for k in itertools.product("ab", repeat=n)]
    for pattern in patterns:
        for key in keys:
            assert glob_matches(pattern, key) is by_regex(pattern, key), (pattern, key)


def test_like_pattern_escapes_what_like_would_read_as_wildcards():
    assert like_pattern("50%_off*") == "50\\%\\_off%"
    assert like_pattern("back\\slash") == "back\\\\slash"
    assert like_pattern("star*", exact=True) == "star*"


def test_the_longest_matching_pattern_is_the_keys_limit():
    limits = [Limit("*", 10, None), Limit("customer-*", 2, None), Limit("customer-vip", 5, None)]
    assert limit_for(key("customer-vip"), limits).pattern == "customer-vip"
    assert limit_for(key("customer-1"), limits).pattern == "customer-*"
    assert limit_for(key("other"), limits).pattern == "*"
    assert limit_for(key("other"), limits[1:]) is None


def test_plan_blocks_keys_at_a_limit_and_gives_the_rest_their_room():
    limits = [Limit("customer-*", 2, None), Limit("burst", None, 3)]
    usage = {
        key("customer-1"): (2, 0),  # at its running limit
        key("customer-2"): (1, 1),  # one more may go
        key("burst"): (0, 3),  # three sent this second
        key("unlimited"): (7, 7),  # no pattern matches
    }
    blocked, allowances = plan(limits, usage)
    assert blocked == (key("burst"), key("customer-1"))
    # A pattern's allowance matches every owner's keys (each counted on its own, by key).
    assert set(allowances) == {
        Allowance("%\x1fcustomer-%", 2, 2 * len("customer-*")),
        Allowance("%\x1fburst", 3, 2 * len("burst")),
        Allowance(key("customer-2"), 1, EXACT_KEY_PRECEDENCE),
    }


def test_both_limits_apply_and_the_tighter_one_wins():
    limits = [Limit("k", 5, 2)]
    assert plan(limits, {key("k"): (1, 1)}) == (
        (),
        (Allowance("%\x1fk", 2, 2), Allowance(key("k"), 1, 10**6)),
    )
    assert plan(limits, {key("k"): (5, 0)})[0] == (key("k"),)


def test_set_aside_work_goes_back_by_its_keys_room_and_a_batch_at_most():
    limits = [Limit("customer-*", 3, None), Limit("burst", None, 10**6)]
    usage = {key("customer-1"): (3, 0), key("customer-2"): (1, 0), key("burst"): (0, 5)}
    aside = ["customer-1", "customer-2", "customer-3", "burst", "unlimited-now"]
    counts = put_back_counts(limits, usage, [key(user_key) for user_key in aside])
    assert counts == (
        (key("burst"), PUT_BACK_BATCH),  # room, but no more than a batch at a time
        # customer-1 is at its limit: nothing goes back
        (key("customer-2"), 2),
        (key("customer-3"), 3),  # nothing in flight: the pattern's whole room
        (key("unlimited-now"), PUT_BACK_BATCH),  # its limit was removed
    )


def test_a_claim_of_given_jobs_treats_keys_with_work_set_aside_as_blocked():
    rules = DispatchRules(blocked_keys=("full",), put_back=(("roomy", 2),))
    given = rules.for_given_jobs()
    assert given.blocked_keys == ("full", "roomy") and given.put_back == ()
    assert DispatchRules(blocked_keys=("full",)).for_given_jobs().blocked_keys == ("full",)


def test_plan_users_blocks_users_at_the_cap_and_gives_the_others_their_room():
    usage = [(7, 3, False), (5, 1, False), (9, 40, True), (4, 5, False)]
    blocked, rooms = plan_users(3, usage)
    assert blocked == (4, 7)  # at the cap, or over it after the cap was lowered
    assert rooms == ((5, 2), (9, UNCAPPED_ROOM))  # an operator is never blocked


# --- keys per owner, shared under a global limit (§17) ------------------------------------------


def test_a_per_owner_limit_counts_each_owners_key_alone():
    limits = [Limit("customer-*", 1, None)]
    alice, bob, ownerless = (scoped_key(owner, "customer-42") for owner in (1, 2, None))
    assert {limit_for(k, limits) for k in (alice, bob, ownerless)} == {limits[0]}
    blocked, allowances = plan(limits, {alice: (1, 0)})
    assert blocked == (alice,)  # alice is at her limit, bob's and the server's keys are not
    assert allowances == (Allowance("%\x1fcustomer-%", 1, 20),)


def test_a_global_limit_matches_only_the_shared_form_of_a_key():
    limits = [Limit("customer-*", 1, None, is_global=True)]
    assert limit_for(scoped_key(1, "customer-42"), limits) is None
    assert limit_for(scoped_key(None, "customer-42"), limits) == limits[0]
    assert limit_for(scoped_key(1, "customer-42", shared=True), limits) == limits[0]
    assert plan(limits, {})[1] == (Allowance("\x1fcustomer-%", 1, 21),)


def test_a_users_pattern_never_reaches_into_the_owner_part():
    assert limit_for(scoped_key(1, "x"), [Limit("1*", 1, None)]) is None
    assert limit_for(scoped_key(12, "2-x"), [Limit("2*", 1, None)]) is not None
    assert limit_for(scoped_key(1, "a*b"), [Limit("a*b", 1, None)]) is not None  # * still a star
    assert limit_for(scoped_key(1, "azb"), [Limit("a*b", 1, None)]) is not None


def test_the_longer_user_pattern_decides_a_keys_scope_and_of_two_as_long_the_global_one():
    per_owner_exact = Limit("customer-42", 5, None)
    global_prefix = Limit("customer-*", 1, None, is_global=True)
    limits = [per_owner_exact, global_prefix]
    assert not shared_by_limits("customer-42", limits)  # the longer, per-owner pattern wins
    assert shared_by_limits("customer-7", limits)
    assert not shared_by_limits("other", limits)
    assert not shared_by_limits("customer-7", [])
    # Stored in the form each decision gives, each key finds the limit that decided it.
    assert limit_for(scoped_key(1, "customer-42"), limits) == per_owner_exact
    assert limit_for(scoped_key(1, "customer-7", shared=True), limits) == global_prefix

    per_owner, shared = Limit("a*", 1, None), Limit("*b", 1, None, is_global=True)
    assert per_owner.precedence + 1 == shared.precedence
    assert shared_by_limits("ab", [per_owner, shared])
    assert limit_for(scoped_key(None, "ab"), [per_owner, shared]) == shared
    assert not shared_by_limits("ac", [per_owner, shared])


def test_scoped_keys_and_the_sharing_patterns_follow_the_same_decision():
    limits = [Limit("customer-42", 5, None), Limit("customer-*", 1, None, is_global=True)]
    assert scoped_keys([(3, "customer-42"), (3, "customer-7"), (None, "x"), (4, None)], limits) == [
        "3\x1fcustomer-42",
        "\x1fcustomer-7",
        "\x1fx",
        None,
    ]
    assert sharing_patterns(limits) == (["customer-42", "customer-%"], [22, 21], [False, True])
