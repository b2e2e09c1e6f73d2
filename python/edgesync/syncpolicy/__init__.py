"""Sync policies: a project's ``table_strategies`` for its agents (the reference console's
Edge Sync → Sync Policies), picked from an introspected sample database, attached to
devices or fleets, written into device bundles and sent to attached agents as a
``sync_policy`` control. Owns ``edge_sync_policies`` and ``edge_sync_policy_attachments``.
See docs/api.md ("Sync policies") and docs/agent.md ("Remote sync policy")."""

from edgesync.syncpolicy._introspect import MAX_SAMPLE_BYTES, SampleTable, introspect_sample
from edgesync.syncpolicy._policies import (
    AttachedTo,
    EffectivePolicy,
    ListedAttachment,
    PolicyAttachment,
    PolicyDevice,
    SyncPolicy,
    attach_policy,
    create_policy,
    delete_policy,
    detach_policy,
    effective_policy,
    get_policy,
    list_attachments,
    list_policies,
    policy_devices,
    update_policy,
)

__all__ = [
    "MAX_SAMPLE_BYTES",
    "AttachedTo",
    "EffectivePolicy",
    "ListedAttachment",
    "PolicyAttachment",
    "PolicyDevice",
    "SampleTable",
    "SyncPolicy",
    "attach_policy",
    "create_policy",
    "delete_policy",
    "detach_policy",
    "effective_policy",
    "get_policy",
    "introspect_sample",
    "list_attachments",
    "list_policies",
    "policy_devices",
    "update_policy",
]
