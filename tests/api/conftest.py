"""The HTTP API fixtures (tests/kits/api_fixtures.py)."""

from kits.api_fixtures import *  # noqa: F403 (pytest finds fixtures by name here)
