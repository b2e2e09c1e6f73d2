"""Every exception edgesync raises, defined once.

The Rust extension (``edgesync._core``) raises these same classes: its single
error enum is converted in one place in the binding crate, so Python callers
never see a Rust-specific type.

    EdgesyncError
    ├── ConfigError            bad YAML / CLI option; ``field`` names the key
    ├── BatchRejected          a device payload failed validation; ``code`` is a
    │                          rejection code from the protocol (see docs/protocol.md)
    ├── SchemaError            a fingerprint input that cannot describe a table
    ├── BlobError              a staged blob that cannot be (de)compressed
    ├── IdentifierError        a device-supplied SQL identifier that cannot be used
    ├── StoreError             database set-up problems
    │   └── SchemaTooNewError  the database was migrated by a newer edgesync
    ├── InvalidRequestError    an operator request that cannot be carried out as
    │                          asked; ``field`` names the offending part
    ├── NotFoundError          an object that does not exist (or is not visible)
    ├── ConflictError          optimistic-concurrency or state-machine conflict
    ├── StateWriteError        a cloud write-back that cannot be done; ``code`` is the
    │                          documented edge_state_* error code
    ├── BrokerError            the MQTT broker could not be reached or refused us
    └── ControlRejected        a downlink control failed signature, expiry or replay
                               checks; ``reason`` says which
"""

from __future__ import annotations

__all__ = [
    "BatchRejected",
    "BlobError",
    "BrokerError",
    "ConfigError",
    "ConflictError",
    "ControlRejected",
    "EdgesyncError",
    "IdentifierError",
    "InvalidRequestError",
    "NotFoundError",
    "SchemaError",
    "SchemaTooNewError",
    "StateWriteError",
    "StoreError",
]


class EdgesyncError(Exception):
    """Base class of every error edgesync raises on purpose."""


class ConfigError(EdgesyncError):
    """A configuration value is missing or invalid."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


class BatchRejected(EdgesyncError):
    """A device payload was refused; ``code`` is the protocol rejection code."""

    def __init__(self, code: str, detail: str, field: str | None = None) -> None:
        where = f" (field {field})" if field else ""
        super().__init__(f"{code}{where}: {detail}")
        self.code = code
        self.detail = detail
        self.field = field


class SchemaError(EdgesyncError):
    """A table description cannot be fingerprinted."""


class BlobError(EdgesyncError):
    """A staged blob could not be compressed or decompressed."""


class IdentifierError(EdgesyncError):
    """A table or column name from a device cannot become a PostgreSQL identifier."""


class StoreError(EdgesyncError):
    """The cloud database could not be prepared or used."""


class SchemaTooNewError(StoreError):
    """The database carries migrations this edgesync does not know."""


class InvalidRequestError(EdgesyncError):
    """An operator request is malformed or names something that does not fit."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


class NotFoundError(EdgesyncError):
    """The object does not exist, or the caller may not see it."""


class ConflictError(EdgesyncError):
    """A state change lost a race or is not allowed from the current state."""


class BrokerError(EdgesyncError):
    """The MQTT broker could not be reached or refused the connection."""


class ControlRejected(EdgesyncError):
    """A signed downlink control was refused (unsigned, bad_signature, expired, replayed)."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


class StateWriteError(EdgesyncError):
    """Cloud write-back refused: ``edge_state_not_cloud_authoritative``,
    ``edge_state_mirror_not_provisioned`` or ``edge_state_write_failed``."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
