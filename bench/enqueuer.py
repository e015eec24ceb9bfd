"""The enqueuing side of a compared system in `make bench`, as a process of its own.

bench/throughput.py starts `python -m bench.<app> enqueue` (in .venv or the bench venv), which
connects, prints "ready", then for each line "<run id> <count>" on its stdin enqueues that many
no-op jobs and prints "<start> <end>" (epoch seconds). It lives until its stdin closes, so its
CPU is read while it runs, as a process of the system (like our web process), and neither its
interpreter's start nor this script's polling is counted in it. No dependencies: both venvs
import it.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable


def serve(enqueue: Callable[[str, int], None]) -> None:
    print("ready", flush=True)
    for line in sys.stdin:
        run_id, count = line.split()
        started = time.time()
        enqueue(run_id, int(count))
        print(f"{started:.6f} {time.time():.6f}", flush=True)
