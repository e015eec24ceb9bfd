"""The per-user throttle (OWASP API4, ARCHITECTURE §17): a token bucket per user and kind,
kept in PostgreSQL so every web process, thread and beat shares one count.

A user's bucket holds at most JOBWEAVER_SUBMIT_THROTTLE_BURST tokens and refills at
JOBWEAVER_SUBMIT_THROTTLE_RATE tokens per JOBWEAVER_SUBMIT_THROTTLE_WINDOW_SECONDS (the
sustained rate: 1,200 per 60 s, 20 a second, by default). Each request that changes work takes
one token; with less than one left it is refused and told when the next one is due. A batch or
a workflow is one request.

Two kinds of bucket, each that size:

- `submit`: submitting (a job, a batch, a workflow), retrying (it queues the work again), and
  each job a user's schedule fires;
- `cancel`: cancelling a job or a workflow. A user throttled on submits can still cancel what
  they sent, and cancelling cannot starve their submits.

Holders of jobs.operate_all_jobs (operators) are not throttled, and neither is a trusted caller
(`user=None`: the command line, code calling the Tasks API, schedules without an owner).
"""

from __future__ import annotations

import math

from django.db import connection

from jobweaver.accounts.models import ThrottleBucket
from jobweaver.accounts.selectors import holds
from jobweaver.conf import settings

SUBMIT = ThrottleBucket.Kind.SUBMIT
CANCEL = ThrottleBucket.Kind.CANCEL
# The operators' permission (jobs.operate_all_jobs), named here: accounts sits below jobs.
OPERATOR = "jobweaver_jobs.operate_all_jobs"

# One statement, atomic under any concurrency: refill the bucket by the time elapsed since its
# last take (the database's clock, one reading per statement), then take a token if a whole one
# is there. ON CONFLICT … DO UPDATE re-reads the newest row version after a concurrent take, so
# two requests never spend the same token; a refused request leaves the row as it was (the WHERE
# fails), and the outer SELECT, reading the row as it was before this statement, says how far
# the bucket is from a token.
_TAKE = """
WITH taken AS (
    INSERT INTO {table} AS b (user_id, kind, tokens, updated_at)
    VALUES (%(user)s, %(kind)s, %(burst)s - 1, statement_timestamp())
    ON CONFLICT (user_id, kind) DO UPDATE
        SET tokens = {refilled} - 1,
            updated_at = greatest(b.updated_at, EXCLUDED.updated_at)
        WHERE {refilled} >= 1
    RETURNING 1
)
SELECT
    EXISTS (SELECT 1 FROM taken),
    (SELECT {refilled_now} FROM {table} b WHERE b.user_id = %(user)s AND b.kind = %(kind)s)
"""
_REFILLED = (
    "least(%(burst)s::float8, b.tokens + %(per_second)s * "
    "greatest(0, extract(epoch FROM {now} - b.updated_at)::float8))"
)


def _statement() -> str:
    table = ThrottleBucket._meta.db_table
    return _TAKE.format(
        table=table,
        refilled=_REFILLED.format(now="EXCLUDED.updated_at"),
        refilled_now=_REFILLED.format(now="statement_timestamp()"),
    )


def per_second() -> float:
    """The sustained rate, tokens a second."""
    rate, window = (
        settings.JOBWEAVER_SUBMIT_THROTTLE_RATE,
        settings.JOBWEAVER_SUBMIT_THROTTLE_WINDOW_SECONDS,
    )
    return rate / window


def exempt(user) -> bool:
    """Whether `user`'s requests are never throttled: a trusted caller, or an operator."""
    return user is None or holds(user, OPERATOR)


def throttle_take(*, user, kind: str = SUBMIT) -> int | None:
    """Take one token from `user`'s bucket of `kind`. None when taken (or `user` is exempt);
    else the whole seconds (at least 1) until the bucket holds a token again: the Retry-After.
    Inside a transaction the bucket's row stays locked until it ends, and a rollback gives the
    token back."""
    if exempt(user):
        return None
    rate = per_second()
    with connection.cursor() as cursor:
        cursor.execute(
            _statement(),
            {
                "user": user.pk,
                "kind": kind,
                "burst": float(settings.JOBWEAVER_SUBMIT_THROTTLE_BURST),
                "per_second": rate,
            },
        )
        taken, tokens = cursor.fetchone()
    if taken:
        return None
    missing = 1.0 - (tokens if tokens is not None else 0.0)
    return max(1, math.ceil(missing / rate))
