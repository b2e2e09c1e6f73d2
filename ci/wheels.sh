#!/usr/bin/env bash
# Every distribution of edgesync, into dist/: the sdist and the abi3 wheels (Python ≥ 3.11)
# of each platform in docs/install.md, cross-compiled here with maturin's zig support
# (ziglang from the package index links each target and compiles its C parts, zstd and
# mimalloc, against the oldest libc its tag promises). Each wheel's tag is then checked
# against the symbols it needs (ci/check_wheel.py; auditwheel too for manylinux) and the
# build fails when one is false.
#
#   bash ci/wheels.sh                      # the sdist and all five wheels (dist/ emptied first)
#   bash ci/wheels.sh aarch64-manylinux    # only these wheels, added to dist/ (ci/test.sh)
#   bash ci/wheels.sh --emulate            # all of them, then the emulated aarch64 and armv7l
#                                          # devices' tests (tests/platform; root, ~15 min)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

# name → Rust target and the tag's libc promise
declare -A TARGET=(
  [x86_64-manylinux]="x86_64-unknown-linux-gnu manylinux_2_28"
  [aarch64-manylinux]="aarch64-unknown-linux-gnu manylinux_2_28"
  [armv7l-manylinux]="armv7-unknown-linux-gnueabihf manylinux_2_28"
  [x86_64-musllinux]="x86_64-unknown-linux-musl musllinux_1_2"
  [aarch64-musllinux]="aarch64-unknown-linux-musl musllinux_1_2"
)
ALL=(x86_64-manylinux aarch64-manylinux armv7l-manylinux x86_64-musllinux aarch64-musllinux)

emulate=0
wanted=()
for arg in "$@"; do
  case $arg in
    --emulate) emulate=1 ;;
    *) [[ -n ${TARGET[$arg]:-} ]] || { echo "ci/wheels.sh: unknown wheel '$arg' (${ALL[*]})" >&2; exit 2; }
       wanted+=("$arg") ;;
  esac
done
everything=0
if (( ${#wanted[@]} == 0 )); then
  everything=1
  wanted=("${ALL[@]}")
fi

SECONDS=0
[[ -x .venv-build/bin/python ]] || python3 -m venv .venv-build
# ziglang pinned: maturin's zig wrapper follows zig's command line, which changes between
# releases; this one is the version these builds were checked with.
.venv-build/bin/python -m pip install -q --upgrade pip "maturin>=1.7,<2" "ziglang==0.17.1" \
  pyelftools auditwheel
for name in "${wanted[@]}"; do
  read -r triple _ <<<"${TARGET[$name]}"
  rustup target list --installed | grep -qx "$triple" || rustup target add "$triple"
done

if (( everything )); then
  rm -rf dist
  .venv-build/bin/maturin sdist --out dist
fi
built=()
for name in "${wanted[@]}"; do
  read -r triple compat <<<"${TARGET[$name]}"
  echo "== wheel $name ($triple, $compat)"
  start=$SECONDS
  # maturin names the file it wrote on its last line ("Built wheel ... to PATH").
  log=$(mktemp)
  if ! PATH="$root/.venv-build/bin:$PATH" .venv-build/bin/maturin build --release --quiet \
       --zig --target "$triple" --compatibility "$compat" --out dist >"$log" 2>&1; then
    cat "$log" >&2
    echo "ci/wheels.sh: the $name wheel did not build" >&2
    exit 1
  fi
  cat "$log"
  wheel=$(grep -o 'dist/edgesync-[^ ]*\.whl' "$log" | tail -n1)
  rm -f "$log"
  [[ -f $wheel ]] || { echo "ci/wheels.sh: maturin wrote no wheel for $name" >&2; exit 1; }
  built+=("$wheel")
  echo "built $wheel in $((SECONDS - start)) s"
done

echo "== tags checked against the symbols each wheel needs"
.venv-build/bin/python ci/check_wheel.py "${built[@]}"
for wheel in "${built[@]}"; do
  if [[ $wheel == *manylinux* ]]; then
    tag=$(basename "$wheel" .whl | rev | cut -d- -f1 | rev)
    if ! .venv-build/bin/auditwheel show "$wheel" | tr -s ' \n' ' ' \
         | grep -q "consistent with the following platform tag: \"$tag\""; then
      echo "ci/wheels.sh: auditwheel does not find $wheel consistent with $tag" >&2
      .venv-build/bin/auditwheel show "$wheel" >&2
      exit 1
    fi
  fi
done

echo "== dist/ (sizes)"
for f in dist/edgesync-*; do
  awk -v b="$(stat -c %s "$f")" -v n="$(basename "$f")" 'BEGIN { printf "%8.2f MB  %s\n", b / 1e6, n }'
done
echo "wheels built in $SECONDS s"

if (( emulate )); then
  echo "== emulated devices (aarch64, armv7l)"
  bash ci/services.sh
  bash ci/userland.sh arm64 >/dev/null
  bash ci/userland.sh armhf >/dev/null
  # The cloud side runs natively, from this run's x86_64 wheel.
  rm -rf .venv-emulate
  python3 -m venv .venv-emulate
  .venv-emulate/bin/python -m pip install -q --upgrade pip
  .venv-emulate/bin/python -m pip install -q "$(ls dist/edgesync-*manylinux_2_28_x86_64.whl)[test]"
  EDGESYNC_EMULATED_REQUIRE=aarch64,armv7l timeout --kill-after=30 3000 \
    .venv-emulate/bin/python -m pytest -p no:cacheprovider -v tests/platform
  echo "emulated devices passed; total $SECONDS s"
fi
