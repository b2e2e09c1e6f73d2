"""The agent's configuration: the resolved model, the YAML's validation, the summary."""

from edgesync.agent.config._checks import parse_duration, parse_size
from edgesync.agent.config._model import (
    AgentConfig,
    ConnectionConfig,
    ReplicationConfig,
    SecurityConfig,
    default_state_db_path,
)
from edgesync.agent.config._summary import summarize_config
from edgesync.agent.config._validation import (
    load_config,
    parse_config,
    read_config,
)

__all__ = ["AgentConfig", "ConnectionConfig", "ReplicationConfig", "SecurityConfig",
           "default_state_db_path", "load_config", "parse_config", "parse_duration", "parse_size",
           "read_config", "summarize_config"]
