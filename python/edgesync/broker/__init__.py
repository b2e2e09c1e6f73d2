"""MQTT broker side: the embedded development broker, and Mosquitto configurations."""

from edgesync.broker._embedded import embedded_broker, free_port
from edgesync.broker._mosquitto_config import (
    MosquittoConfig,
    ProjectListeners,
    device_acl,
    render_mosquitto_conf,
    worker_acl,
    write_mosquitto_config,
)

__all__ = ["MosquittoConfig", "ProjectListeners", "device_acl", "embedded_broker", "free_port",
           "render_mosquitto_conf", "worker_acl", "write_mosquitto_config"]
