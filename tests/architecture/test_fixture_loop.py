"""The suite's conftest keeps one session loop for sync and async tests alike.

A synchronous test that asks for ``pool`` after an async test set up ``database_url``
(but not ``pool``) in the same worker process used to fail at setup: pytest tore the
session loop down under it ("The fixture value for "database_url" is not available").
xdist's file order made that happen in CI only now and then; here the order is fixed.
(No third, async test after the sync one: pytest would reorder the items by the loop
parameter and hide the failure.)
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

ASYNC_FIRST = '''
async def test_a_async_takes_the_database_url(database_url: str) -> None:
    assert database_url.startswith("postgresql://")
'''

SYNC_SECOND = '''
from typing import Any


def test_b_sync_takes_the_pool(pool: Any, database_url: str) -> None:
    assert pool.get_size() >= 1
'''


def test_a_sync_test_after_an_async_one_keeps_the_session_fixtures(tmp_path: Path) -> None:
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    tests = tmp_path / "tests"
    tests.mkdir()
    shutil.copy(ROOT / "tests" / "conftest.py", tests / "conftest.py")
    (tests / "test_1_async.py").write_text(ASYNC_FIRST)
    (tests / "test_2_sync.py").write_text(SYNC_SECOND)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "0", "-q",
         "tests/test_1_async.py", "tests/test_2_sync.py"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "2 passed" in done.stdout, done.stdout[-2000:]
