"""One router per resource, all under ``/core/api/v1/projects/{project_id}`` (and the
project list, ``/core/api/v1/projects``)."""

from edgesync.api.routes import (
    data_points,
    device_credentials,
    devices,
    events,
    fleets,
    lineage_recovery,
    lineages,
    observations,
    policy,
    projects,
    quarantine,
    recovery,
    registry,
    reviews,
    segments,
    state_tables,
    sync_policies,
)

ROUTERS = (lineages.router, lineage_recovery.router, quarantine.router, recovery.router,
           reviews.router, registry.router, registry.fleet_router, data_points.router,
           policy.router, sync_policies.router, devices.router, fleets.router,
           device_credentials.router, state_tables.router, segments.router,
           observations.router, events.router, projects.router)

__all__ = ["ROUTERS"]
