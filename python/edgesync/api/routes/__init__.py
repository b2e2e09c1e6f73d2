"""One router per resource, all under ``/core/api/v1/projects/{project_id}``."""

from edgesync.api.routes.data_points import router as data_points
from edgesync.api.routes.devices import router as devices
from edgesync.api.routes.events import router as events
from edgesync.api.routes.lineages import router as lineages
from edgesync.api.routes.policy import router as policy
from edgesync.api.routes.registry import fleet_router as fleet_registry
from edgesync.api.routes.registry import router as registry
from edgesync.api.routes.reviews import router as reviews
from edgesync.api.routes.segments import router as segments
from edgesync.api.routes.state_tables import router as state_tables

ROUTERS = (lineages, reviews, registry, fleet_registry, data_points, policy, devices,
           state_tables, segments, events)

__all__ = ["ROUTERS"]
