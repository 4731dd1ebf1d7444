#!/usr/bin/env bash
# The test command: installs dependencies, builds TinyAI in every configuration and
# runs the tests: the whole suite in a release build and under
# AddressSanitizer + UndefinedBehaviorSanitizer, the threaded tests (label
# "threads", only what they need built) under ThreadSanitizer, the tests
# labelled "portable" in a Debug build, and the libFuzzer targets (clang,
# ASan+UBSan; scripts/fuzz.sh) for TINYAI_FUZZ_SECONDS each (6 here, 20 by default in scripts/fuzz.sh)
# from seed corpora; then cross-built for ARM Linux and run under qemu-user
# (scripts/cross-test.sh): the whole suite but what takes minutes under
# emulation on aarch64 (qemu's default CPU,
# with sdot), the tests labelled "portable" (kernels, KV cache, file format,
# C API, golden texts; only what they need built) on aarch64 without sdot
# (a Cortex-A53) and on armhf with NEON;
# then builds the core for a Cortex-M7 (scripts/cortex-m.sh: its code size
# against README.md's table); runs the firmware example on four emulated
# Cortex-M boards (scripts/firmware-test.sh); and a shared libtinyai (-DBUILD_SHARED_LIBS=ON)
# that the pure-C API test links, whose exported symbols must be exactly the
# headers' functions (label "shared"). Build trees: build/{release,asan,tsan,
# debug,fuzz,aarch64,armhf,cortex-m7,firmware/*,shared}.
set -euo pipefail
cd "$(dirname "$0")/.."
# The tests that read ../shared (stories260K, the golden outputs) fail instead
# of skipping without it (docs/testing.md): CI must not pass without the data.
export TINYAI_REQUIRE_SHARED=1
bash scripts/bootstrap.sh --recipe  # with the default model recipe's torch: its smoke test
jobs=$(nproc)
mkdir -p build
# Tests whose work is numerical quality (quantized models, KV caches and
# pruning against fp32, over hundreds of positions): the release build runs
# them; elsewhere the kernel and KV cache parity tests check the same
# products against the reference.
quality='GroupedQuality|KvQuality|PruneQuality|F16Quality'
# What else takes minutes under qemu-user (10-30x slower than the host):
# long generations and sweeps whose code the rest of the suite runs too, and
# the BPE tokenizer against its reference (20 MB of JSON parsed per test).
# The GGUF imports that also read the file in place (every conversion
# checked twice, a minute under qemu): the NEON products they reach have
# their own parity tests, and the host runs the imports.
slow_emulated="$quality|generate_mem_limit_320M|reference_unseen_prompts_steps256|IndexMutationSweep|QuantizedAppliedSavedAndReopened|tools_kv_cli|BpeReference"
slow_emulated+="|GgufStories.TinyAIsOwnBlocksGiveItsLogits|GgufSynthetic.KQuantBlocksImportAsCopies|MixedPrecision.BlockFormatsAndTheirFallbacks"
# libFuzzer's seconds per target (scripts/fuzz.sh; a campaign runs longer).
export TINYAI_FUZZ_SECONDS=${TINYAI_FUZZ_SECONDS:-6}
# Each stage's wall time, printed at the end (CI's budget is 60 minutes).
timings=()
started=$SECONDS
stage_done() { timings+=("$(printf '%-28s %5d s' "$1" $((SECONDS - started)))"); started=$SECONDS; }
stage_done bootstrap
for variant in release asan tsan debug; do
  dir=build/$variant
  select=()
  targets=()
  case $variant in
    release) flags=(-DCMAKE_BUILD_TYPE=Release) ;;
    # -O1 -g1: compiled a third faster than -O2 -g, with line numbers in
    # the reports. Without the quality figures (the numerics of quantized
    # models, their KV caches and pruning, measured by the release run) and
    # the longest generations: the code they run is run under the
    # sanitizers by the models' own tests.
    asan) flags=(-DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG"
                 "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG" -DTINYAI_SANITIZE=address,undefined
                 -DTINYAI_BUILD_BENCH=OFF)
          # tools_install_cli builds its own (unsanitized) tree: the release run has it.
          select=(-E "$quality|generate_mem_limit_320M|reference_unseen_prompts_steps256|tools_install_cli") ;;
    # Only what the threaded tests need (their programs, the tools their
    # fixtures call).
    tsan) flags=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DTINYAI_SANITIZE=thread -DTINYAI_BUILD_BENCH=OFF)
          select=(-L threads) targets=(--target tinyai_threads_tests) ;;
    # A Debug build compiles (the SIMD kernels optimised, CMakeLists.txt) and
    # its portable tests pass.
    debug) flags=(-DCMAKE_BUILD_TYPE=Debug -DTINYAI_BUILD_BENCH=OFF)
           select=(-L portable) targets=(--target tinyai_portable_tests) ;;
  esac
  echo "=== $variant: configure and build"
  cmake -S . -B "$dir" -G Ninja "${flags[@]}" > "$dir.configure.log" 2>&1 || { cat "$dir.configure.log"; exit 1; }
  cmake --build "$dir" -j "$jobs" "${targets[@]}"
  echo "=== $variant: tests"
  (cd "$dir" && ctest --output-on-failure -j "$jobs" "${select[@]}")
  stage_done "$variant"
