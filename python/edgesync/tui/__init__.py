"""``edgesync tui``: the operator console in a terminal (Textual), a client of the HTTP API
only. One module per screen; docs/tui.md has the key map."""

from edgesync.tui._app import EdgesyncTui, run_tui
from edgesync.tui._settings import TuiSettings

__all__ = ["EdgesyncTui", "TuiSettings", "run_tui"]
