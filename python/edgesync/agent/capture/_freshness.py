"""When the agent first saw each journaled change: the ``first_seen_at_ms`` stamp.

The application's writes pay nothing for it (the triggers write no time): at every
journal poll the agent notes the journal's high-water ``commit_seq`` with the time it
read it, once per poll that found new rows. A change with ``commit_seq`` S was first
seen at the earliest poll whose high-water is at least S, so a batch is stamped with
that poll's time for its oldest change (``first_commit_seq``). The marks live in
memory: after a restart the first poll's time stands for every change made meanwhile
(the agent saw them then). Marks below every table's cursor are dropped.

docs/protocol.md ("Freshness stamp") describes the field; other agents may omit it.
"""

from __future__ import annotations

import bisect
import time

__all__ = ["SeenMarks"]

# Polls remembered at most (a table whose cursor stands still keeps old marks alive):
# past this the oldest are merged into the next, which only makes stamps later.
_MAX_MARKS = 100_000


class SeenMarks:
    """(high-water commit_seq, Unix ms) per journal poll that found new rows."""

    def __init__(self) -> None:
        self._seqs: list[int] = []
        self._times: list[int] = []

    def polled(self, high_water: int, now_ms: int | None = None) -> None:
        """The journal's high-water mark as a poll just read it."""
        if self._seqs and high_water < self._seqs[-1]:
            self._seqs.clear()  # the journal was rebuilt: commit_seq starts over
            self._times.clear()
        if self._seqs and high_water == self._seqs[-1]:
            return
        self._seqs.append(high_water)
        self._times.append(int(time.time() * 1000) if now_ms is None else now_ms)
        if len(self._seqs) > _MAX_MARKS:
            del self._seqs[0]
            del self._times[0]

    def first_seen_ms(self, commit_seq: int) -> int | None:
        """Unix ms of the first poll that saw ``commit_seq``; None when no poll did."""
        i = bisect.bisect_left(self._seqs, commit_seq)
        return self._times[i] if i < len(self._seqs) else None

    def prune(self, below: int) -> None:
        """Forget the marks of changes below ``below`` only (every table's cursor
        is past them)."""
        i = bisect.bisect_left(self._seqs, below)
        if i:
            del self._seqs[:i]
            del self._times[:i]

    def __len__(self) -> int:
        return len(self._seqs)
