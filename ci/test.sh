#!/usr/bin/env bash
# The whole test suite: Rust tests and lints, the wheel built and installed in a fresh
# virtualenv, static checks, then pytest against the installed package on real
# PostgreSQL and Mosquitto. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

# Each stage's time, printed as the next one starts and all together at the end.
SECONDS=0
stage_name="" stage_start=0 stage_times=()
stage() {
  if [[ -n $stage_name ]]; then
    stage_times+=("$(printf '%6d s  %s' $((SECONDS - stage_start)) "$stage_name")")
    echo "-- $stage_name: $((SECONDS - stage_start)) s"
  fi
  stage_name=$1 stage_start=$SECONDS
  [[ -z $1 ]] || echo "== $1"
}
print_stage_times() {
  stage ""
  echo "== stage times"
  printf '%s\n' "${stage_times[@]}"
  echo "$(printf '%6d s' "$SECONDS")  in all"
}
trap print_stage_times EXIT

# The pytest runs (not the emulated or the infrastructure ones) on two worker processes
# (pytest-xdist), a test file to a worker: the tests wait on PostgreSQL, brokers and
# subprocesses much of the time, and one process left a core idle (each pass took ~1.9x
# as long). Each worker has its own database (tests/conftest.py); devices, topics and
# queues are named per test. EDGESYNC_TEST_WORKERS=1 runs them in one process.
workers=(-n "${EDGESYNC_TEST_WORKERS:-2}" --dist loadfile)
(( ${EDGESYNC_TEST_WORKERS:-2} > 1 )) || workers=(-n 0)

stage services
bash ci/services.sh

stage rust
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --quiet -- -D warnings
cargo test --workspace --quiet

stage wheel
[[ -x .venv-build/bin/python ]] || python3 -m venv .venv-build
.venv-build/bin/python -m pip install -q --upgrade pip maturin
rm -rf dist
.venv-build/bin/maturin build --release --quiet --out dist
# The host's wheel, by its platform tag: dist/ gets the aarch64 one too (below).
wheel=$(ls dist/edgesync-*-manylinux_*_"$(uname -m)".whl)
echo "built $wheel"
# The web console's static files are package data: without them /console is a 404.
python3 - "$wheel" <<'PY'
import sys, zipfile
names = set(zipfile.ZipFile(sys.argv[1]).namelist())
want = {"edgesync/api/console/index.html", "edgesync/api/console/js/app.js",
        "edgesync/api/console/js/pages/review.js", "edgesync/store/migrations/0001_foundation.sql"}
missing = sorted(n for n in want if n not in names)
sys.exit(f"the wheel lacks {missing}" if missing else 0)
PY

stage "fresh virtualenv"
rm -rf .venv-test
python3 -m venv .venv-test
.venv-test/bin/python -m pip install -q --upgrade pip
.venv-test/bin/python -m pip install -q "${wheel}[test]"

