#!/usr/bin/env bash
# Reproduces the figures of docs/benchmarks.md: converts stories260K (from
# ../shared) and writes the synthetic 110M-shape model, then runs tinyai-bench
# on each with 1 and 2 threads. Usage: tools/bench/run_benchmarks.sh [BUILD_DIR]
# Prints one JSON object per run, then a markdown table.
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build/release}
bin=$build/bin
work=$build/bench-models
mkdir -p "$work"
shared=../shared/models/stories260K
models=()
if [ -f "$shared/stories260K.bin" ]; then
  [ -f "$work/stories260K.tmai" ] || "$bin/tinyai-convert" --from llama2c --tokenizer "$shared/tok512.bin" \
      "$shared/stories260K.bin" "$work/stories260K.tmai"
  models+=("$work/stories260K.tmai")
fi
m110=$work/synthetic-110M.tmai
[ -f "$m110" ] || "$bin/tinyai-convert" --synthetic \
    dim=768,hidden=2048,layers=12,heads=12,kv_heads=12,vocab=32000,seq_len=1024,seed=1 "$m110"
models+=("$m110")
results=$(mktemp)
for model in "${models[@]}"; do
  for threads in 1 2; do
    "$bin/tinyai-bench" -m "$model" -t "$threads" --prompt 128 --gen 128 --json | tee -a "$results"
  done
done
echo
echo "| model | threads | prompt tok/s | decode tok/s | TTFT ms | MiB/token | effective GB/s | machine GB/s (all cores) | fraction | GB/s at this thread count | fraction | peak RSS MiB |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
/usr/bin/python3 - "$results" <<'PY'
import json, os, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    print("| %s | %d | %.1f | %.1f | %.1f | %.1f | %.2f | %.2f | %.0f%% | %.2f | %.0f%% | %.1f |" % (
        os.path.basename(r["model"]), r["threads"], r["pp_tokens_per_s"], r["decode_tokens_per_s"], r["ttft_ms"],
        r["bytes_per_token"] / 2**20, r["effective_gbps"], r["memory_read_gbps"], 100 * r["bandwidth_fraction"],
        r["memory_read_gbps_same_threads"], 100 * r["bandwidth_fraction_same_threads"], r["peak_rss_bytes"] / 2**20))
PY
rm -f "$results"
