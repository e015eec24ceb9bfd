"""The cyclic garbage collector of a long-running process (a web worker, a Celery worker).

CPython collects its youngest objects after every 700 net allocations of container objects,
and the whole heap after every hundred of those. Our processes allocate thousands of objects
per request or run-job record (rows, model instances, decoded JSON) that live until it ends, so
the young collections promote them and the full ones walk the whole heap, Django's modules and
every app included: a large share of the web's and the executor's CPU (bench/NOTES.md). Once a
process has started, what it loaded is frozen (kept out of every collection: it lives as long
as the process), and collections run less often.
"""

from __future__ import annotations

import gc

# Net allocations between young collections (CPython's default: 700), young collections
# between middle ones (10), middle collections between full ones (10). Garbage in reference
# cycles lives longer; everything else is freed at once, as before. Rarer middle and full
# collections saved a little more CPU but held much more memory in a web process under the
# soak (bench/NOTES.md).
THRESHOLDS = (10_000, 10, 10)


def settle_after_start() -> None:
    """Call once the process has loaded what it keeps (its apps, its clients)."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*THRESHOLDS)
