"""``edgesync demo``: the whole story, end to end, on the embedded defaults."""

from edgesync.demo._story import run_demo

__all__ = ["run_demo"]
