"""Defaults that both the command line and the packages behind it use.

They live in a module that imports nothing, so the argument parsers (``edgesync.cli``)
can show them while loading none of the packages that do the work: ``edgesync agent`` and
an agent-only install never import the cloud side just to build ``--help``.
"""

from __future__ import annotations

__all__ = ["BOOTSTRAP_DAYS", "DEFAULT_API_URL", "DEVICE_CERT_DAYS", "WORKER_USERNAME"]

# The HTTP API of `edgesync serve` with its default --api-host and --api-port.
DEFAULT_API_URL = "http://127.0.0.1:8080"
# Validity of a device's MQTT client certificate, and of a fleet bootstrap certificate.
DEVICE_CERT_DAYS = 365
BOOTSTRAP_DAYS = 90
# The broker account the cloud worker connects as (broker-config writes its ACL).
WORKER_USERNAME = "edgesync-worker"
