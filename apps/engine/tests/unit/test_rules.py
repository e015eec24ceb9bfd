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
)


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
    assert limit_for("customer-vip", limits).pattern == "customer-vip"
    assert limit_for("customer-1", limits).pattern == "customer-*"
    assert limit_for("other", limits).pattern == "*"
    assert limit_for("other", limits[1:]) is None


def test_plan_blocks_keys_at_a_limit_and_gives_the_rest_their_room():
    limits = [Limit("customer-*", 2, None), Limit("burst", None, 3)]
    usage = {
        "customer-1": (2, 0),  # at its running limit
        "customer-2": (1, 1),  # one more may go
        "burst": (0, 3),  # three sent this second
        "unlimited": (7, 7),  # no pattern matches
    }
    blocked, allowances = plan(limits, usage)
    assert blocked == ("burst", "customer-1")
    assert set(allowances) == {
        Allowance("customer-%", 2, len("customer-*")),
        Allowance("burst", 3, len("burst")),
        Allowance("customer-2", 1, EXACT_KEY_PRECEDENCE),
    }


def test_both_limits_apply_and_the_tighter_one_wins():
    limits = [Limit("k", 5, 2)]
    assert plan(limits, {"k": (1, 1)}) == ((), (Allowance("k", 2, 1), Allowance("k", 1, 10**6)))
    assert plan(limits, {"k": (5, 0)})[0] == ("k",)


def test_set_aside_work_goes_back_by_its_keys_room_and_a_batch_at_most():
    limits = [Limit("customer-*", 3, None), Limit("burst", None, 10**6)]
    usage = {"customer-1": (3, 0), "customer-2": (1, 0), "burst": (0, 5)}
    counts = put_back_counts(
        limits, usage, ["customer-1", "customer-2", "customer-3", "burst", "unlimited-now"]
    )
    assert counts == (
        ("burst", PUT_BACK_BATCH),  # room, but no more than a batch at a time
        # customer-1 is at its limit: nothing goes back
        ("customer-2", 2),
        ("customer-3", 3),  # nothing in flight: the pattern's whole room
        ("unlimited-now", PUT_BACK_BATCH),  # its limit was removed
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
