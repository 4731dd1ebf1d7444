#!/usr/bin/env bash
# Generation beside a CPU hog: decode tokens/s at 1 and 2 threads with HOGS
# busy-loop processes running (default 2, one per core of this machine), and
# without them, for each model; 2 threads must never be slower than 1 by more
# than 10% (docs/benchmarks.md, "Threads beside a CPU hog").
#   tools/bench/run_contention_benchmark.sh BUILD_DIR [MODEL.tmai ...]
# Default models: stories260K (../shared, converted by the tests), the default
# model, and a synthetic 15M-parameter LLaMA written into BUILD_DIR.
# Environment: RUNS (default 7) runs per setting;
# HOGS (default 2); GEN (default 256) decoded tokens per generation; SECONDS_PER_RUN
# (default 1): a run is as many back-to-back generations as last about that
# long at 1 thread without hogs (a 15 ms run would measure the scheduler's
# timeslices, not the code), its figure their tokens over their decode time;
# QUIET=1 skips the runs without hogs. A run alternates 1- and 2-thread
# generations (see pair below). Prints each run's figures and, per model, the
# median and worst of the runs' 2-thread over 1-thread ratios.
set -euo pipefail
build=${1:?usage: $0 BUILD_DIR [MODEL.tmai ...]}
shift
bench=$build/bin/tinyai-bench
[ -x "$bench" ] || { echo "$bench not found: build first" >&2; exit 1; }
runs=${RUNS:-7}
hogs=${HOGS:-2}
gen=${GEN:-256}
models=("$@")
if [ ${#models[@]} -eq 0 ]; then
  [ -f "$build/testdata/stories260K.tmai" ] && models+=("$build/testdata/stories260K.tmai")
  models+=("$(dirname "$0")/../../models/tinyai-fortunes.tmai")
  syn=$build/bench-models/synthetic-15M.tmai
  if [ ! -f "$syn" ]; then
    mkdir -p "$(dirname "$syn")"
    "$build/bin/tinyai-convert" --synthetic dim=288,hidden=768,layers=6,heads=6,kv_heads=6,vocab=32000,seq_len=512,seed=1 \
      "$syn" > /dev/null
  fi
  models+=("$syn")
fi

hog_pids=()
stop_hogs() {
  for p in "${hog_pids[@]}"; do kill "$p" 2> /dev/null || true; done
  for p in "${hog_pids[@]}"; do wait "$p" 2> /dev/null || true; done
  hog_pids=()
}
trap stop_hogs EXIT
start_hogs() {
  for _ in $(seq "$hogs"); do
    bash -c 'while :; do :; done' &
    hog_pids+=($!)
  done
  sleep 1
}

# decode tokens/s of one generation
gen1() {
  "$bench" -m "$1" -t "$2" --prompt 16 --gen "$gen" --json --no-probe 2> /dev/null |
    sed -n 's/.*"decode_tokens_per_s":\([0-9.]*\).*/\1/p'
}

# One run: reps generations at 1 thread and reps at 2 threads, alternated
# (1, 2, 1, 2, ...) so that both meet the same placement of the hogs on the
# cores, which the kernel changes only every second or so and which alone
# makes a 1-thread run take a whole core or a third of one; prints each
# setting's tokens over its decode time.
reps=1
pair() {
  local s1=0 s2=0 tps
  for _ in $(seq "$reps"); do
    tps=$(gen1 "$1" 1)
    s1=$(awk -v s="$s1" -v g="$gen" -v t="$tps" 'BEGIN { printf "%.9f", s + g / t }')
    tps=$(gen1 "$1" 2)
    s2=$(awk -v s="$s2" -v g="$gen" -v t="$tps" 'BEGIN { printf "%.9f", s + g / t }')
  done
  awk -v a="$s1" -v b="$s2" -v g="$gen" -v r="$reps" 'BEGIN { printf "%.1f %.1f", g * r / a, g * r / b }'
}

median() { sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }

measure() {  # model label
  local m=$1 label=$2 t1=() t2=() ratios=() p
  for _ in $(seq "$runs"); do
    p=$(pair "$m")
    t1+=("${p% *}")
    t2+=("${p#* }")
    ratios+=("$(awk -v a="${p% *}" -v b="${p#* }" 'BEGIN { printf "%.3f", b / a }')")
  done
  local m1 m2 mr wr
  m1=$(printf '%s\n' "${t1[@]}" | median)
  m2=$(printf '%s\n' "${t2[@]}" | median)
  mr=$(printf '%s\n' "${ratios[@]}" | median)
  wr=$(printf '%s\n' "${ratios[@]}" | sort -g | head -n 1)
  printf '%-34s %-10s 1 thread: %s\n' "$(basename "$m")" "$label" "${t1[*]}"
  printf '%-34s %-10s 2 threads: %s\n' "$(basename "$m")" "$label" "${t2[*]}"
  printf '%-34s %-10s 2t/1t: %s\n' "$(basename "$m")" "$label" "${ratios[*]}"
  awk -v m="$(basename "$m")" -v l="$label" -v m1="$m1" -v m2="$m2" -v mr="$mr" -v wr="$wr" 'BEGIN {
    printf "%-34s %-10s median 1t %.1f, 2t %.1f tokens/s; 2t/1t per run: median %.2f, worst %.2f%s\n", m, l, m1, m2,
           mr, wr, (mr < 0.9 ? "  <-- 2 threads more than 10% slower" : "") }'
}

echo "contention benchmark: $(nproc) cores, $hogs busy-loop hogs, $runs runs per setting, $gen decoded tokens per generation"
for m in "${models[@]}"; do
  probe=$(gen1 "$m" 1)
  reps=$(awk -v t="$probe" -v g="$gen" -v s="${SECONDS_PER_RUN:-1}" 'BEGIN { r = int(s * t / g + 0.5); print r < 1 ? 1 : r }')
  echo "$(basename "$m"): $reps generations of $gen tokens per run (1 thread, no hogs: $probe tokens/s)"
  if [ "${QUIET:-0}" != 1 ]; then measure "$m" idle; fi
  start_hogs
  measure "$m" "$hogs hogs"
  stop_hogs
done
