"""Confirmations are logged as a summary at INFO at most once a minute (each one at
DEBUG): an agent used to log a line per confirmed batch (issue 27)."""

from __future__ import annotations

import logging

import pytest

from edgesync.agent.link._progress import ProgressLog


def test_confirmations_are_summed_up_once_a_period(caplog: pytest.LogCaptureFixture) -> None:
    now = [100.0]
    summary = ProgressLog(period=60.0, clock=lambda: now[0])
    with caplog.at_level(logging.INFO, logger="edgesync.agent"):
        summary.confirmed("t", 1, 5)  # the first: at once (the link works)
        for i in range(30):
            now[0] += 1.0
            summary.confirmed("t" if i % 2 else "temps", 1, 5)
        now[0] += 31.0
        summary.confirmed("t", 1, 5)  # 61 s after the first line
    lines = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
    assert lines == [
        "progress: 1 batch(es) of 1 table(s) confirmed by the cloud; 5 journal row(s) removed",
        "progress: 31 batch(es) of 2 table(s) confirmed by the cloud in the last 61 s; 155 "
        "journal row(s) removed",
    ]
