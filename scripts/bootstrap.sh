#!/usr/bin/env bash
# Installs what TinyAI needs from Debian's packages, only what is missing.
# Safe to run again; run as root (or with sudo available).
set -euo pipefail

packages=(cmake ninja-build g++ pkg-config libzstd-dev libxsimd-dev libconcurrentqueue-dev
          libgtest-dev libgmock-dev libbenchmark-dev python3-numpy python3-yaml clang-14 libclang-rt-14-dev
          gcc-arm-none-eabi libstdc++-arm-none-eabi-newlib binutils-arm-none-eabi)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "bootstrap: all dependencies present"
  exit 0
fi
echo "bootstrap: installing ${missing[*]}"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
# A transient failure of one index (a mirror in sync) is not fatal.
$SUDO apt-get update -q || echo "bootstrap: apt-get update reported a failure; trying the install anyway"
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
