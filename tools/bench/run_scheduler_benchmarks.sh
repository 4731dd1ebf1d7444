#!/usr/bin/env bash
# Reproduces the forward scheduler's figures of docs/benchmarks.md:
#  1. planning time of 100 .. 20,000-layer graphs (tinyai-bench-scheduler,
#     Google Benchmark, median of 5);
#  2. the LLaMA graph's arena against its lower bound and the naive total at
#     several max shapes, for stories260K (converted from ../shared) and the
#     synthetic 110M shape (written if missing), 1 and 2 threads, planned and
#     debug execution (tinyai-inspect --plan --json; only the index is read).
# Usage: tools/bench/run_scheduler_benchmarks.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build/release}
bin=$build/bin
work=$build/bench-models
mkdir -p "$work"

echo "## planning time"
"$bin/tinyai-bench-scheduler" --benchmark_repetitions=5 --benchmark_report_aggregates_only=true 2>/dev/null \
  | grep -E "median|Benchmark|---"

shared=../shared/models/stories260K
models=()
if [ -f "$shared/stories260K.bin" ]; then
  [ -f "$work/stories260K.tmai" ] || "$bin/tinyai-convert" --from llama2c --tokenizer "$shared/tok512.bin" \
      "$shared/stories260K.bin" "$work/stories260K.tmai" 2>/dev/null
  models+=("$work/stories260K.tmai")
fi
m110=$work/synthetic-110M.tmai
[ -f "$m110" ] || "$bin/tinyai-convert" --synthetic \
    dim=768,hidden=2048,layers=12,heads=12,kv_heads=12,vocab=32000,seq_len=1024,seed=1 "$m110" 2>/dev/null
models+=("$m110")

echo
echo "## the LLaMA graph: arena vs lower bound vs naive"
echo
echo "| model | threads | max shapes (rows:positions) | execution | arena bytes | lower bound | arena / bound | naive bytes | naive / arena |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"
for model in "${models[@]}"; do
  for threads in 1 2; do
    for shapes in "1:0" "16:0" "64:0" "16:64 1:0" "4:0 1:0"; do
      for debug in "" "--debug-exec"; do
        args=()
        for s in $shapes; do args+=(--shape "$s"); done
        "$bin/tinyai-inspect" "$model" --plan --json -t "$threads" "${args[@]}" $debug | /usr/bin/python3 -c '
import json, os, sys
d = json.load(sys.stdin)
print("| %s | %s | %s | %s | %d | %d | %.4f | %d | %.2f |" % (os.path.basename(sys.argv[1]), sys.argv[2], sys.argv[3],
      "debug" if sys.argv[4] else "planned", d["arena_bytes"], d["lower_bound_bytes"],
      d["arena_bytes"] / d["lower_bound_bytes"], d["naive_bytes"], d["naive_bytes"] / d["arena_bytes"]))
' "$model" "$threads" "$shapes" "$debug"
      done
    done
  done
done
