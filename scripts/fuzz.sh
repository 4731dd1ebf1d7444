#!/usr/bin/env bash
# The libFuzzer targets (tests/CMakeLists.txt says what each covers): builds
# them in build/fuzz with clang-14, ASan and UBSan, writes each target's seed
# corpus with the project's own writers into build/fuzz/corpus/TARGET (the
# inputs libFuzzer finds accumulate there), and runs each target for SECONDS
# from it. Fails at the first crash, hang (an input over 10 s), leak or
# sanitizer report, printing the log's end; the input that did it is in
# build/fuzz/artifacts/TARGET/, and `build/fuzz/tests/tinyai_TARGET_fuzz
# FILE` replays it (TINYAI_FUZZ_TRACE=1 makes the capi target print its calls).
#
#   bash scripts/fuzz.sh [--no-build] [SECONDS] [TARGET...]
#
# TARGET: reader llama2c tokenizer dense prompt capi gguf safetensors store session (default: all, one after
# the other). SECONDS per target: default $TINYAI_FUZZ_SECONDS, else 20.
# TINYAI_FUZZ_FLAGS adds libFuzzer flags (e.g. "-jobs=2 -workers=2").
# A long campaign of one target, at low priority:
#   nice -n 10 bash scripts/fuzz.sh 3600 capi
set -euo pipefail
cd "$(dirname "$0")/.."

build=1
if [[ "${1:-}" == "--no-build" ]]; then
  build=0
  shift
fi
seconds=${TINYAI_FUZZ_SECONDS:-20}
if [[ "${1:-}" =~ ^[0-9]+$ ]]; then
  seconds=$1
  shift
fi
all=(reader llama2c tokenizer dense prompt capi gguf safetensors store session)
targets=("$@")
[[ ${#targets[@]} -gt 0 ]] || targets=("${all[@]}")
for t in "${targets[@]}"; do
  [[ " ${all[*]} " == *" $t "* ]] || { echo "fuzz.sh: unknown target '$t' (${all[*]})" >&2; exit 2; }
done

fuzz=build/fuzz
if [[ $build == 1 ]]; then
  mkdir -p build
  CC=clang-14 CXX=clang++-14 cmake -S . -B "$fuzz" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DTINYAI_SANITIZE=address,undefined -DTINYAI_FUZZ=ON -DTINYAI_BUILD_BENCH=OFF -DTINYAI_BUILD_EXAMPLES=OFF \
    "-DCMAKE_C_FLAGS=-fsanitize=fuzzer-no-link -DFUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION" \
    "-DCMAKE_CXX_FLAGS=-fsanitize=fuzzer-no-link -DFUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION" > "$fuzz.configure.log" 2>&1 \
    || { cat "$fuzz.configure.log"; exit 1; }
  cmake --build "$fuzz" -j "$(nproc)" --target tinyai-convert tinyai-prune tinyai-quantize $(printf 'tinyai_%s_fuzz ' "${targets[@]}")
fi

# Longest input per target: whole small models for the file formats, less
# for texts and call sequences.
max_len() {
  case $1 in
    dense|capi|store) echo 4096 ;;
    prompt) echo 2048 ;;
    session) echo 16384 ;;
    *) echo 65536 ;;
  esac
}

seeds() {
  local t=$1 dir=$fuzz/corpus/$1
  mkdir -p "$dir"
  if [[ $t == reader ]]; then
    # Models written by tinyai-convert: a LLaMA with tied and one with
    # separate classifier, one compressed with zstd, and a dense network.
    local convert=$fuzz/bin/tinyai-convert
    "$convert" --synthetic dim=16,hidden=32,layers=1,heads=2,kv_heads=1,vocab=260,seq_len=8 "$dir/tiny.tmai" 2>/dev/null
    "$convert" --synthetic dim=16,hidden=24,layers=2,heads=4,kv_heads=2,vocab=270,seq_len=8,shared=0 "$dir/untied.tmai" 2>/dev/null
    "$convert" --compress zstd --synthetic dim=16,hidden=32,layers=1,heads=2,kv_heads=1,vocab=260,seq_len=8,seed=2 \
      "$dir/zstd.tmai" 2>/dev/null
    "$convert" --dense models/mlp_residual.def "$dir/mlp-residual.tmai" 2>/dev/null
    # Block-sparse matrices (tinyai-prune): f32 in 4x4 blocks, and q4 in
    # unstructured ones (the bitmaps, the bands, a narrow last block).
    local prune=$fuzz/bin/tinyai-prune quantize=$fuzz/bin/tinyai-quantize
    "$prune" --method magnitude --eval 0 --quiet "$dir/untied.tmai" "$dir/pruned.tmai" >/dev/null 2>&1
    "$prune" --method magnitude --block 1 --sparsity 0.3 --eval 0 --quiet "$dir/tiny.tmai" "$dir/pruned-b1.tmai" \
      >/dev/null 2>&1
    "$quantize" --all int4 --eval 0 --quiet "$dir/pruned-b1.tmai" "$dir/pruned-b1-q4.tmai" >/dev/null 2>&1
  else
    # The other targets write their own (TINYAI_FUZZ_WRITE_SEEDS).
    TINYAI_FUZZ_WRITE_SEEDS=$dir "$fuzz/tests/tinyai_${t}_fuzz" > /dev/null 2>&1 \
      || { echo "fuzz.sh: tinyai_${t}_fuzz could not write its seeds" >&2; exit 1; }
  fi
}

mkdir -p "$fuzz/logs"
for t in "${targets[@]}"; do
  seeds "$t"
  mkdir -p "$fuzz/artifacts/$t"
  log=$fuzz/logs/$t.log
  echo "=== fuzz: $t, $seconds s ($(ls "$fuzz/corpus/$t" | wc -l) inputs in build/fuzz/corpus/$t)"
  # shellcheck disable=SC2086  # TINYAI_FUZZ_FLAGS is a list of flags
  if ! "$fuzz/tests/tinyai_${t}_fuzz" -max_total_time="$seconds" -max_len="$(max_len "$t")" -timeout=10 \
      -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$fuzz/artifacts/$t/" ${TINYAI_FUZZ_FLAGS:-} \
      "$fuzz/corpus/$t" > "$log" 2>&1; then
    tail -n 80 "$log"
    echo "fuzz: $t FAILED (log $log; the input is in $fuzz/artifacts/$t/)" >&2
    exit 1
  fi
  grep -E "^#[0-9]+ +DONE|stat::number_of_executed_units|stat::peak_rss_mb" "$log" || true
done
echo "fuzz: no crash in ${targets[*]} ($seconds s each)"
