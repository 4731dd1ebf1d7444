#!/usr/bin/env bash
# A GGUF file read in place against its .tmai conversion, in the same run
# (docs/benchmarks.md, "GGUF read in place"): the synthetic ~1B LLaMA (seed
# 11) in each of DTYPES, written as GGUF by the tests' writer
# (tinyai_test_export, the stored blocks as they are) and converted back by
# tinyai-convert --from gguf; then, alternated, RUNS times each:
#  - open: tinyaiOpenMappedModel (tinyai-bench's open_ms: the index read and
#    checked, a GGUF's built) and tinyaiCreateLLM (runner_ms: with no cap,
#    every weight loaded, a .tmai's checked), warm (the file in the page cache);
#  - decode and prompt tokens/s, warm, no limit;
#  - decode tokens/s and bytes read per token cold under a cap the kernel
#    enforces: run-capped CAP_MB --cold -- tinyai-bench --mem-limit LIMIT;
# and the least --mem-limit tinyai-inspect gives each file.
#   tools/bench/run_gguf_in_place.sh [BUILD_DIR]
# Environment: RUNS (default 3), DTYPES (default "q8_g32 q4nl_g32": Q8_0 and IQ4_NL in the GGUF),
# THREADS (2), PROMPT (32), GEN (32), LIMIT (the --mem-limit, default 256M), CAP_MB (the cgroup, 280),
# SPEC (the shape), RUN_CAPPED (default ../shared/tools/run-capped).
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build/release}
bin=$build/bin
export_tool=$build/tests/tinyai_test_export
for x in "$bin/tinyai-bench" "$bin/tinyai-convert" "$bin/tinyai-inspect" "$export_tool"; do
  [ -x "$x" ] || { echo "$x not found: build first (tests included)" >&2; exit 1; }
done
runs=${RUNS:-3}
threads=${THREADS:-2}
limit=${LIMIT:-256M}
cap=${CAP_MB:-280}
capped=${RUN_CAPPED:-../shared/tools/run-capped}
spec=${SPEC:-dim=2048,hidden=5632,layers=22,heads=32,kv_heads=4,vocab=32000,seq_len=1024,seed=11}
work=$build/bench-models
mkdir -p "$work"
tag=$(printf '%s' "$spec" | cksum | cut -d' ' -f1)
read -ra dtypes <<< "${DTYPES:-q8_g32 q4nl_g32}"
declare -A file
for d in "${dtypes[@]}"; do
  src=$work/inplace-$tag-$d.tmai
  [ -f "$src" ] || "$bin/tinyai-convert" --dtype "$d" --synthetic "$spec" "$src" > /dev/null
  file[$d.gguf]=$work/inplace-$tag-$d.gguf
  file[$d.tmai]=$work/inplace-$tag-$d.converted.tmai
  [ -f "${file[$d.gguf]}" ] || "$export_tool" gguf "$src" "${file[$d.gguf]}" --type stored > /dev/null
  [ -f "${file[$d.tmai]}" ] || "$bin/tinyai-convert" --from gguf "${file[$d.gguf]}" "${file[$d.tmai]}" > /dev/null
done

field() { sed -n "s/.*\"$1\":\([0-9.]*\).*/\1/p"; }
median() { tr ' ' '\n' | grep . | sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
declare -A open runner warm prompt cold readpt
prompt_n=${PROMPT:-32}
gen_n=${GEN:-32}
echo "GGUF in place vs .tmai: $spec, $threads threads, prompt $prompt_n, gen $gen_n; cold: run-capped $cap --cold, --mem-limit $limit; $runs runs each, alternated"
for _ in $(seq "$runs"); do
  for d in "${dtypes[@]}"; do
    for kind in gguf tmai; do
      k=$d.$kind
      f=${file[$k]}
      cat "$f" > /dev/null  # warm: in the page cache
      j=$("$bin/tinyai-bench" -m "$f" -t "$threads" --prompt "$prompt_n" --gen "$gen_n" --no-probe --json)
      o=$(field open_ms <<< "$j"); n=$(field runner_ms <<< "$j"); w=$(field decode_tokens_per_s <<< "$j"); p=$(field pp_tokens_per_s <<< "$j")
      j=$("$capped" "$cap" --cold -- "$bin/tinyai-bench" -m "$f" -t "$threads" --prompt "$prompt_n" --gen "$gen_n" \
          --no-probe --json --mem-limit "$limit" 2> /dev/null)
      c=$(field decode_tokens_per_s <<< "$j"); r=$(field read_bytes_per_token <<< "$j")
      open[$k]+=" $o"; runner[$k]+=" $n"; warm[$k]+=" $w"; prompt[$k]+=" $p"; cold[$k]+=" $c"; readpt[$k]+=" $r"
      printf '  %-14s open %7.2f ms  runner %7.2f ms  warm decode %7.2f tok/s  prompt %7.2f tok/s  cold capped decode %6.2f tok/s, %6.1f MiB read/token\n' \
        "$k" "$o" "$n" "$w" "$p" "$c" "$(awk -v b="$r" 'BEGIN {print b / 1048576}')"
    done
  done
done
echo "medians (in place / .tmai):"
for d in "${dtypes[@]}"; do
  least_g=$("$bin/tinyai-inspect" "${file[$d.gguf]}" | sed -n 's/.*least --mem-limit [0-9.]* MiB (\([0-9]*\) bytes).*/\1/p')
  least_t=$("$bin/tinyai-inspect" "${file[$d.tmai]}" | sed -n 's/.*least --mem-limit [0-9.]* MiB (\([0-9]*\) bytes).*/\1/p')
  for m in open runner warm prompt cold; do
    declare -n arr=$m
    g=$(median <<< "${arr[$d.gguf]}"); t=$(median <<< "${arr[$d.tmai]}")
    printf '  %-9s %-7s in place %9.2f  .tmai %9.2f  ratio %.3f\n' "$d" "$m" "$g" "$t" "$(awk -v a="$g" -v b="$t" 'BEGIN {print (b > 0 ? a / b : 0)}')"
  done
  printf '  %-9s least --mem-limit: in place %s bytes, .tmai %s bytes\n' "$d" "$least_g" "$least_t"
  printf '  %-9s files: GGUF %s bytes, .tmai %s bytes\n' "$d" "$(stat -c %s "${file[$d.gguf]}")" "$(stat -c %s "${file[$d.tmai]}")"
done
