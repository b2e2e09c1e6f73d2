"""The cloud worker process (``edgesync serve``)."""

from edgesync.server._lifecycle import ServerLifecycle
from edgesync.server._server import Server, ServerSettings, default_data_dir

__all__ = ["Server", "ServerLifecycle", "ServerSettings", "default_data_dir"]
