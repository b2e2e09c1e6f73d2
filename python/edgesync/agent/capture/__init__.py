"""Capture: which tables replicate, the journal and its triggers, the telemetry cursor,
and the batches read from them.

The cloud reuses discovery to introspect a sample database exactly as an agent would
(``syncpolicy``): ``list_user_tables`` and ``read_table`` are this package's public face.
"""

from edgesync.agent.capture._discovery import Column, TableInfo, list_user_tables, read_table

__all__ = ["Column", "TableInfo", "list_user_tables", "read_table"]
