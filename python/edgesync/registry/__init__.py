"""Projects, fleets and devices: where tenant scope comes from."""

from edgesync.registry._devices import (
    DeviceResolver,
    DeviceScope,
    add_device,
    ensure_fleet,
    ensure_project,
    get_device,
    revoke_device,
)

__all__ = [
    "DeviceResolver",
    "DeviceScope",
    "add_device",
    "ensure_fleet",
    "ensure_project",
    "get_device",
    "revoke_device",
]
