"""Every exception edgesync raises, defined once, grouped by what a caller catches.

The Rust extension (``edgesync._core``) raises these same classes: its single
error enum is converted in one place in the binding crate, so Python callers
never see a Rust-specific type. ``tests/architecture/test_errors_tree.py`` checks the
classes against this tree.

    EdgesyncError
    ├── ConfigError                bad YAML / CLI option / server setting; ``field`` names the key
    ├── BrokerError                the MQTT broker could not be reached or refused us
    ├── IngestError                device data that cannot be taken in as sent
    │   ├── BatchRejected          a payload failed validation; ``code`` is a
    │   │                          ``protocol.RejectionCode`` (see docs/protocol.md)
    │   ├── SchemaError            a fingerprint input that cannot describe a table
    │   ├── BlobError              a staged blob that cannot be (de)compressed
    │   └── IdentifierError        a device-supplied SQL identifier that cannot be used
    ├── RequestError               an operator request that cannot be carried out
    │   ├── InvalidRequestError    not as asked; ``field`` names the offending part
    │   ├── NotFoundError          an object that does not exist (or is not visible)
    │   ├── ConflictError          optimistic-concurrency or state-machine conflict
    │   └── StateWriteError        a cloud write-back that cannot be done; ``code`` is the
    │                              documented edge_state_* error code
    ├── HttpError                  an HTTP error answer: status, code, message, field
    │   ├── ApiError               raised by a route: the API answers with it
    │   ├── ApiClientError         the API answered with one (or could not be reached)
    │   └── EnrollmentError        a device enrollment (JITR) was refused
    ├── StoreError                 the cloud database (PostgreSQL) could not be prepared or used
    │   └── SchemaTooNewError      the database was migrated by a newer edgesync
    ├── ServerLifecycleError       a ``Server`` used out of order (a part read before
    │                              ``async with`` entered it, entered twice, two ``run()``)
    └── DeviceError                the device side: the agent
        ├── DeviceStateError       the agent's state.db cannot be opened or prepared
        ├── OversizedRowError      one journal row alone is larger than a batch may be
        ├── ControlRejected        a downlink control failed signature, expiry or replay
        │                          checks; ``reason`` says which
        └── AgentLifecycleError    an ``Agent`` used out of order (``flush()`` outside its
                                   ``async with``, entered twice, two ``run()``)

``ConfigError`` and ``InvalidRequestError`` share their body (``field``, ``reason``) but
stay two classes: a configuration problem stops a command or service at start, a bad
request is answered (HTTP 422) and the service goes on.
"""

from __future__ import annotations

import enum

__all__ = [
    "AgentLifecycleError",
    "ApiClientError",
    "ApiError",
    "BatchRejected",
    "BlobError",
    "BrokerError",
    "ConfigError",
    "ConflictError",
    "ControlRejected",
    "DeviceError",
    "DeviceStateError",
    "EdgesyncError",
    "EnrollmentError",
    "HttpError",
    "IdentifierError",
    "IngestError",
    "InvalidRequestError",
    "NotFoundError",
    "OversizedRowError",
    "RequestError",
    "SchemaError",
    "SchemaTooNewError",
    "ServerLifecycleError",
    "StateWriteError",
    "StoreError",
]


class EdgesyncError(Exception):
    """Base class of every error edgesync raises on purpose."""


class _FieldReason(EdgesyncError):
    """``field`` names the offending key or part, ``reason`` says what is wrong."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


class ConfigError(_FieldReason):
    """A configuration value is missing or invalid."""


class BrokerError(EdgesyncError):
    """The MQTT broker could not be reached or refused the connection."""


# --- ingest: device data -------------------------------------------------------------

class IngestError(EdgesyncError):
    """Device data that cannot be taken in as sent."""


class BatchRejected(IngestError):
    """A device payload was refused; ``code`` is the protocol rejection code
    (a ``protocol.RejectionCode``, or its value when raised by ``_core``)."""

    def __init__(self, code: str, detail: str, field: str | None = None) -> None:
        where = f" (field {field})" if field else ""
        super().__init__(f"{code}{where}: {detail}")
        self.code = code
        self.detail = detail
        self.field = field


class SchemaError(IngestError):
    """A table description cannot be fingerprinted."""


class BlobError(IngestError):
    """A staged blob could not be compressed or decompressed."""


class IdentifierError(IngestError):
    """A table or column name from a device cannot become a PostgreSQL identifier."""


# --- operator requests ---------------------------------------------------------------

class RequestError(EdgesyncError):
    """An operator request (API, CLI, governance call) that cannot be carried out."""


class InvalidRequestError(_FieldReason, RequestError):
    """An operator request is malformed or names something that does not fit."""


class NotFoundError(RequestError):
    """The object does not exist, or the caller may not see it."""


class ConflictError(RequestError):
    """A state change lost a race or is not allowed from the current state."""


class StateWriteError(RequestError):
    """Cloud write-back refused: ``edge_state_not_cloud_authoritative``,
    ``edge_state_mirror_not_provisioned`` or ``edge_state_write_failed``."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


