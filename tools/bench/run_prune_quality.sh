#!/usr/bin/env bash
# What pruning costs in quality: each model pruned at each sparsity by each
# method (tinyai-prune, blocks of BLOCK), its kept values then quantized to
# int8 and int4 (tinyai-quantize, every matrix but the embedding), each
# compared with the dense fp32 model by tinyai-eval over TOKENS positions
# (mean KL and top-1 agreement). Prints one Markdown table per model and
# block size (docs/benchmarks.md, "What pruning costs in quality").
#   tools/bench/run_prune_quality.sh [BUILD_DIR] MODEL.tmai...
# Environment: TOKENS (default 2048), SPARSITIES (default "0.25 0.5 0.7"),
# METHODS (default "magnitude activation sparsegpt"), BLOCKS (default "4"),
# DTYPES (default "f32 int8 int4"), CALIBRATE (positions, default 2048),
# CALIBRATION_TEXT (a file; default: a stream each model samples itself).
set -euo pipefail
cd "$(dirname "$0")/../.."
build=build/release
if [[ $# -gt 0 && -d "$1" ]]; then
  build=$1
  shift
fi
bin=$build/bin
[[ $# -gt 0 ]] || { echo "usage: $0 [BUILD_DIR] MODEL.tmai..." >&2; exit 2; }
for t in tinyai-prune tinyai-quantize tinyai-eval; do
  [[ -x "$bin/$t" ]] || { echo "$bin/$t not found: build first" >&2; exit 1; }
done
tokens=${TOKENS:-2048}
read -ra sparsities <<< "${SPARSITIES:-0.25 0.5 0.7}"
read -ra methods <<< "${METHODS:-magnitude activation sparsegpt}"
read -ra blocks <<< "${BLOCKS:-4}"
read -ra dtypes <<< "${DTYPES:-f32 int8 int4}"
calibrate=${CALIBRATE:-2048}
text=()
[[ -n "${CALIBRATION_TEXT:-}" ]] && text=(--calibration-text "$CALIBRATION_TEXT")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

eval_json() {  # REF MODEL -> "mean_kld top1"
  "$bin/tinyai-eval" --ref "$1" "$2" --tokens "$tokens" --json |
    sed -E 's/.*"mean_kld": *([^,]*),.*"top1": *([^,}]*).*/\1 \2/'
}

# One table row: LABEL, then M (as is and quantized to each dtype) against
# the dense fp32 REF.
table_row() {  # LABEL REF M
  local row=$1 d m
  for d in "${dtypes[@]}"; do
    m=$3
    if [[ $d != f32 ]]; then
      m=$work/q-$d.tmai
      "$bin/tinyai-quantize" --all "$d" --embedding keep --output keep --eval 0 --quiet "$3" "$m" >/dev/null
    fi
    read -r kl top <<< "$(eval_json "$2" "$m")"
    row+=" $kl | $top |"
  done
  echo "$row"
}

for model in "$@"; do
  name=$(basename "$model" .tmai)
  for block in "${blocks[@]}"; do
    echo
    echo "$name, ${block}x${block} blocks, $tokens positions (mean KL / top-1 against the dense fp32 model):"
    echo
    header="| method | sparsity |"
    rule="| --- | ---: |"
    for d in "${dtypes[@]}"; do
      header+=" $d KL | $d top-1 |"
      rule+=" ---: | ---: |"
    done
    echo "$header"
    echo "$rule"
    # The dense model at each dtype: what quantization alone costs.
    table_row "| dense | 0 |" "$model" "$model"
    for method in "${methods[@]}"; do
      for s in "${sparsities[@]}"; do
        pruned=$work/p.tmai
        "$bin/tinyai-prune" --sparsity "$s" --block "$block" --method "$method" --calibrate "$calibrate" \
          "${text[@]}" --eval 0 --quiet "$model" "$pruned" >/dev/null
        table_row "| $method | $s |" "$model" "$pruned"
      done
    done
  done
done
