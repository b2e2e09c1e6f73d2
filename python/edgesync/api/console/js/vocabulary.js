// Written by `python -m edgesync.api._vocabulary` from the Python enums that own
// these words (edgesync.api._vocabulary names them): do not edit by hand.

export const ApiErrorCode = Object.freeze({
  BAD_REQUEST: "BAD_REQUEST",
  MALFORMED_JSON: "MALFORMED_JSON",
  VALIDATION_FAILED: "VALIDATION_FAILED",
  INVALID_REQUEST: "INVALID_REQUEST",
  INVALID_IDENTIFIER: "INVALID_IDENTIFIER",
  IDEMPOTENCY_KEY_REQUIRED: "IDEMPOTENCY_KEY_REQUIRED",
  IDEMPOTENCY_KEY_REUSED: "IDEMPOTENCY_KEY_REUSED",
  UNAUTHENTICATED: "UNAUTHENTICATED",
  ORG_ID_REQUIRED: "ORG_ID_REQUIRED",
  INVALID_ORG_ID: "INVALID_ORG_ID",
  ORG_MISMATCH: "ORG_MISMATCH",
  PERMISSION_DENIED: "PERMISSION_DENIED",
  METHOD_NOT_ALLOWED: "METHOD_NOT_ALLOWED",
  PAYLOAD_TOO_LARGE: "PAYLOAD_TOO_LARGE",
  UNSUPPORTED_MEDIA_TYPE: "UNSUPPORTED_MEDIA_TYPE",
  INTERNAL_ERROR: "INTERNAL_ERROR",
  NOT_FOUND: "NOT_FOUND",
  PROJECT_NOT_FOUND: "PROJECT_NOT_FOUND",
  DEVICE_NOT_FOUND: "DEVICE_NOT_FOUND",
  FLEET_NOT_FOUND: "FLEET_NOT_FOUND",
  LINEAGE_NOT_FOUND: "LINEAGE_NOT_FOUND",
  REVIEW_NOT_FOUND: "REVIEW_NOT_FOUND",
  REGISTRY_ENTRY_NOT_FOUND: "REGISTRY_ENTRY_NOT_FOUND",
  REGISTRY_REVIEW_NOT_FOUND: "REGISTRY_REVIEW_NOT_FOUND",
  COALESCED_MIRROR_NOT_FOUND: "COALESCED_MIRROR_NOT_FOUND",
  DATA_POINT_NOT_FOUND: "DATA_POINT_NOT_FOUND",
  SYNC_POLICY_NOT_FOUND: "SYNC_POLICY_NOT_FOUND",
  ATTACHMENT_NOT_FOUND: "ATTACHMENT_NOT_FOUND",
  MIRROR_NOT_PROVISIONED: "MIRROR_NOT_PROVISIONED",
  TELEMETRY_NOT_PROVISIONED: "TELEMETRY_NOT_PROVISIONED",
  CONFLICT: "CONFLICT",
  ACTION_VERSION_CONFLICT: "ACTION_VERSION_CONFLICT",
  DEVICE_NAME_ALREADY_IN_USE: "DEVICE_NAME_ALREADY_IN_USE",
  DATA_POINT_NAME_ALREADY_IN_USE: "DATA_POINT_NAME_ALREADY_IN_USE",
  SYNC_POLICY_NAME_IN_USE: "SYNC_POLICY_NAME_IN_USE",
  DEVICE_REVOKED: "DEVICE_REVOKED",
  UPLOAD_NOT_FOUND: "UPLOAD_NOT_FOUND",
  UPLOAD_ALREADY_RECEIVED: "UPLOAD_ALREADY_RECEIVED",
  UPLOAD_URL_EXPIRED: "UPLOAD_URL_EXPIRED",
  UPLOAD_TOO_LARGE: "UPLOAD_TOO_LARGE",
  INVALID_BOOTSTRAP_CERT: "INVALID_BOOTSTRAP_CERT",
  BOOTSTRAP_CERT_UNTRUSTED: "BOOTSTRAP_CERT_UNTRUSTED",
  BOOTSTRAP_CERT_EXPIRED: "BOOTSTRAP_CERT_EXPIRED",
  BOOTSTRAP_CERT_NOT_FOUND: "BOOTSTRAP_CERT_NOT_FOUND",
  BOOTSTRAP_CERT_REVOKED: "BOOTSTRAP_CERT_REVOKED",
  BOOTSTRAP_CERT_FLEET_MISMATCH: "BOOTSTRAP_CERT_FLEET_MISMATCH",
  BOOTSTRAP_CERT_ORG_MISMATCH: "BOOTSTRAP_CERT_ORG_MISMATCH",
  BOOTSTRAP_QUOTA_EXHAUSTED: "BOOTSTRAP_QUOTA_EXHAUSTED",
  INVALID_CSR: "INVALID_CSR",
  STATE_NOT_CLOUD_AUTHORITATIVE: "edge_state_not_cloud_authoritative",
  STATE_MIRROR_NOT_PROVISIONED: "edge_state_mirror_not_provisioned",
  STATE_WRITE_FAILED: "edge_state_write_failed",
  CONNECTION_FAILED: "CONNECTION_FAILED",
  HTTP_ERROR: "HTTP_ERROR",
  PROJECT_AMBIGUOUS: "PROJECT_AMBIGUOUS",
});

export const Pipeline = Object.freeze({
  ROWS: "rows",
  TELEMETRY: "telemetry",
});

export const LineageStatus = Object.freeze({
  ACTIVE: "active",
  PAUSED: "paused",
});

export const PauseReason = Object.freeze({
  SCHEMA_REVIEW: "schema_review",
  DEFERRED_COLUMNS: "deferred_columns",
  BACKPRESSURE: "backpressure",
  CIRCUIT_BREAKER: "circuit_breaker",
});

export const SyncAuthority = Object.freeze({
  DEVICE: "device_authoritative",
  CLOUD: "cloud_authoritative",
});

export const ReviewStatus = Object.freeze({
  QUEUED: "queued",
  IN_REVIEW: "in_review",
  APPROVED: "approved",
  REJECTED: "rejected",
  ABANDONED: "abandoned",
});

export const SchemaStatus = Object.freeze({
  PENDING: "pending",
  APPROVED: "approved",
  REJECTED: "rejected",
  ABANDONED: "abandoned",
});

export const ColumnActionKind = Object.freeze({
  MIRROR: "mirror",
  MAP: "map",
  IGNORE: "ignore",
  DEFER: "defer",
  AUTO_CREATE_AND_MAP: "auto_create_and_map",
});

export const StrategyKind = Object.freeze({
  ROWS: "rows",
  TELEMETRY: "telemetry",
  IGNORE: "ignore",
});

export const ResnapshotStatus = Object.freeze({
  REQUESTED: "requested",
  RUNNING: "running",
  COMPLETED: "completed",
  FAILED: "failed",
});

export const VerificationStatus = Object.freeze({
  REQUESTED: "requested",
  EQUAL: "equal",
  DIFFERENT: "different",
  FAILED: "failed",
});

export const QuarantineStatus = Object.freeze({
  OPEN: "open",
  SUPERSEDED: "superseded",
  RETRIED: "retried",
});

export const ReplayStatus = Object.freeze({
  PENDING: "pending",
  DONE: "done",
  FAILED: "failed",
});
