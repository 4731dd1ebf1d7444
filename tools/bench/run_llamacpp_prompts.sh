#!/usr/bin/env bash
# Prompts (and nothing else) beside llama.cpp on the same GGUF files, in
# alternated rounds: per round and file, llama-bench then tinyai-bench, each
# with its own repetitions; then the median tokens/s of each side and of the
# ratio over the rounds. Run it on a machine where nothing else runs
# (llama.cpp's spinning threads lose 2-5x beside even a nice -n 19 job).
#
#   LLAMA_BENCH=/scratch/llama.cpp/build/bin/llama-bench \
#     tools/bench/run_llamacpp_prompts.sh build/release M1.gguf [M2.gguf ...]
#
# Environment: LLAMA_BENCH (required: a llama-bench built outside this
# repository), ROUNDS (3), PROMPT (128), THREADS (2), REPS (3: -r of both).
# llama-bench runs `-p PROMPT -n 0 -t THREADS -r REPS -o json`; tinyai-bench
# `-m FILE -t THREADS -p PROMPT -n 1 -r REPS --no-probe --json` (one decoded
# token: its prompt figure does not depend on it). Both warm up with the
# prompt before they time it.
set -euo pipefail

build=${1:?usage: LLAMA_BENCH=PATH run_llamacpp_prompts.sh BUILD_DIR FILE.gguf...}
shift
[ $# -ge 1 ] || { echo "run_llamacpp_prompts.sh: no GGUF file given" >&2; exit 2; }
lb=${LLAMA_BENCH:?set LLAMA_BENCH to a llama-bench binary (built outside this repository)}
tb="$build/bin/tinyai-bench"
[ -x "$lb" ] || { echo "run_llamacpp_prompts.sh: $lb is not an executable" >&2; exit 2; }
[ -x "$tb" ] || { echo "run_llamacpp_prompts.sh: $tb is missing: build $build first" >&2; exit 2; }
for f in "$@"; do [ -r "$f" ] || { echo "run_llamacpp_prompts.sh: cannot read $f" >&2; exit 2; }; done
rounds=${ROUNDS:-3} prompt=${PROMPT:-128} threads=${THREADS:-2} reps=${REPS:-3}

out=$(mktemp)
trap 'rm -f "$out"' EXIT
for r in $(seq "$rounds"); do
  for f in "$@"; do
    l=$("$lb" -m "$f" -p "$prompt" -n 0 -t "$threads" -r "$reps" -o json 2>/dev/null |
        python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["avg_ts"])')
    t=$("$tb" -m "$f" -t "$threads" -p "$prompt" -n 1 -r "$reps" --no-probe --json 2>/dev/null | tail -1 |
        python3 -c 'import json,sys; print(json.loads(sys.stdin.read())["pp_tokens_per_s"])')
    echo "$r $f $l $t" | tee -a "$out" | awk '{printf "round %s %s: llama.cpp %.1f, TinyAI %.1f tokens/s (%.2fx)\n", $1, $2, $3, $4, $4 / $3}'
  done
done
python3 - "$out" <<'EOF'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    _, f, l, t = line.split()
    rows.setdefault(f, []).append((float(l), float(t)))
print("| file | llama.cpp (median) | TinyAI (median) | TinyAI / llama.cpp (median; each round) |")
print("| --- | --- | --- | --- |")
for f, v in rows.items():
    ratios = [t / l for l, t in v]
    print("| %s | %.1f | %.1f | **%.2f** (%s) |" % (f.split("/")[-1], statistics.median(l for l, _ in v),
          statistics.median(t for _, t in v), statistics.median(ratios), ", ".join("%.2f" % x for x in ratios)))
EOF
