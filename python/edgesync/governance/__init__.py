"""Schema governance: lineages, schema versions, classification, reviews, bindings."""

from edgesync.governance._admission import Admission, admit
from edgesync.governance._bindings import REPLAY_CHANNEL, load_state_target
from edgesync.governance._classify import SchemaDiff, classify
from edgesync.governance._events import EVENT_CHANNEL, emit
from edgesync.governance._lineages import (
    Lineage,
    get_lineage_for_update,
    lock_lineage,
    pause_lineage,
    resume_lineage,
)
from edgesync.governance._reviews import (
    approve_review,
    claim_review,
    get_review,
    list_reviews,
    reject_review,
)

__all__ = [
    "EVENT_CHANNEL",
    "REPLAY_CHANNEL",
    "Admission",
    "Lineage",
    "SchemaDiff",
    "admit",
    "approve_review",
    "claim_review",
    "classify",
    "emit",
    "get_lineage_for_update",
    "get_review",
    "list_reviews",
    "load_state_target",
    "lock_lineage",
    "pause_lineage",
    "reject_review",
    "resume_lineage",
]
