"""PostgreSQL access: connection pools, versioned migrations, the embedded server."""

from edgesync.store._conn import Conn
from edgesync.store._connect import open_database
from edgesync.store._embedded import embedded_postgres
from edgesync.store._keyed import any_of
from edgesync.store._migrations import KNOWN_VERSION, applied_version, migrate
from edgesync.store._pool import create_pool, unlock_session_lock
from edgesync.store._records import from_record
from edgesync.store._replica import ReplicaGate, check_replica_visibility
from edgesync.store._tail import CommitTail, array_literal, committing
from edgesync.store._transient import CONCURRENCY_ERRORS, TRANSIENT_ERRORS, collided
from edgesync.store._url import check_database_url

__all__ = [
    "CONCURRENCY_ERRORS",
    "KNOWN_VERSION",
    "TRANSIENT_ERRORS",
    "CommitTail",
    "Conn",
    "ReplicaGate",
    "any_of",
    "applied_version",
    "array_literal",
    "check_database_url",
    "check_replica_visibility",
    "collided",
    "committing",
    "create_pool",
    "embedded_postgres",
    "from_record",
    "migrate",
    "open_database",
    "unlock_session_lock",
]