done

# Every libFuzzer target (the loader, the llama2.c checkpoint and tokenizer
# imports, dense definitions, prompts, the C API's arguments) for
# TINYAI_FUZZ_SECONDS each (6 here) from seed corpora the project's own
# writers make; scripts/fuzz.sh fails at the first crash.
bash scripts/fuzz.sh
stage_done fuzz

# ARM Linux under qemu-user: the whole suite on aarch64 but what is slow
# under emulation ($slow_emulated); on the 32-bit targets the "portable"
# tests, without the quality figures: the products they go through are
# checked against the reference on every target by the kernel and KV cache
# parity tests.
# TINYAI_EXPECT_KERNELS: the table Dispatch.TargetKernelSet requires to run.
TINYAI_EXPECT_KERNELS=neon64dot bash scripts/cross-test.sh aarch64 -E "$slow_emulated"
stage_done aarch64
# The same build on a CPU without ARMv8.2's sdot (qemu's Cortex-A53), where
# dispatch chooses the plain NEON table: the tests of what goes through the
# table (products, KV cache, golden texts).
echo "=== aarch64 on a Cortex-A53 (no sdot): the table's tests (under qemu)"
(cd build/aarch64 && QEMU_CPU=cortex-a53 TINYAI_EXPECT_KERNELS=neon64 \
  ctest --output-on-failure -j "$jobs" -L portable -R "Kernel|Grouped|Sparse|Dispatch|RefIs|Fmath|Kv|golden" \
  -E "$quality")
# The sdot file compiles whatever core the build names: one older than
# ARMv8.2 (cortex-a72: it takes -march=armv8.2-a+dotprod) and a newer one
# (cortex-a55: -mcpu=cortex-a55+dotprod). Only that object is built.
for cpu in cortex-a72 cortex-a55; do
  dir=build/aarch64-$cpu
  echo "=== aarch64 -mcpu=$cpu: the sdot kernels compile"
  cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS="-mcpu=$cpu" \
    -DCMAKE_TOOLCHAIN_FILE="$PWD/cmake/toolchains/aarch64-linux-gnu.cmake" -DTINYAI_BUILD_TESTS=OFF \
    -DTINYAI_BUILD_TOOLS=OFF -DTINYAI_BUILD_EXAMPLES=OFF -DTINYAI_BUILD_BENCH=OFF -DTINYAI_BUILD_BAREMETAL_HOST=OFF \
    > "$dir.configure.log" 2>&1 || { cat "$dir.configure.log"; exit 1; }
  cmake --build "$dir" --target CMakeFiles/tinyai.dir/src/kernels/simd/kernels_arm_neon_dot.cc.o
done
stage_done aarch64-cortex-a53
# 32-bit ARM with NEON. Without NEON (scripts/cross-test.sh
# armhf-nofpu-neon) the reference kernels run on 32-bit ARM as they do on the
# Cortex-M boards of the firmware stage below, whose text must equal the
# host's.
bash scripts/cross-test.sh armhf --portable -E "$quality"
stage_done armhf

echo "=== cortex-m7: the core for a microcontroller, its code size"
bash scripts/cortex-m.sh
stage_done cortex-m7

# Firmware on emulated microcontrollers (examples/firmware under
# qemu-system-arm: Cortex-M4, M7, M33, M55): stories260K and the default
# model, greedy, the host reference's text byte for byte; bad images and a
# short arena stop with their status.
echo "=== firmware: four Cortex-M boards under qemu-system-arm"
bash scripts/firmware-test.sh
stage_done firmware

# The shared library: only what its tests need (the library, the converter
# that makes stories260K for the C API test, that test).
dir=build/shared
echo "=== shared: configure and build"
cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=ON -DTINYAI_BUILD_BENCH=OFF \
  -DTINYAI_BUILD_EXAMPLES=OFF -DTINYAI_BUILD_BAREMETAL_HOST=OFF > "$dir.configure.log" 2>&1 \
  || { cat "$dir.configure.log"; exit 1; }
cmake --build "$dir" -j "$jobs" --target tinyai tinyai-convert tinyai_c_api_test
echo "=== shared: tests"
(cd "$dir" && ctest --output-on-failure -j "$jobs" -L shared)
stage_done shared
echo "=== stage times"
printf '%s\n' "${timings[@]}"
