#!/usr/bin/env bash
# Make sure the PostgreSQL and Mosquitto the test suite talks to are up; start them
# when they are installed but stopped, and fail loudly when they cannot be reached.
set -euo pipefail

port_open() { (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null; }

if [[ -z "${EDGESYNC_TEST_DATABASE_URL:-}" ]]; then
  if ! port_open 127.0.0.1 5432; then
    echo "ci: starting PostgreSQL"
    pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -n1)" main start || true
    for _ in $(seq 30); do port_open 127.0.0.1 5432 && break; sleep 1; done
  fi
  port_open 127.0.0.1 5432 || { echo "ci: PostgreSQL is not reachable on 127.0.0.1:5432" >&2; exit 1; }
fi
if [[ -z "${EDGESYNC_TEST_MQTT_URL:-}" ]]; then
  if ! port_open 127.0.0.1 1883; then
    echo "ci: starting Mosquitto"
    mosquitto -d -c /etc/mosquitto/mosquitto.conf || true
    for _ in $(seq 30); do port_open 127.0.0.1 1883 && break; sleep 1; done
  fi
  port_open 127.0.0.1 1883 || { echo "ci: Mosquitto is not reachable on 127.0.0.1:1883" >&2; exit 1; }
fi
command -v mosquitto >/dev/null || { echo "ci: the mosquitto binary is needed by tests" >&2; exit 1; }

# RabbitMQ (AMQP on 127.0.0.1:5672, guest/guest) with its MQTT plugin on 127.0.0.1:1884:
# the AMQP ingest tests publish as devices through the plugin and consume the queue.
# The plugin's default listener is 1883, which Mosquitto owns, and a running node reads
# rabbitmq.conf only as it boots: the listener is pinned there first, the plugin is put
# in enabled_plugins, and the node restarts only when that configuration changed (or the
# plugin is not running on it yet).
if [[ -z "${EDGESYNC_TEST_AMQP_URL:-}" ]]; then
  for tool in rabbitmq-server rabbitmqctl rabbitmq-plugins; do
    command -v $tool >/dev/null || { echo "ci: $tool is needed by tests" >&2; exit 1; }
  done
  conf=/etc/rabbitmq/rabbitmq.conf
  listener="mqtt.listeners.tcp.default = 127.0.0.1:1884"
  rabbit_fail() { echo "ci: RabbitMQ: $*" >&2; exit 1; }
  # quick when set up: the plugin's listener answering is enough
  mqtt_running() {
    port_open 127.0.0.1 1884 || rabbitmq-plugins -q is_enabled rabbitmq_mqtt >/dev/null 2>&1
  }
  restart=0
  if ! grep -qxF "$listener" "$conf" 2>/dev/null; then
    if [[ -f $conf ]]; then sed -i '/^mqtt\.listeners\.tcp\./d' "$conf"; fi
    echo "$listener" >> "$conf"
    restart=1
  fi
  if ! grep -q rabbitmq_mqtt /etc/rabbitmq/enabled_plugins 2>/dev/null; then
    rabbitmq-plugins -q enable --offline rabbitmq_mqtt >/dev/null \
      || rabbit_fail "cannot enable the rabbitmq_mqtt plugin"
    restart=1
  fi
  if port_open 127.0.0.1 5672 && { [[ $restart == 1 ]] || ! mqtt_running; }; then
    echo "ci: restarting RabbitMQ (MQTT plugin on 127.0.0.1:1884)"
    rabbitmqctl -q stop >/dev/null || rabbit_fail "cannot stop the node to restart it"
    for _ in $(seq 60); do port_open 127.0.0.1 5672 || break; sleep 1; done
  fi
  if ! port_open 127.0.0.1 5672; then
    echo "ci: starting RabbitMQ"
    rabbitmq-server -detached || true
    for _ in $(seq 60); do
      rabbitmqctl -q await_startup >/dev/null 2>&1 && port_open 127.0.0.1 5672 && break
      sleep 1
    done
  fi
  port_open 127.0.0.1 5672 || rabbit_fail "not reachable on 127.0.0.1:5672"
  mqtt_running || rabbit_fail "the rabbitmq_mqtt plugin is not running"
  for _ in $(seq 30); do port_open 127.0.0.1 1884 && break; sleep 1; done
  port_open 127.0.0.1 1884 || rabbit_fail "its MQTT plugin does not listen on 127.0.0.1:1884"
fi
