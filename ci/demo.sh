#!/usr/bin/env bash
# Main job: install edgesync into .venv (builds the Rust extension) and run the
# end-to-end demo on the embedded PostgreSQL and MQTT broker.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v cargo >/dev/null || { echo "demo: a Rust toolchain (cargo) is needed to build edgesync" >&2; exit 1; }
[[ -x .venv/bin/python ]] || python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q ".[embedded]"
exec .venv/bin/edgesync demo "$@"
