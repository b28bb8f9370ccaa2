#!/usr/bin/env bash
# Installs the Debian packages moe-mlir needs, only when they are missing.
# Usage: setup-deps.sh [EXTRA_PACKAGE...]
# Idempotent; run as root (or with sudo available). apt is the only registry used.
set -euo pipefail

PKGS=(
  cmake ninja-build
  llvm-22-dev libmlir-22-dev mlir-22-tools llvm-22-tools
  clang-22 lld-22
  libgtest-dev
  libomp-22-dev
  python3-numpy python3-psutil python3-torch python3-matplotlib
  libopenmpi-dev openmpi-bin
)
# Extra packages for optional jobs, e.g. `setup-deps.sh libclang-rt-22-dev`.
PKGS+=("$@")

missing=()
for p in "${PKGS[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup-deps: all packages present"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO=sudo; else
    echo "setup-deps: missing packages (${missing[*]}) and not root; rerun as root" >&2
    exit 1
  fi
fi

echo "setup-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
