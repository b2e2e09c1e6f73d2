"""Projects, fleets and devices: where tenant scope comes from; the project's policy."""

from edgesync.fleet._devices import (
    DeviceResolver,
    DeviceScope,
    add_device,
    adopt_project,
    ensure_control_token,
    ensure_fleet,
    ensure_project,
    get_device,
    revoke_device,
    store_policy,
    stored_policy,
    take_control_seqs,
)
from edgesync.fleet._policy import POLICY_BOUNDS, CoalescingMode, ProjectPolicy

__all__ = [
    "POLICY_BOUNDS",
    "CoalescingMode",
    "DeviceResolver",
    "DeviceScope",
    "ProjectPolicy",
    "add_device",
    "adopt_project",
    "ensure_control_token",
    "ensure_fleet",
    "ensure_project",
    "get_device",
    "revoke_device",
    "store_policy",
    "stored_policy",
    "take_control_seqs",
]
