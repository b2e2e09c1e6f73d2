"""Changing a state table's ``sync_authority`` after its approval.

- **device → cloud**: the target gets its write-back columns (``_edge_cloud_version``,
  ``_edge_lkcv``); every existing row has no cloud version, so device changes apply by
  newer-wins alone until the cloud writes a key. The device is not told: it learns a
  key's cloud version from the ``state_write`` that carries it, and quotes it as ``lkcv``
  from then on.
- **cloud → device**: write-back is refused from then on; the cloud forgets its versions
  of the device's rows (both columns back to NULL), so the device's later changes win by
  newer-wins alone — the ``lkcv`` the agent still quotes for those keys is ignored. Should
  the table turn cloud-authoritative again, versions continue from the lineage's counter
  (``cloud_version`` never goes back), so an ``lkcv`` the device kept from before is lower
  than any new cloud write and cannot beat it by accident. Again nothing to tell the
  device. ``state_write`` controls the device has not acknowledged yet would still be
  applied there after the switch (the mirror already holds their rows, so delivering them
  keeps both sides equal — unless the device changes one of those keys first): the change
  is refused while any is pending, unless ``force``.

Rules in docs/recovery.md ("Changing sync_authority").
"""

from __future__ import annotations

import dataclasses
import uuid
from dataclasses import dataclass

from edgesync.control._outbox import ControlStatus
from edgesync.errors import ConflictError, InvalidRequestError, NotFoundError
from edgesync.governance import (
    EventType,
    SyncAuthority,
    emit,
    get_lineage_for_update,
    set_sync_authority,
)
from edgesync.materialize import StateTarget
from edgesync.protocol import ControlKind, Pipeline
from edgesync.store import Conn

__all__ = ["SYNC_AUTHORITIES", "SyncAuthorityChange", "change_sync_authority"]

SYNC_AUTHORITIES = tuple(SyncAuthority)


@dataclass(frozen=True, slots=True)
class SyncAuthorityChange:
    """What ``change_sync_authority`` did (``changed`` False: it was that already)."""

    lineage_id: uuid.UUID
    sync_authority: SyncAuthority
    previous: SyncAuthority
    changed: bool
    pending_state_writes: int = 0  # cloud → device: state_write controls not yet acked
    cloud_versions_cleared: int = 0  # cloud → device: mirror rows whose version was forgotten


async def change_sync_authority(conn: Conn, lineage_id: uuid.UUID,
                                sync_authority: SyncAuthority | str, *,
                                actor: str, force: bool = False) -> SyncAuthorityChange:
    """Set the lineage's ``sync_authority`` (in the caller's transaction)."""
    if sync_authority not in SYNC_AUTHORITIES:
        raise InvalidRequestError("sync_authority",
                                  "must be device_authoritative or cloud_authoritative")
    sync_authority = SyncAuthority(sync_authority)
    lineage = await get_lineage_for_update(conn, lineage_id)
    if lineage is None:
        raise NotFoundError(f"lineage {lineage_id} not found")
    if lineage.target_table is None or lineage.approved_schema_hash is None:
        raise ConflictError(f"lineage {lineage_id} has no approved schema yet: choose the sync "
                            "authority when approving its review (--sync-authority)")
    previous = lineage.sync_authority
    out = SyncAuthorityChange(lineage.id, sync_authority, previous,
                              changed=sync_authority != previous)
    if sync_authority == previous:
        return out
    target = StateTarget(lineage.target_table, [])
    if sync_authority == SyncAuthority.CLOUD:
        if lineage.pipeline != Pipeline.ROWS:
            raise InvalidRequestError("sync_authority",
                                      "only state (rows) tables can be cloud-authoritative")
        shared = await conn.fetchval(
            "SELECT count(*) FROM edge_table_lineages WHERE target_table = $1 AND id <> $2",
            lineage.target_table, lineage.id)
        if shared:
            raise ConflictError(f"{lineage.target_table} is a coalesced mirror shared with "
                                f"{shared} other lineage(s): coalesced targets are "
                                "device-authoritative")
        await target.provision_cloud_authority(conn)
    else:
        pending = int(await conn.fetchval(
            "SELECT count(*) FROM edge_pending_controls WHERE lineage_id = $1 "
            f"AND control_kind = $2 AND status = '{ControlStatus.PENDING}'", lineage.id,
            ControlKind.STATE_WRITE))
        out = dataclasses.replace(out, pending_state_writes=pending)
        if pending and not force:
            raise ConflictError(
                f"{pending} state_write control(s) of lineage {lineage_id} are not yet "
                "acknowledged by the device: wait until it applied them, or force (they are "
                "still delivered; a device change of one of those keys made before it "
                "arrives would then be overwritten on the device)")
        await target.provision_cloud_authority(conn)  # a no-op unless never provisioned
        cleared = await target.forget_cloud_versions(conn, lineage.device_id)
        out = dataclasses.replace(out, cloud_versions_cleared=cleared)
    await set_sync_authority(conn, lineage.id, sync_authority)
    await emit(conn, lineage.project_id, EventType.SYNC_AUTHORITY_CHANGED, lineage.id,
               {"lineage_id": str(lineage.id), "actor": actor, "sync_authority": sync_authority,
                "previous": previous, "forced": bool(force and out.pending_state_writes),
                "cloud_versions_cleared": out.cloud_versions_cleared})
    return out
