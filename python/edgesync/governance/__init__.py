"""Schema governance: lineages, schema versions, classification, reviews, bindings."""

from edgesync.governance._admission import Admission, StagingReason, admit
from edgesync.governance._arrivals import Arrival, admit_arrivals
from edgesync.governance._bindings import load_state_target, load_state_targets
from edgesync.governance._classify import SchemaDiff, classify
from edgesync.governance._coalesced import (
    get_coalesced_mirror,
    get_registry_entry,
    list_coalesced_mirrors,
    list_registry_entries,
)
from edgesync.governance._consolidate import CONSOLIDATED_EVENT, consolidate
from edgesync.governance._data_points import (
    create_data_point,
    get_data_point,
    list_data_points,
    read_data_point_values,
)
from edgesync.governance._events import EVENT_CHANNEL, EventType, emit
from edgesync.governance._lineages import (
    Lineage,
    LineageStatus,
    PauseReason,
    add_staged,
    bump_cloud_version,
    count_materialized,
    count_rejected,
    delete_lineage_row,
    get_lineage_for_update,
    lock_lineages,
    note_materialization_error,
    pause_lineage,
    reset_materialization_errors,
    resume_lineage,
    set_sync_authority,
    take_staged,
)
from edgesync.governance._rebind import (
    RebindOutcome,
    RejectedVersion,
    replay_incompatibilities,
    replay_rejected,
)
from edgesync.governance._registry import COALESCING_MODES
from edgesync.governance._registry_reviews import (
    abandon_registry_review,
    approve_registry_review,
    claim_registry_review,
    get_registry_review,
    list_registry_reviews,
    reject_registry_review,
)
from edgesync.governance._replay import (
    REPLAY_CHANNEL,
    count_replayed,
    finish_replay,
    schedule_replay,
)
from edgesync.governance._reviews import (
    approve_review,
    claim_review,
    get_review,
    list_reviews,
    reject_review,
    reopen_review,
)
from edgesync.governance._statuses import ReviewStatus, SchemaStatus
from edgesync.governance._target_cache import forget_targets

__all__ = [
    "COALESCING_MODES",
    "CONSOLIDATED_EVENT",
    "EVENT_CHANNEL",
    "REPLAY_CHANNEL",
    "Admission",
    "Arrival",
    "EventType",
    "Lineage",
    "LineageStatus",
    "PauseReason",
    "RebindOutcome",
    "RejectedVersion",
    "ReviewStatus",
    "SchemaDiff",
    "SchemaStatus",
    "StagingReason",
    "abandon_registry_review",
    "add_staged",
    "admit",
    "admit_arrivals",
    "approve_registry_review",
    "approve_review",
    "bump_cloud_version",
    "claim_registry_review",
    "claim_review",
    "classify",
    "consolidate",
    "count_materialized",
    "count_rejected",
    "count_replayed",
    "create_data_point",
    "delete_lineage_row",
    "emit",
    "finish_replay",
    "forget_targets",
    "get_coalesced_mirror",
    "get_data_point",
    "get_lineage_for_update",
    "get_registry_entry",
    "get_registry_review",
    "get_review",
    "list_coalesced_mirrors",
    "list_data_points",
    "list_registry_entries",
    "list_registry_reviews",
    "list_reviews",
    "load_state_target",
    "load_state_targets",
    "lock_lineages",
    "note_materialization_error",
    "pause_lineage",
    "read_data_point_values",
    "reject_registry_review",
    "reject_review",
    "reopen_review",
    "replay_incompatibilities",
    "replay_rejected",
    "reset_materialization_errors",
    "resume_lineage",
    "schedule_replay",
    "set_sync_authority",
    "take_staged",
]
