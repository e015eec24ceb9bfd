"""The form of the keys executions carry (apps/engine/keys.py): per owner, or shared."""

import pytest

from jobweaver.core.errors import InvalidRequest
from jobweaver.core.names import checked_key
from jobweaver.engine.claim.rules import glob_matches
from jobweaver.engine.keys import SEPARATOR, is_shared, key_pattern, scoped_key, user_key


def test_a_key_is_scoped_to_its_owner_or_shared():
    assert scoped_key(42, "customer-1") == "42\x1fcustomer-1"
    assert scoped_key(None, "customer-1") == "\x1fcustomer-1"  # enqueued from code, the CLI
    assert scoped_key(42, "customer-1", shared=True) == "\x1fcustomer-1"  # a global limit's
    assert not is_shared(scoped_key(42, "k"))
    assert is_shared(scoped_key(None, "k")) and is_shared(scoped_key(42, "k", shared=True))


@pytest.mark.parametrize("key", ["customer-1", "a:b", "*", "with space", "ünïcödé", "1"])
@pytest.mark.parametrize("owner", [None, 7, 10**18])
def test_the_users_key_comes_back_whole_from_either_form(owner, key):
    assert user_key(scoped_key(owner, key)) == key
    assert user_key(scoped_key(owner, key, shared=True)) == key


def test_a_user_cannot_forge_another_owners_key():
    # The separator is not printable text: the API, the CLI and task options refuse it.
    with pytest.raises(InvalidRequest):
        checked_key(f"{SEPARATOR}customer-1")
    with pytest.raises(InvalidRequest):
        checked_key(f"7{SEPARATOR}customer-1")
    with pytest.raises(ValueError):
        scoped_key(8, f"7{SEPARATOR}customer-1")
    # Without the separator, another owner's id in a key is only text of this owner's key.
    assert scoped_key(8, "7-customer-1") != scoped_key(7, "customer-1")


def test_a_limits_key_pattern_matches_its_scopes_keys():
    per_owner, shared = (
        key_pattern("customer-*", is_global=False),
        key_pattern("customer-*", is_global=True),
    )
    assert per_owner == "*\x1fcustomer-*" and shared == "\x1fcustomer-*"
    for owner in (1, 22, None):
        assert glob_matches(per_owner, scoped_key(owner, "customer-9"))
        assert not glob_matches(per_owner, scoped_key(owner, "other"))
    assert glob_matches(shared, scoped_key(None, "customer-9"))
    assert not glob_matches(shared, scoped_key(22, "customer-9"))
