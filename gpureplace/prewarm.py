"""Warm the compiler (and CUDA) in the background while the user types: ``start()``, ``wait()``,
``report()`` (what it does, its hazards and how they are met: gpureplace/runtime/prewarm.py)."""

from .runtime.prewarm import enabled, is_started, report, start, wait

__all__ = ["enabled", "is_started", "report", "start", "wait"]
