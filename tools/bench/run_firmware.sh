#!/usr/bin/env bash
# The firmware's figures (examples/firmware, scripts/firmware.sh): on every board, each model with
# the core's own kernels (Helium on the Cortex-M55, the DSP extension's products on the M4, M7 and
# M33) and with the reference kernels (FIRMWARE_KERNELS=ref), the same text either way; prints a
# markdown table of flash (code, model), RAM (data and bss, the arena reserved and its high-water
# mark, the stack measured by painting it) and instructions per token under QEMU's -icount
# shift=0 (prompt and decode), and the reference's decode instructions over the kernels' own.
#   tools/bench/run_firmware.sh PROMPT STEPS MODEL...
# Environment: BOARDS (default: all four), TINYAI_HOST_BUILD (default build/release).
set -euo pipefail
cd "$(dirname "$0")/../.."
(($# > 2)) || { echo "usage: $0 PROMPT STEPS MODEL..." >&2; exit 2; }
prompt=$1 steps=$2
shift 2
read -ra boards <<< "${BOARDS:-mps2-an386 mps2-an500 mps2-an505 mps3-an547}"
figures=$(mktemp)
trap 'rm -f "$figures" "$figures".*' EXIT
for board in "${boards[@]}"; do
  for m in "$@"; do
    for kernels in best ref; do
      k=$kernels
      [ "$k" = best ] && k=
      FIRMWARE_KERNELS=$k FIRMWARE_FIGURES=$figures bash scripts/firmware.sh "$board" "$m" "$prompt" "$steps" \
        > "$figures.$kernels" 2> /dev/null || { echo "$board $m ($kernels) failed" >&2; exit 1; }
    done
    cmp -s "$figures.best" "$figures.ref" || { echo "$board $m: the kernels' text differs from the reference's" >&2; exit 1; }
  done
done
field() { sed -n "s/.*\b$1=\([^ ]*\).*/\1/p" <<< "$2"; }
echo "| board | model | kernels | code (flash) | model (flash) | data + bss | arena reserved / used | stack used | prompt insn/token | decode insn/token | ref / kernels |"
echo "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
ref_decode=
while read -r line; do
  kernels=$(field kernels "$line")
  decode=$(field decode_insn_per_token "$line")
  ratio=
  if [ "$kernels" = best ]; then best_decode=$decode; else ratio=$(awk -v r="$decode" -v b="$best_decode" 'BEGIN{printf "%.2fx", r / b}'); fi
  printf '| %s | %s | %s | %s | %s | %s | %s / %s | %s | %s | %s | %s |\n' "$(field board "$line")" \
    "$(field model "$line")" "$kernels" "$(field code_bytes "$line")" "$(field model_bytes "$line")" \
    "$(field data_bytes "$line")" "$(field arena_bytes "$line")" "$(field arena_peak_bytes "$line")" \
    "$(field stack_bytes "$line")" "$(field prompt_insn_per_token "$line")" "$decode" "$ratio"
done < "$figures"
