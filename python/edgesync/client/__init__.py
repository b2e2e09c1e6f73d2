"""A small synchronous client of the edgesync HTTP API (the CLI and the TUI use it), and the
column-action helpers both build approvals with."""

from edgesync.client._client import DEFAULT_API_URL, ApiClient, ApiClientError, ProjectApi

__all__ = ["DEFAULT_API_URL", "ApiClient", "ApiClientError", "ProjectApi"]
