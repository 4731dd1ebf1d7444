#!/usr/bin/env bash
# The test command: installs dependencies, builds TinyAI three times and
# runs the tests: the whole suite in a release build and under
# AddressSanitizer + UndefinedBehaviorSanitizer, and the threaded tests
# (label "threads") under ThreadSanitizer. Build trees: build/{release,asan,tsan}.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
jobs=$(nproc)
mkdir -p build
for variant in release asan tsan; do
  dir=build/$variant
  select=()
  case $variant in
    release) flags=(-DCMAKE_BUILD_TYPE=Release) ;;
    asan) flags=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DTINYAI_SANITIZE=address,undefined -DTINYAI_BUILD_BENCH=OFF) ;;
    tsan) flags=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DTINYAI_SANITIZE=thread -DTINYAI_BUILD_BENCH=OFF)
          select=(-L threads) ;;
  esac
  echo "=== $variant: configure and build"
  cmake -S . -B "$dir" -G Ninja "${flags[@]}" > "$dir.configure.log" 2>&1 || { cat "$dir.configure.log"; exit 1; }
  cmake --build "$dir" -j "$jobs"
  echo "=== $variant: tests"
  (cd "$dir" && ctest --output-on-failure -j "$jobs" "${select[@]}")
done
