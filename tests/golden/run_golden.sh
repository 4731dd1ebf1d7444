#!/bin/sh
# run_golden.sh GENERATE MODEL PROMPT_FILE THREADS: greedy generation of the
# prompt must reproduce PROMPT_FILE's .expected byte for byte.
gen=$1 model=$2 prompt=$3 threads=$4
expected=${prompt%.prompt}.expected
if [ ! -f "$model" ]; then echo "skip: $model not found (../shared absent?)"; exit 77; fi
out=$(mktemp)
trap 'rm -f "$out"' EXIT
"$gen" -m "$model" -p "$(cat "$prompt")" -n 256 --temp 0 -t "$threads" --quiet > "$out" || exit 1
if cmp -s "$out" "$expected"; then
  echo "golden $(basename "$prompt" .prompt): identical ($(wc -c < "$expected") bytes)"
  exit 0
fi
echo "MISMATCH for $(basename "$prompt"):"
cmp "$out" "$expected"
echo "--- expected"; cat "$expected"; echo "--- got"; cat "$out"
exit 1