# --- HTTP answers --------------------------------------------------------------------

class ApiErrorCode(enum.StrEnum):
    """Every ``code`` the HTTP API answers with (``{"error": {"code": …}}``).

    The API raises them (``ApiError``, ``StateWriteError``); its clients (the CLI's client,
    the TUI) compare ``ApiClientError.code`` with them, and the web console reads them from
    ``api/console/js/vocabulary.js``, written from this enum (``edgesync.api._vocabulary``).
    Here, beside the errors that carry them, because the TUI loads nothing of the server
    (tests/tui/test_tui_boundary.py); not in ``__all__``, which lists the exceptions.
    ``CONNECTION_FAILED``, ``HTTP_ERROR`` and ``PROJECT_AMBIGUOUS`` are the client's own:
    the API could not be reached, answered without an error envelope, or a project name
    matched several projects. The write-back codes keep the reference's lower case
    (docs/api.md, "Write-back")."""

    # The request as a whole (400, 401, 403, 405, 413, 415, 422, 500).
    BAD_REQUEST = "BAD_REQUEST"
    MALFORMED_JSON = "MALFORMED_JSON"
    VALIDATION_FAILED = "VALIDATION_FAILED"
    INVALID_REQUEST = "INVALID_REQUEST"
    INVALID_IDENTIFIER = "INVALID_IDENTIFIER"
    IDEMPOTENCY_KEY_REQUIRED = "IDEMPOTENCY_KEY_REQUIRED"
    IDEMPOTENCY_KEY_REUSED = "IDEMPOTENCY_KEY_REUSED"
    UNAUTHENTICATED = "UNAUTHENTICATED"
    ORG_ID_REQUIRED = "ORG_ID_REQUIRED"
    INVALID_ORG_ID = "INVALID_ORG_ID"
    ORG_MISMATCH = "ORG_MISMATCH"
    PERMISSION_DENIED = "PERMISSION_DENIED"
    METHOD_NOT_ALLOWED = "METHOD_NOT_ALLOWED"
    PAYLOAD_TOO_LARGE = "PAYLOAD_TOO_LARGE"
    UNSUPPORTED_MEDIA_TYPE = "UNSUPPORTED_MEDIA_TYPE"
    INTERNAL_ERROR = "INTERNAL_ERROR"
    # 404: an object that does not exist, or the token may not see.
    NOT_FOUND = "NOT_FOUND"
    PROJECT_NOT_FOUND = "PROJECT_NOT_FOUND"
    DEVICE_NOT_FOUND = "DEVICE_NOT_FOUND"
    FLEET_NOT_FOUND = "FLEET_NOT_FOUND"
    LINEAGE_NOT_FOUND = "LINEAGE_NOT_FOUND"
    REVIEW_NOT_FOUND = "REVIEW_NOT_FOUND"
    REGISTRY_ENTRY_NOT_FOUND = "REGISTRY_ENTRY_NOT_FOUND"
    REGISTRY_REVIEW_NOT_FOUND = "REGISTRY_REVIEW_NOT_FOUND"
    COALESCED_MIRROR_NOT_FOUND = "COALESCED_MIRROR_NOT_FOUND"
    DATA_POINT_NOT_FOUND = "DATA_POINT_NOT_FOUND"
    SYNC_POLICY_NOT_FOUND = "SYNC_POLICY_NOT_FOUND"
    ATTACHMENT_NOT_FOUND = "ATTACHMENT_NOT_FOUND"
    MIRROR_NOT_PROVISIONED = "MIRROR_NOT_PROVISIONED"
    TELEMETRY_NOT_PROVISIONED = "TELEMETRY_NOT_PROVISIONED"
    # 409: the object changed meanwhile, or is in the wrong state.
    CONFLICT = "CONFLICT"
    ACTION_VERSION_CONFLICT = "ACTION_VERSION_CONFLICT"
    DEVICE_NAME_ALREADY_IN_USE = "DEVICE_NAME_ALREADY_IN_USE"
    DATA_POINT_NAME_ALREADY_IN_USE = "DATA_POINT_NAME_ALREADY_IN_USE"
    SYNC_POLICY_NAME_IN_USE = "SYNC_POLICY_NAME_IN_USE"
    DEVICE_REVOKED = "DEVICE_REVOKED"
    # A device's presigned upload (``PUT /uploads/{id}``).
    UPLOAD_NOT_FOUND = "UPLOAD_NOT_FOUND"
    UPLOAD_ALREADY_RECEIVED = "UPLOAD_ALREADY_RECEIVED"
    UPLOAD_URL_EXPIRED = "UPLOAD_URL_EXPIRED"
    UPLOAD_TOO_LARGE = "UPLOAD_TOO_LARGE"
    # JITR enrollment (docs/security.md "JITR enrollment")
    INVALID_BOOTSTRAP_CERT = "INVALID_BOOTSTRAP_CERT"
    BOOTSTRAP_CERT_UNTRUSTED = "BOOTSTRAP_CERT_UNTRUSTED"
    BOOTSTRAP_CERT_EXPIRED = "BOOTSTRAP_CERT_EXPIRED"
    BOOTSTRAP_CERT_NOT_FOUND = "BOOTSTRAP_CERT_NOT_FOUND"
    BOOTSTRAP_CERT_REVOKED = "BOOTSTRAP_CERT_REVOKED"
    BOOTSTRAP_CERT_FLEET_MISMATCH = "BOOTSTRAP_CERT_FLEET_MISMATCH"
    BOOTSTRAP_CERT_ORG_MISMATCH = "BOOTSTRAP_CERT_ORG_MISMATCH"
    BOOTSTRAP_QUOTA_EXHAUSTED = "BOOTSTRAP_QUOTA_EXHAUSTED"
    INVALID_CSR = "INVALID_CSR"
    # Cloud write-back to a device's state table.
    STATE_NOT_CLOUD_AUTHORITATIVE = "edge_state_not_cloud_authoritative"
    STATE_MIRROR_NOT_PROVISIONED = "edge_state_mirror_not_provisioned"
    STATE_WRITE_FAILED = "edge_state_write_failed"
    # The client's own.
    CONNECTION_FAILED = "CONNECTION_FAILED"
    HTTP_ERROR = "HTTP_ERROR"
    PROJECT_AMBIGUOUS = "PROJECT_AMBIGUOUS"



