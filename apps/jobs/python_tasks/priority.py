"""DEP 14 priorities (-100 … 100, default 0) onto JobWeaver's (0 … 9, default 5), and back.

The default maps onto the default, so a task enqueued without a priority competes evenly with
a simulation job submitted without one; the ends map onto the ends; the mapping is monotonic.
It is coarse (201 values onto 10), so the job keeps the task's own priority too and
`get_result` reports that one.
"""

from __future__ import annotations

import math

JOBWEAVER_MIN, JOBWEAVER_DEFAULT, JOBWEAVER_MAX = 0, 5, 9
TASK_MIN, TASK_DEFAULT, TASK_MAX = -100, 0, 100


def to_jobweaver(priority: int) -> int:
    """A task priority as a job priority: 0 → 5, 100 → 9, -100 → 0."""
    if not TASK_MIN <= priority <= TASK_MAX:
        raise ValueError(f"priority must be between {TASK_MIN} and {TASK_MAX}, got {priority}")
    above, below = JOBWEAVER_MAX - JOBWEAVER_DEFAULT, JOBWEAVER_DEFAULT - JOBWEAVER_MIN
    scale = above if priority >= 0 else below
    return JOBWEAVER_DEFAULT + math.floor(priority * scale / TASK_MAX + 0.5)


def from_jobweaver(priority: int) -> int:
    """A job priority as a task priority (for TASK jobs submitted through the API or CLI):
    the inverse of `to_jobweaver` on the values it produces."""
    if not JOBWEAVER_MIN <= priority <= JOBWEAVER_MAX:
        raise ValueError(f"priority must be between 0 and 9, got {priority}")
    if priority >= JOBWEAVER_DEFAULT:
        return (priority - JOBWEAVER_DEFAULT) * TASK_MAX // (JOBWEAVER_MAX - JOBWEAVER_DEFAULT)
    return (priority - JOBWEAVER_DEFAULT) * TASK_MAX // (JOBWEAVER_DEFAULT - JOBWEAVER_MIN)
