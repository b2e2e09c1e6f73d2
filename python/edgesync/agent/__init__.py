"""The device agent: captures SQLite changes with triggers and publishes them over MQTT.

    from edgesync.agent import Agent, load_config

    async with Agent(load_config("/etc/edgesync/agent.yaml")) as agent:
        await agent.run()
"""

from edgesync.agent._lifecycle import AgentLifecycle
from edgesync.agent._runner import Agent
from edgesync.agent.capture._source import validate_config
from edgesync.agent.config import AgentConfig, load_config
from edgesync.agent.link._status import device_status, write_status

__all__ = ["Agent", "AgentConfig", "AgentLifecycle", "device_status", "load_config",
           "validate_config", "write_status"]
