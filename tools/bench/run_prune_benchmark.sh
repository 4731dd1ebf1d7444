#!/usr/bin/env bash
# What pruning buys in speed: the synthetic 110M-shape LLaMA (seed 1) in each
# of DTYPES, dense and with SPARSITY of the 4x4 blocks of every transformer
# matrix pruned (tinyai-prune --method magnitude: the weights are random, so
# only the bytes matter; then tinyai-quantize for the integer dtypes), run by
# tinyai-bench alternately dense / pruned, RUNS rounds, with 2 threads.
# Prints every run, the medians, and per dtype: the byte reduction (the
# bytes a decoded token reads, dense over pruned), decode and prompt speed
# pruned over dense, and decode speed-up over the byte reduction (the
# issue's aim: >= 0.8).
#   tools/bench/run_prune_benchmark.sh [BUILD_DIR]
# Environment: RUNS (default 5), THREADS (2), PROMPT (128), GEN (64),
# DTYPES (default "f32 q8_g32 q4nl_g32"), SPARSITY (0.5), BLOCK (4),
# SPEC (the 110M shape), CAP_MB: also run each model cold under a kernel-
# enforced limit of CAP_MB (../shared/tools/run-capped, tinyai-generate
# --stats) and print the bytes read from storage per position.
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build/release}
bin=$build/bin
for t in tinyai-bench tinyai-convert tinyai-prune tinyai-quantize tinyai-generate; do
  [[ -x "$bin/$t" ]] || { echo "$bin/$t not found: build first" >&2; exit 1; }
done
runs=${RUNS:-5}
threads=${THREADS:-2}
sparsity=${SPARSITY:-0.5}
block=${BLOCK:-4}
spec=${SPEC:-dim=768,hidden=2048,layers=12,heads=12,kv_heads=12,vocab=32000,seq_len=1024,seed=1}
read -ra dtypes <<< "${DTYPES:-f32 q8_g32 q4nl_g32}"
work=$build/bench-models
mkdir -p "$work"
tag=$(printf '%s' "$spec" | cksum | cut -d' ' -f1)
declare -A model precision=([f32]=fp32 [f16]=fp16 [q8_g32]=int8 [q4_g32]=int4-sym [q4nl_g32]=int4)
f32=$work/dtype-$tag-f32.tmai
[[ -f $f32 ]] || "$bin/tinyai-convert" --synthetic "$spec" "$f32" > /dev/null
pruned32=$work/pruned-$tag-$sparsity-$block-f32.tmai
[[ -f $pruned32 ]] || "$bin/tinyai-prune" --method magnitude --sparsity "$sparsity" --block "$block" --eval 0 --quiet \
  "$f32" "$pruned32" > /dev/null
for d in "${dtypes[@]}"; do
  model[$d/dense]=$work/dtype-$tag-$d.tmai
  model[$d/pruned]=$work/pruned-$tag-$sparsity-$block-$d.tmai
  if [[ $d != f32 ]]; then
    [[ -f ${model[$d/dense]} ]] || "$bin/tinyai-quantize" --all "${precision[$d]}" --eval 0 --quiet "$f32" \
      "${model[$d/dense]}" > /dev/null
    [[ -f ${model[$d/pruned]} ]] || "$bin/tinyai-quantize" --all "${precision[$d]}" --eval 0 --quiet "$pruned32" \
      "${model[$d/pruned]}" > /dev/null
  fi
done

field() { sed -n "s/.*\"$1\":\([0-9.]*\).*/\1/p"; }
median() { sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
median_of() { tr ' ' '\n' <<< "$1" | grep . | median; }
declare -A decode prompt bytes
echo "pruning benchmark: $spec, ${sparsity} of ${block}x${block} blocks, $threads threads, prompt ${PROMPT:-128}," \
     "gen ${GEN:-64}, $runs rounds, dense and pruned alternated"
for _ in $(seq "$runs"); do  # RUNS=0: the capped runs alone
  for d in "${dtypes[@]}"; do
    for k in dense pruned; do
      j=$("$bin/tinyai-bench" -m "${model[$d/$k]}" -t "$threads" --prompt "${PROMPT:-128}" --gen "${GEN:-64}" --json)
      dec=$(field decode_tokens_per_s <<< "$j")
      pp=$(field pp_tokens_per_s <<< "$j")
      b=$(field bytes_per_token <<< "$j")
      probe=$(field memory_read_gbps <<< "$j")
      echo "$d $k: decode $dec tokens/s, prompt $pp tokens/s, $b bytes a decoded token, probe $probe GB/s"
      decode[$d/$k]+="$dec "
      prompt[$d/$k]+="$pp "
      bytes[$d/$k]=$b
    done
  done
done
(( runs > 0 )) && echo
(( runs > 0 )) && echo "| dtype | bytes a token dense / pruned | byte reduction | decode dense / pruned (tokens/s) | decode speed-up | speed-up / byte reduction | prompt dense / pruned | prompt ratio |"
(( runs > 0 )) && echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
(( runs > 0 )) && for d in "${dtypes[@]}"; do
  awk -v d="$d" -v bd="${bytes[$d/dense]}" -v bp="${bytes[$d/pruned]}" -v dd="$(median_of "${decode[$d/dense]}")" \
      -v dp="$(median_of "${decode[$d/pruned]}")" -v pd="$(median_of "${prompt[$d/dense]}")" \
      -v pp="$(median_of "${prompt[$d/pruned]}")" \
      'BEGIN { r = bd / bp; s = dp / dd;
               printf "| %s | %.1f / %.1f MB | %.2fx | %.2f / %.2f | %.2fx | %.2f | %.1f / %.1f | %.2fx |\n",
                      d, bd / 1e6, bp / 1e6, r, dd, dp, s, s / r, pd, pp, pp / pd }'
done

if [[ -n "${CAP_MB:-}" ]]; then
  capped=../shared/tools/run-capped
  [[ -x $capped ]] || { echo "$capped not found" >&2; exit 1; }
  echo
  echo "cold, under a kernel-enforced limit of $CAP_MB MB (tinyai-generate -n 16 --mem-limit $((CAP_MB - 24))M --stats)," \
       "${CAP_RUNS:-3} rounds alternated:"
  for _ in $(seq "${CAP_RUNS:-3}"); do
    for d in "${dtypes[@]}"; do
      for k in dense pruned; do
        out=$("$capped" "$CAP_MB" --cold -- "$bin/tinyai-generate" -m "${model[$d/$k]}" -p "Once upon a time there was" \
              -n 16 -t "$threads" --context 256 --mem-limit "$((CAP_MB - 24))M" --stats 2>&1 >/dev/null || true)
        gen=$(sed -n 's/.* generated at \([0-9.]*\) tokens\/s.*/\1/p' <<< "$out")
        per=$(sed -n 's/.*(\([0-9.]*\) MiB per position).*/\1/p' <<< "$out")
        wall=$(sed -n 's/.*capped: rc=\([0-9]*\).*peak_rss=\([0-9]*MB\) wall=\([0-9.]*s\).*/rc \1, peak RSS \2, wall \3/p' <<< "$out")
        echo "$d $k: decode ${gen:-?} tokens/s, ${per:-?} MiB read from storage per position, $wall"
      done
    done
  done
fi
