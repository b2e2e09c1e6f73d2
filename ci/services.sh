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
