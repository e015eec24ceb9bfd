"""Per-user throttling of the requests that change work (OWASP API4, ARCHITECTURE §17): a token
bucket per user in PostgreSQL (apps/accounts/throttle.py), so all web processes share it. Over
it: 429 API.THROTTLED with Retry-After, and nothing is done.

- SubmissionThrottle: POST /api/jobs, /api/jobs/batch, /api/workflows (each one request however
  many jobs it holds) and POST /api/jobs/{id}/retry, from the `submit` bucket;
- CancelThrottle: POST /api/jobs/{id}/cancel and /api/workflows/{id}/cancel, from the `cancel`
  bucket, so a user throttled on submits can still cancel.

Reads are not throttled here; the per-user cap on waiting and running jobs bounds the volume a
user can queue (apps/jobs/services.py). Operators (jobs.operate_all_jobs) are exempt."""

from __future__ import annotations

from rest_framework.throttling import BaseThrottle

from jobweaver.accounts.throttle import CANCEL, SUBMIT, throttle_take


class _BucketThrottle(BaseThrottle):
    kind = SUBMIT

    def __init__(self):
        self.seconds_left: int | None = None

    def allow_request(self, request, view) -> bool:
        if request.method != "POST" or request.user is None:
            return True
        self.seconds_left = throttle_take(user=request.user, kind=self.kind)
        return self.seconds_left is None

    def wait(self) -> float | None:
        return self.seconds_left


class SubmissionThrottle(_BucketThrottle):
    kind = SUBMIT


class CancelThrottle(_BucketThrottle):
    kind = CANCEL
