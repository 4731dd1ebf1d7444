#!/usr/bin/env bash
# The test command: installs dependencies, builds TinyAI twice (release, and
# AddressSanitizer + UndefinedBehaviorSanitizer) and runs the whole suite in
# each. Build trees: build/release and build/asan.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
jobs=$(nproc)
for variant in release asan; do
  dir=build/$variant
  flags=(-G Ninja -DCMAKE_BUILD_TYPE=Release)
  [ "$variant" = asan ] && flags=(-G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTINYAI_SANITIZE=address,undefined -DTINYAI_BUILD_BENCH=OFF)
  echo "=== $variant: configure and build"
  cmake -S . -B "$dir" "${flags[@]}" > "$dir.configure.log" 2>&1 || { cat "$dir.configure.log"; exit 1; }
  cmake --build "$dir" -j "$jobs"
  echo "=== $variant: tests"
  (cd "$dir" && ctest --output-on-failure -j "$jobs")
done
