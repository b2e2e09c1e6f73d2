"""Operator actions, each one function the HTTP API's routes and the database-direct CLI
both call: approve or reject a review, reopen one; delete a lineage, reset its
materialization, discard its staged rows; re-snapshot, verify; retry or discard
quarantined rows; revoke a device; attach a sync policy; issue an API token.

An action spans several owners (rejecting a review is governance's decision and
staging's relabelling; revoking a device is the registry's and the credentials'), so it
lives here, above them all, rather than in one owner importing the others. Each calls
the owning modules' functions and writes no table itself (tests/architecture). Project
scoping and the translation of errors into HTTP answers stay with the routes."""

from edgesync.operations.devices import DeviceRevocation, device_overview, revoke_device
from edgesync.operations.lineages import (
    LineageDeletion,
    MaterializationReset,
    delete_lineage,
    discard_staged,
    lineage_overview,
    reopen_review,
    replay_rejected,
    reset_materialization,
)
from edgesync.operations.policies import attach_policy
from edgesync.operations.quarantine import discard_quarantined, retry_all, retry_row
from edgesync.operations.recovery import request_resnapshot, request_verify
from edgesync.operations.reviews import approve_review, reject_review
from edgesync.operations.tokens import ProjectGrant, TokenCreated, create_token, revoke_token

__all__ = [
    "DeviceRevocation",
    "LineageDeletion",
    "MaterializationReset",
    "ProjectGrant",
    "TokenCreated",
    "approve_review",
    "attach_policy",
    "create_token",
    "delete_lineage",
    "device_overview",
    "discard_quarantined",
    "discard_staged",
    "lineage_overview",
    "reject_review",
    "reopen_review",
    "replay_rejected",
    "request_resnapshot",
    "request_verify",
    "reset_materialization",
    "retry_all",
    "retry_row",
    "revoke_device",
    "revoke_token",
]
