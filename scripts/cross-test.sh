#!/usr/bin/env bash
# Cross-builds TinyAI for an ARM Linux target with Debian's cross compilers
# and runs the whole test suite under qemu-user (scripts/bootstrap.sh installs
# both). Build tree: build/TARGET.
#   scripts/cross-test.sh aarch64            64-bit ARM (NEON kernels)
#   scripts/cross-test.sh armhf              32-bit ARMv7 hard-float, -mfpu=neon (NEON kernels)
#   scripts/cross-test.sh armhf-nofpu-neon   32-bit ARMv7 hard-float, -mfpu=vfpv3-d16 (reference kernels)
#   scripts/cross-test.sh TARGET --portable  only the tests labelled "portable"
#                                            (built and run: ctest -L portable)
# Extra arguments go to ctest (e.g. -R golden, -L unit).
set -euo pipefail
cd "$(dirname "$0")/.."
# The tests that read ../shared fail instead of skipping without it (docs/testing.md).
export TINYAI_REQUIRE_SHARED=1
target=${1:-}
[ $# -gt 0 ] && shift
build_targets=()
select=()
if [ "${1:-}" = --portable ]; then
  shift
  build_targets=(--target tinyai_portable_tests)
  select=(-L portable)
fi
case $target in
  aarch64) triplet=aarch64-linux-gnu qemu=qemu-aarch64 flags=() ;;
  armhf) triplet=arm-linux-gnueabihf qemu=qemu-arm flags=(-DTINYAI_ARM_FPU=neon) ;;
  armhf-nofpu-neon) triplet=arm-linux-gnueabihf qemu=qemu-arm flags=(-DTINYAI_ARM_FPU=vfpv3-d16) ;;
  *) echo "usage: $0 aarch64|armhf|armhf-nofpu-neon [ctest arguments...]" >&2; exit 2 ;;
esac
for tool in "$triplet-g++" "$qemu"; do
  command -v "$tool" > /dev/null || { echo "$tool not found: run scripts/bootstrap.sh" >&2; exit 1; }
done
# Absolute: a relative path given again on a second configure would stay
# relative in the cache (consumer_find_package hands it on).
flags+=("-DCMAKE_TOOLCHAIN_FILE=$PWD/cmake/toolchains/$triplet.cmake")
jobs=$(nproc)
dir=build/$target
mkdir -p build
echo "=== $target: configure and build"
cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTINYAI_BUILD_BENCH=OFF "${flags[@]}" \
  > "$dir.configure.log" 2>&1 || { cat "$dir.configure.log"; exit 1; }
cmake --build "$dir" -j "$jobs" "${build_targets[@]}"
echo "=== $target: tests (under qemu)"
(cd "$dir" && ctest --output-on-failure -j "$jobs" "${select[@]}" "$@")
