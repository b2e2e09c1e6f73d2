"""Downlink control: the outbox and its sender, progress confirmations, and the pauses
that reach devices (backpressure, materialization circuit breaker). The HTTP endpoint of
presigned uploads is in ``edgesync.api.routes.uploads``: nothing here imports FastAPI."""

from edgesync.control._authority import (
    SYNC_AUTHORITIES,
    SyncAuthorityChange,
    change_sync_authority,
)
from edgesync.control._flow import (
    MaterializationReset,
    check_backpressure,
    record_materialization_failure,
    reset_materialization,
    sweep_backpressure,
)
from edgesync.control._forget import FORGET_LINEAGE, AfterForget, forget_on_device
from edgesync.control._jobs import (
    Resnapshot,
    ResnapshotStatus,
    Verification,
    VerificationStatus,
    recovery_job,
    recovery_jobs,
)
from edgesync.control._objects import MAX_OBJECT_BYTES, ObjectStore
from edgesync.control._offers import (
    OfferReason,
    RecoveryAction,
    RecoveryOffer,
    recovery_offers,
)
from edgesync.control._outbox import (
    CONTROL_CHANNEL,
    ControlStatus,
    ack_control,
    enqueue_control,
)
from edgesync.control._progress import ProgressReporter
from edgesync.control._publisher import MqttPublisher
from edgesync.control._resnapshot import record_resnapshot_status, request_resnapshot
from edgesync.control._sender import ControlSender, Publisher
from edgesync.control._sweeper import BackpressureSweeper
from edgesync.control._sync_policy import send_sync_policy
from edgesync.control._uploads import (
    GRANT_TTL,
    Upload,
    UploadGrant,
    UploadStatus,
    finalize_upload,
    grant_upload,
    note_ingested,
    note_uploaded,
    verify_upload_url,
)
from edgesync.control._verify import (
    DEFAULT_PREFIX as DEFAULT_VERIFY_PREFIX,
)
from edgesync.control._verify import record_verify_digest, request_verify
from edgesync.control._verify_schedule import VerificationScheduler
from edgesync.control._writeback import (
    MAX_WRITE_ROWS,
    StateWrite,
    resend_cloud_rows,
    write_state_rows,
)

__all__ = [
    "CONTROL_CHANNEL",
    "DEFAULT_VERIFY_PREFIX",
    "FORGET_LINEAGE",
    "GRANT_TTL",
    "MAX_OBJECT_BYTES",
    "MAX_WRITE_ROWS",
    "SYNC_AUTHORITIES",
    "AfterForget",
    "BackpressureSweeper",
    "ControlSender",
    "ControlStatus",
    "MaterializationReset",
    "MqttPublisher",
    "ObjectStore",
    "OfferReason",
    "ProgressReporter",
    "Publisher",
    "RecoveryAction",
    "RecoveryOffer",
    "Resnapshot",
    "ResnapshotStatus",
    "StateWrite",
    "SyncAuthorityChange",
    "Upload",
    "UploadGrant",
    "UploadStatus",
    "Verification",
    "VerificationScheduler",
    "VerificationStatus",
    "ack_control",
    "change_sync_authority",
    "check_backpressure",
    "enqueue_control",
    "finalize_upload",
    "forget_on_device",
    "grant_upload",
    "note_ingested",
    "note_uploaded",
    "record_materialization_failure",
    "record_resnapshot_status",
    "record_verify_digest",
    "recovery_job",
    "recovery_jobs",
    "recovery_offers",
    "request_resnapshot",
    "request_verify",
    "resend_cloud_rows",
    "reset_materialization",
    "send_sync_policy",
    "sweep_backpressure",
    "verify_upload_url",
    "write_state_rows",
]
