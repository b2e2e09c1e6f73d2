#!/usr/bin/env bash
# Coverage-guided fuzzing of the Rust core (docs/security.md "Fuzzing"): builds rust/fuzz
# with the nightly toolchain and runs every target from its committed seeds and a corpus
# kept between runs, SECONDS each (default 40; CI's smoke). A crash or a hang (an input
# taking over 10 s) fails the run and leaves the input in rust/fuzz/artifacts/<target>/:
# make it a regression test (tests/core or the crate's own tests) before fixing it.
#   bash ci/fuzz.sh [SECONDS] [TARGET...]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-40}
shift || true
command -v cargo-fuzz >/dev/null || cargo +nightly install cargo-fuzz --locked --quiet
cache=${EDGESYNC_CI_CACHE:-$HOME/.cache/edgesync-ci}/fuzz
fuzz=(cargo +nightly fuzz)
common=(-O --fuzz-dir rust/fuzz --target-dir "$cache/target")
"${fuzz[@]}" build "${common[@]}"
targets=("$@")
(( ${#targets[@]} )) || mapfile -t targets < <("${fuzz[@]}" list --fuzz-dir rust/fuzz)
for t in "${targets[@]}"; do
  mkdir -p "$cache/corpus/$t"
  echo "== fuzz $t: ${seconds} s"
  "${fuzz[@]}" run "${common[@]}" "$t" "$cache/corpus/$t" "rust/fuzz/seeds/$t" -- \
    -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 2>&1 |
    grep -E '^(Done|stat::number_of_executed_units|stat::peak_rss_mb|#[0-9]+ +DONE)|ERROR|panicked|SUMMARY|Test unit written' || true
  # grep hides libFuzzer's chatter; the pipe's first status is the fuzzer's own.
  status=${PIPESTATUS[0]}
  if (( status != 0 )); then
    echo "fuzz target $t failed (exit $status): see rust/fuzz/artifacts/$t/" >&2
    exit 1
  fi
done
