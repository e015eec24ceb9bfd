"""Per-user throttling of submissions (OWASP API4): at most JOBWEAVER_SUBMIT_THROTTLE_RATE
submission requests (POST /api/jobs, POST /api/jobs/batch) per user per window, counted in
PostgreSQL so all web processes share one count. Over it: 429 API.THROTTLED with Retry-After.
Reads are not throttled here; the per-user cap on waiting and running jobs bounds the volume a
user can queue (apps/jobs/services.py)."""

from __future__ import annotations

from rest_framework.throttling import BaseThrottle

from jobweaver.accounts.services import submission_throttle_hit


class SubmissionThrottle(BaseThrottle):
    def __init__(self):
        self.seconds_left: float | None = None

    def allow_request(self, request, view) -> bool:
        if request.method != "POST" or request.user is None:
            return True
        self.seconds_left = submission_throttle_hit(user=request.user)
        return self.seconds_left is None

    def wait(self) -> float | None:
        return self.seconds_left
