"""Workflows: jobs that depend on jobs (ARCHITECTURE §16).

    from jobweaver.workflows import Workflow, chain, chord, group

Exported lazily (apps/workflows/canvas.py): importing this package, as Django does to load the
app, imports no model.
"""

from __future__ import annotations

_LAZY = ("Workflow", "chain", "group", "chord", "signature", "Signature", "EnqueuedWorkflow")


def __getattr__(name: str):
    # A module __getattr__ (PEP 562): the canvas imports models, so it loads on use.
    if name in _LAZY:
        from importlib import import_module

        return getattr(import_module("jobweaver.workflows.canvas"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
