"""One router per resource, all under ``/core/api/v1/projects/{project_id}``."""

from edgesync.api.routes.devices import router as devices
from edgesync.api.routes.events import router as events
from edgesync.api.routes.lineages import router as lineages
from edgesync.api.routes.policy import router as policy
from edgesync.api.routes.reviews import router as reviews
from edgesync.api.routes.state_tables import router as state_tables

ROUTERS = (lineages, reviews, policy, devices, state_tables, events)

__all__ = ["ROUTERS"]
