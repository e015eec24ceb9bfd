"""Concurrency keys as executions carry them: per owner unless a global limit shares them (§17).

A job's `concurrencyKey` is the user's free text, shown as given. The key its execution carries
(`JobExecution.concurrency_key`: what the claim counts, sets aside and puts back) is scoped:

- `"<owner id>\\x1f<key>"` for a job with an owner: two users' "customer-42" are two keys;
- `"\\x1f<key>"` (no owner) for a job enqueued from code or the command line (the server's
  authority), and for every owner's job whose key's most specific limit is global: all of
  them then count as one key.

The unit separator (\\x1f) cannot occur in a user's key (jobweaver.core.names.checked_key takes
printable text only), so a scoped key splits one way only: the owner part is what comes before
its first separator, the user's key everything after.

A limit's pattern P is matched against scoped keys as `*\\x1fP` (per owner: each owner's keys,
and the ownerless ones, each key on its own) or `\\x1fP` (global: the shared keys only).
"""

from __future__ import annotations

SEPARATOR = "\x1f"


def scoped_key(owner_id: int | None, key: str, *, shared: bool = False) -> str:
    """The key an execution of `owner_id`'s job with the user's `key` carries; `shared` (the
    key's limit is global) or no owner: the form every owner's job of that key shares."""
    if SEPARATOR in key:  # checked_key refuses it: a key that got past it would be ambiguous
        raise ValueError("a concurrency key may not hold the unit separator")
    owner = "" if shared or owner_id is None else str(owner_id)
    return f"{owner}{SEPARATOR}{key}"


def user_key(scoped: str) -> str:
    """The user's key of a scoped key (what a user may be shown); a key without a separator
    (none is stored so) is returned as it is."""
    _, separator, key = scoped.partition(SEPARATOR)
    return key if separator else scoped


def is_shared(scoped: str) -> bool:
    """Whether a scoped key is in the shared form (no owner)."""
    return scoped.startswith(SEPARATOR)


def key_pattern(pattern: str, *, is_global: bool) -> str:
    """The pattern (`*` a wildcard) matching the scoped keys a limit of user pattern `pattern`
    applies to: every owner's (and the ownerless) keys matching it, or the shared ones only."""
    return f"{SEPARATOR}{pattern}" if is_global else f"*{SEPARATOR}{pattern}"
