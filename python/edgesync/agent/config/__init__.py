"""The agent's configuration: the resolved model, the YAML's validation, the summary."""

from edgesync.agent.config._checks import parse_duration, parse_size
from edgesync.agent.config._model import (
    AgentConfig,
    ConnectionConfig,
    ReplicationConfig,
    SecurityConfig,
    Strategy,
    TableStrategy,
    default_state_db_path,
)
from edgesync.agent.config._summary import summarize_config
from edgesync.agent.config._validation import (
    load_config,
    parse_config,
    parse_table_strategies,
    read_config,
    table_strategies_doc,
)

__all__ = ["AgentConfig", "ConnectionConfig", "ReplicationConfig", "SecurityConfig", "Strategy",
           "TableStrategy", "default_state_db_path", "load_config", "parse_config",
           "parse_duration", "parse_size", "parse_table_strategies", "read_config",
           "summarize_config", "table_strategies_doc"]