class HttpError(EdgesyncError):
    """An HTTP error answer: ``status``, a stable ``code``, a ``message`` and the
    ``field`` it is about (None when it is about the request as a whole)."""

    def __init__(self, status: int, code: str, message: str, field: str | None = None) -> None:
        super().__init__(self._text(status, code, message, field))
        self.status = status
        self.code = code
        self.message = message
        self.field = field

    @staticmethod
    def _text(status: int, code: str, message: str, field: str | None) -> str:
        return f"{code}: {message}"


class ApiError(HttpError):
    """An error answer of the API with its own status and stable code (``headers`` are
    sent with it)."""

    def __init__(self, status: int, code: str, message: str, field: str | None = None,
                 headers: dict[str, str] | None = None) -> None:
        super().__init__(status, code, message, field)
        self.headers = headers

    @staticmethod
    def _text(status: int, code: str, message: str, field: str | None) -> str:
        return message


class ApiClientError(HttpError):
    """The API answered with an error (``status`` > 0), or could not be reached
    (``status`` 0, ``code`` ``CONNECTION_FAILED``). ``refusals``: a refused approval's
    refused columns, as the API listed them (docs/api.md, "Refusals")."""

    refusals: tuple[dict[str, object], ...] = ()

    @staticmethod
    def _text(status: int, code: str, message: str, field: str | None) -> str:
        where = f" (field {field})" if field else ""
        head = f"HTTP {status} {code}" if status else code
        return f"{head}: {message}{where}"


class EnrollmentError(HttpError):
    """An enrollment refused with an HTTP status and a stable code."""


# --- stores --------------------------------------------------------------------------

class StoreError(EdgesyncError):
    """The cloud database (PostgreSQL) could not be prepared or used."""


class SchemaTooNewError(StoreError):
    """The database carries migrations this edgesync does not know."""


# --- the device ----------------------------------------------------------------------

class _OutOfOrder(EdgesyncError, RuntimeError):
    """A service used out of order; ``action`` names the call, the message the fix.
    Also a ``RuntimeError``, as asyncio and httpx raise for the same misuse."""

    def __init__(self, action: str, reason: str) -> None:
        super().__init__(f"{action}: {reason}")
        self.action = action
        self.reason = reason


class ServerLifecycleError(_OutOfOrder):
    """A ``Server`` used out of order (see ``server._lifecycle``)."""


class DeviceError(EdgesyncError):
    """A failure on the device side (the agent)."""


class DeviceStateError(DeviceError):
    """The agent's ``state.db`` could not be opened or prepared."""


class OversizedRowError(DeviceError):
    """One journal row alone does not fit in a batch (needs the spill flow)."""

    def __init__(self, table: str, commit_seq: int, size: int, limit: int) -> None:
        super().__init__(
            f"table {table!r}: journal row commit_seq={commit_seq} needs {size} bytes, "
            f"more than a batch may carry ({limit}); publishing of this table "
            "is held until it can be sent")
        self.table, self.commit_seq, self.size = table, commit_seq, size


class ControlRejected(DeviceError):
    """A signed downlink control was refused (unsigned, bad_signature, expired, replayed)."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


class AgentLifecycleError(DeviceError, _OutOfOrder):
    """An ``Agent`` used out of order (see ``agent._lifecycle``)."""
