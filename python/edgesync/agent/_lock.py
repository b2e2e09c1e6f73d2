"""One agent per source database and per state database.

Two agents on one source database share its journal (``__edgesync_journal``) and, with
one device id, its MQTT session: they take turns kicking each other off the broker and
leave journal rows neither confirms. Two agents on one ``state.db`` (the default path is
per user, not per source) mix their cursors. Each agent therefore holds an exclusive
``flock`` on a lock file beside each database for as long as it runs; the kernel drops
the lock when the process ends, however it ends, so a crashed agent never blocks the next.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
from pathlib import Path

from edgesync.errors import ConfigError

__all__ = ["InstanceLock", "lock_path"]

log = logging.getLogger("edgesync.agent")


def lock_path(db: Path) -> Path:
    """Beside the database, by its resolved path (a symlink or a relative spelling of the
    same file finds the same lock)."""
    db = db.resolve()
    return db.with_name(db.name + ".edgesync-agent.lock")


class InstanceLock:
    """``acquire()`` the locks of ``source`` and ``state`` or raise a one-line ConfigError
    naming the pid that holds them; ``release()`` when the agent stops."""

    def __init__(self, source: Path, state: Path) -> None:
        self._source, self._state = source, state
        self._fds: list[int] = []

    def acquire(self) -> None:
        try:
            self._take(self._source, "sqlite-replication.source_db_path",
                       "is captured by another edgesync agent{pid}; stop it first (two agents "
                       "on one database fight over its journal and MQTT session)",
                       optional=True)
            self._take(self._state, "sqlite-replication.state_db_path",
                       "is used by another edgesync agent{pid}; stop it, or give each agent "
                       "its own state_db_path")
        except BaseException:
            self.release()
            raise

    def release(self) -> None:
        for fd in self._fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        self._fds.clear()

    def _take(self, db: Path, field: str, busy: str, *, optional: bool = False) -> None:
        path = lock_path(db)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            if optional:  # a read-only directory: the state lock still guards the journal
                log.warning("cannot create %s (%s); a second agent on %s would not be "
                            "stopped", path, exc.strerror or exc, db)
                return
            raise ConfigError(field, f"cannot create the lock file {str(path)!r}: "
                                     f"{exc.strerror or exc}") from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as exc:
            holder = _read_pid(fd)
            os.close(fd)
            pid = f" (pid {holder})" if holder else ""
            raise ConfigError(field, f"{str(db)!r} " + busy.format(pid=pid)) from exc
        except OSError as exc:
            os.close(fd)
            raise ConfigError(field, f"cannot lock {str(path)!r}: {exc.strerror or exc}"
                              ) from exc
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fds.append(fd)


def _read_pid(fd: int) -> int | None:
    try:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None
