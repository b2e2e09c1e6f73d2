"""The HTTP API (FastAPI) under ``/core/api/v1/projects/{project_id}/…``."""

from edgesync.api._app import create_app
from edgesync.api._serve import ApiServer, bind_socket

__all__ = ["ApiServer", "bind_socket", "create_app"]
