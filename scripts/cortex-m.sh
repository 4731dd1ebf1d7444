#!/usr/bin/env bash
# Builds the core for a Cortex-M7 with FPU (arm-none-eabi-gcc, the baremetal
# port: no threads, no zstd, no file system, a static arena) into a static
# library, prints its code size with arm-none-eabi-size, and fails when the
# code (text + data) is more than 10% above the figure in README.md's size
# table ("| Cortex-M7 core library | N bytes |"): update the table with the
# change that grows it. Build tree: build/cortex-m7.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=build/cortex-m7
cmake -S . -B "$dir" -G Ninja -DCMAKE_TOOLCHAIN_FILE=cmake/toolchains/cortex-m7.cmake -DCMAKE_BUILD_TYPE=MinSizeRel \
  -DBUILD_SHARED_LIBS=OFF -DTINYAI_PORT=baremetal -DTINYAI_WITH_THREADS=OFF -DTINYAI_WITH_ZSTD=OFF \
  -DTINYAI_BUILD_TOOLS=OFF -DTINYAI_BUILD_TESTS=OFF -DTINYAI_BUILD_EXAMPLES=OFF -DTINYAI_BUILD_BENCH=OFF \
  > "$dir.configure.log" 2>&1 || { cat "$dir.configure.log"; exit 1; }
cmake --build "$dir" -j "$(nproc)" --target tinyai
lib=$dir/libtinyai.a
echo "=== arm-none-eabi-size $lib"
arm-none-eabi-size -t "$lib" | tee "$dir/size.txt"
# The core must not reach for a heap, threads, files or exceptions.
forbidden='^(malloc|free|calloc|realloc|_Znwj|_Znaj|_ZdlPv|_ZdaPv|_ZdlPvj|pthread_.*|fopen|open|mmap|__cxa_throw|__cxa_allocate_exception)$'
undefined=$(arm-none-eabi-nm -u "$lib" | awk '{print $2}' | sort -u | grep -E "$forbidden" || true)
if [ -n "$undefined" ]; then
  echo "cortex-m: the core library references $(echo "$undefined" | tr '\n' ' ')"; exit 1
fi
code=$(awk '/\(TOTALS\)/ {print $1 + $2}' "$dir/size.txt")
listed=$(sed -n 's/^| Cortex-M7 core library | \([0-9,]*\) bytes.*/\1/p' README.md | tr -d ,)
[ -n "$listed" ] || { echo "cortex-m: README.md has no '| Cortex-M7 core library | N bytes |' row"; exit 1; }
echo "cortex-m: text + data $code bytes; README lists $listed bytes; no heap, thread, file or exception symbols"
if [ "$code" -gt $((listed * 110 / 100)) ]; then
  echo "cortex-m: the core grew more than 10% past README.md's figure: update its size table"; exit 1
fi
