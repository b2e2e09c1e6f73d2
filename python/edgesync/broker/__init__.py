"""MQTT broker side: the embedded development broker."""

from edgesync.broker._embedded import embedded_broker, free_port

__all__ = ["embedded_broker", "free_port"]
