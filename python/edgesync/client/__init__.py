"""A small synchronous client of the edgesync HTTP API, and the operator CLI built on it."""

from edgesync.client._client import DEFAULT_API_URL, ApiClient, ApiClientError, ProjectApi

__all__ = ["DEFAULT_API_URL", "ApiClient", "ApiClientError", "ProjectApi"]
