#!/usr/bin/env bash
# A Debian 12 userland of another architecture that runs here under qemu-user, for the
# emulated-device tests (tests/platform): the packages' files extracted with `dpkg -x`
# (no maintainer scripts run: far faster than debootstrap's second stage under emulation).
#
#   bash ci/userland.sh arm64|armhf    # prints the userland's directory on its last line
#
# It holds Python 3.11 with venv and pip's wheel, bash and coreutils, and, for the tests
# only, Debian's python3-cryptography and mosquitto — and no compiler: what the device
# installs from the package index must come as wheels. Kept in
# ${EDGESYNC_CI_CACHE:-~/.cache/edgesync-ci}/userland-ARCH; a second run only checks it.
# Needs root: it installs qemu-user-static when missing and registers it with binfmt_misc
# (with the F flag, so the kernel runs the emulator inside a chroot and for every child
# process), and fails saying so when that cannot be done.
set -euo pipefail

arch=${1:?usage: ci/userland.sh arm64|armhf}
case $arch in
  arm64) qemu=aarch64 ;;
  armhf) qemu=arm ;;
  *) echo "ci/userland.sh: no userland for '$arch' (arm64 or armhf)" >&2; exit 2 ;;
esac
cache=${EDGESYNC_CI_CACHE:-$HOME/.cache/edgesync-ci}
root=$cache/userland-$arch
# What the userland holds; a change here makes the next run extract it again.
packages=(python3 python3-venv base-passwd bash coreutils dash libc-bin python3-cryptography
          mosquitto)
stamp="bookworm 2 ${packages[*]}"

if (( EUID != 0 )); then
  echo "ci/userland.sh: must run as root (binfmt_misc registration, chroot)" >&2
  exit 1
fi

# -- qemu-user registered with binfmt_misc
if [[ ! -x /usr/bin/qemu-$qemu-static ]]; then
  apt-get update -q >/dev/null || true
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q qemu-user-static >/dev/null
fi
binfmt=/proc/sys/fs/binfmt_misc
if [[ ! -e $binfmt/register ]]; then
  mount -t binfmt_misc binfmt_misc "$binfmt" 2>/dev/null || true
fi
if [[ ! -e $binfmt/register ]]; then
  echo "ci/userland.sh: binfmt_misc is not available at $binfmt and could not be mounted" \
       "(a container without the privilege?): foreign binaries cannot run here" >&2
  exit 1
fi
if [[ ! -e $binfmt/qemu-$qemu ]]; then
  # Debian's own registration line (what systemd-binfmt would load), flags OPF.
  if ! cat "/usr/lib/binfmt.d/qemu-$qemu.conf" > "$binfmt/register"; then
    echo "ci/userland.sh: could not register qemu-$qemu with binfmt_misc" >&2
    exit 1
  fi
fi
if ! grep -q '^flags: .*F' "$binfmt/qemu-$qemu"; then
  echo "ci/userland.sh: qemu-$qemu is registered without the F flag: it would not run" \
       "inside a chroot (remove it: echo -1 > $binfmt/qemu-$qemu)" >&2
  exit 1
fi

# -- the userland
if [[ "$(cat "$root/.edgesync-userland" 2>/dev/null)" != "$stamp" ]]; then
  # A private apt state: the host's own dpkg and lists are left alone.
  apt=$cache/apt-$arch
  rm -rf "$root" "$root.new" "$apt"
  mkdir -p "$apt"/{lists/partial,archives/partial,etc/sources.list.d,etc/preferences.d,etc/apt.conf.d}
  : > "$apt/status"
  # The host's own Debian sources, as this machine's apt is set up (Debian 12 here, like
  # the userland): the arch options below make them serve the foreign architecture.
  shopt -s nullglob
  sources=(/etc/apt/sources.list.d/*.sources /etc/apt/sources.list.d/*.list)
  shopt -u nullglob
  [[ -f /etc/apt/sources.list ]] && cp /etc/apt/sources.list "$apt/etc/sources.list"
  (( ${#sources[@]} )) && cp "${sources[@]}" "$apt/etc/sources.list.d/"
  if ! grep -rqs "bookworm" "$apt/etc"; then
    echo "ci/userland.sh: the host's apt sources name no Debian 12 (bookworm) suite:" \
         "the userland's packages cannot be fetched" >&2
    exit 1
  fi
  opts=(-o "APT::Architecture=$arch" -o "APT::Architectures::=$arch" -o "Dir::Etc=$apt/etc"
        -o "Dir::State::Lists=$apt/lists" -o "Dir::State::status=$apt/status"
        -o "Dir::Cache=$apt/cache" -o "Dir::Cache::archives=$apt/archives"
        -o Debug::NoLocking=1 -o APT::Install-Recommends=false -o APT::Sandbox::User=root)
  apt-get "${opts[@]}" update -q >/dev/null
  apt-get "${opts[@]}" install -y -q --download-only "${packages[@]}" >/dev/null
  mkdir -p "$root.new"
  for deb in "$apt"/archives/*.deb; do dpkg-deb -x "$deb" "$root.new"; done
  for cc in gcc cc "$qemu-linux-gnu-gcc" clang; do
    if [[ -e $root.new/usr/bin/$cc ]]; then
      echo "ci/userland.sh: the userland has a compiler ($cc)" >&2
      exit 1
    fi
  done
  # What the maintainer scripts would have made and the programs need: the users and
  # groups (getpass, mosquitto) and the loader's cache (ctypes.util.find_library).
  cp "$root.new/usr/share/base-passwd/passwd.master" "$root.new/etc/passwd"
  cp "$root.new/usr/share/base-passwd/group.master" "$root.new/etc/group"
  chroot "$root.new" /sbin/ldconfig
  echo "$stamp" > "$root.new/.edgesync-userland"
  rm -rf "$apt"
  mv "$root.new" "$root"
fi
# The host's name resolution and CA bundle (ca-certificates' postinst, which builds the
# bundle, is one of the scripts dpkg -x does not run): pip reaches the package index.
mkdir -p "$root/etc/ssl/certs"
cp /etc/resolv.conf /etc/hosts "$root/etc/"
cp /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/"
if ! chroot "$root" /usr/bin/python3 -c 'import sqlite3, venv' >/dev/null; then
  echo "ci/userland.sh: Python does not run in $root under qemu-$qemu" >&2
  exit 1
fi
echo "$root"
