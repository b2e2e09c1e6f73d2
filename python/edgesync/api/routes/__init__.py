"""One router per resource, all under ``/core/api/v1/projects/{project_id}``."""

from edgesync.api.routes import (
    data_points,
    devices,
    events,
    lineage_recovery,
    lineages,
    policy,
    quarantine,
    registry,
    reviews,
    segments,
    state_tables,
)

ROUTERS = (lineages.router, lineage_recovery.router, quarantine.router, reviews.router,
           registry.router, registry.fleet_router, data_points.router, policy.router,
           devices.router, state_tables.router, segments.router, events.router)

__all__ = ["ROUTERS"]
