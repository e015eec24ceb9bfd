"""A worker process whose wall clock is off by JOBWEAVER_TEST_CLOCK_SKEW_SECONDS (ARCHITECTURE
§4a, "one clock"): Python's `time.time` and Django's `timezone.now` are shifted before anything
starts, so any lease, due time or liveness computed from this process's clock would be wrong.

    python -m tests.skewed_worker executor NAME
"""

from __future__ import annotations

import os
import sys
import time
from datetime import timedelta

SKEW = float(os.environ.get("JOBWEAVER_TEST_CLOCK_SKEW_SECONDS", "0"))

_real_time = time.time
time.time = lambda: _real_time() + SKEW

import django.utils.timezone as django_timezone  # noqa: E402

_real_now = django_timezone.now
django_timezone.now = lambda: _real_now() + timedelta(seconds=SKEW)

from jobweaver_site.workers import main  # noqa: E402

if __name__ == "__main__":
    main(sys.argv[1:])