stage "agent-only virtualenv"
# A device's install: the wheel with no extras. Its size is measured before the test tools
# go in (target 60 MB, pip and setuptools included), then the agent tests run there: they
# need no cloud module (tests/agent/test_device_boundaries.py checks what they load).
rm -rf .venv-agent
python3 -m venv .venv-agent
.venv-agent/bin/python -m pip install -q --upgrade pip
.venv-agent/bin/python -m pip install -q "${wheel}"
agent_site=$(.venv-agent/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
agent_mb=$(du -sm "$agent_site" | cut -f1)
echo "agent-only install: ${agent_mb} MB in $agent_site ($(.venv-agent/bin/python -m pip list --format=freeze 2>/dev/null | wc -l) distributions)"
if (( agent_mb > 60 )); then
  echo "agent-only install is ${agent_mb} MB, over the 60 MB target" >&2
  exit 1
fi
.venv-agent/bin/python -m pip install -q "${wheel}[agent-test]"
timeout --kill-after=30 1500 .venv-agent/bin/python -m pytest -p no:cacheprovider -q \
  "${workers[@]}" tests/agent

stage "static checks"
.venv-test/bin/ruff check python tests benches
.venv-test/bin/mypy
(cd /tmp && "$root/.venv-test/bin/python" -m mypy.stubtest edgesync._core \
   --allowlist "$root/tests/stubtest-allowlist.txt")

# Each run is bounded (a pytest run takes ~3 min here; 25 min is far beyond that): a hang
# fails CI with a dump of the stuck test (its asyncio tasks, then its threads) instead of
# using up the whole CI time.
bounded() { timeout --kill-after=30 1500 "$@"; }

# side_by_side LABEL BACKGROUND... -- FOREGROUND...: both commands at once, the first's
# output kept and shown under LABEL after the second ended; either failing fails the run.
side_by_side() {
  local label=$1 background=() log pid status=0 beside=0
  shift
  while [[ $1 != -- ]]; do background+=("$1"); shift; done
  shift
  log=$(mktemp)
  "${background[@]}" >"$log" 2>&1 &
  pid=$!
  "$@" || status=$?
  wait "$pid" || beside=$?
  echo "== $label"
  cat "$log"
  rm -f "$log"
  if (( status != 0 || beside != 0 )); then
    echo "$label: exit $beside; the run beside it: exit $status" >&2
    exit 1
  fi
}

stage "emulated devices (aarch64, armv7l)"
# The agent on the hardware the fleets run (docs/install.md): the aarch64 and armv7l
# wheels cross-compiled (ci/wheels.sh), Debian 12 arm64 and armhf userlands under qemu-user
# (ci/userland.sh, cached in ~/.cache/edgesync-ci), the base install in each, the agent's
# tests there and an emulated agent syncing to a native `edgesync serve` (tests/platform).
# Both are required: a missing userland or wheel fails the run instead of skipping.
bash ci/wheels.sh aarch64-manylinux armv7l-manylinux
bash ci/userland.sh arm64
bash ci/userland.sh armhf
# One pytest run per architecture, side by side: each keeps one core busy with qemu for
# ~3 min (pip, the agent's tests, a sync); the second's output follows the first's.
emulated() {
  EDGESYNC_EMULATED_REQUIRE=aarch64,armv7l bounded .venv-test/bin/python -m pytest \
    -p no:cacheprovider -q -k "$1" tests/platform
}
side_by_side "emulated armv7l (beside aarch64)" emulated armv7l -- emulated aarch64

stage "faults of the servers around us (bad links, PostgreSQL failover, broker cluster) beside the fuzz smoke"
# Real processes on real servers the tests start themselves: an agent in a network
# namespace behind a fault proxy and tbf (tests/links, root), a private PostgreSQL primary
# and standby (tests/failover), a 3-node RabbitMQ cluster (test_broker_cluster). A stage of
# their own, bounded on its own: together they take minutes, ~90 % of them waiting (a
# link's delay, a failover, a node's restart). So the fuzz smoke runs meanwhile: every
# cargo-fuzz target of rust/fuzz for 30 s from its seeds and the corpus kept in
# ~/.cache/edgesync-ci (docs/security.md "Fuzzing"), one core; a crash or a hang fails
# the run. Its output follows the tests'.
infra=(tests/links tests/failover tests/scale_out/test_broker_cluster.py)
side_by_side "fuzz smoke (beside the faults)" bash ci/fuzz.sh 30 -- \
  bounded .venv-test/bin/python -m pytest -p no:cacheprovider -q "${infra[@]}"

# Run from the tests' point of view with the installed package, never the source tree.
# tests/platform and the infrastructure faults ran in the stages above. The tests marked
# `once` (heavy fault, browser, terminal, whole-API property) run in a bounded run of their
# own, so that each pass stays well inside its 25 minutes on a slow machine too (the
# asyncio pass with them took 1,161 s on 2026-12-07's slow evening).
cd "$root"
stage "pytest, tests run once"
bounded .venv-test/bin/python -m pytest -p no:cacheprovider --durations=10 "${workers[@]}" -m once \
  --ignore=tests/platform "${infra[@]/#/--ignore=}" "$@"

stage pytest
bounded .venv-test/bin/python -m pytest -p no:cacheprovider --durations=15 "${workers[@]}" \
  -m "not once" \
  --ignore=tests/platform "${infra[@]/#/--ignore=}" "$@"

stage "pytest on uvloop"
# uvloop runs Python signal handlers from inside its loop callbacks, where the exception
# pytest-timeout's SIGALRM raises is swallowed; its thread method always ends the run.
# Tests marked `once` ran in their own stage above.
EDGESYNC_TEST_UVLOOP=1 bounded .venv-test/bin/python -m pytest -p no:cacheprovider -q \
  "${workers[@]}" --timeout-method=thread -m "not once" "$@"

stage "benchmark smoke"
bounded .venv-test/bin/python -m pytest -p no:cacheprovider -q \
  --benchmark-disable benches
