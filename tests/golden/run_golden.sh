#!/bin/sh
# run_golden.sh GENERATE MODEL PROMPT_FILE THREADS [MODE INSPECT [EMULATOR]]: greedy
# generation of the prompt must reproduce PROMPT_FILE's .expected byte for
# byte, run by the forward scheduler in MODE:
#   normal      all weights resident (no limit)
#   memory_opt  weights streamed through a 1.1 MiB limit (stories260K holds 1.06 MiB of weights,
#               and 0.85 MiB beside them: KV cache, tables with the prompt's scratch, arena)
#   streaming   at exactly the least limit INSPECT reports: one token per pass
#   adaptive    1.1 MiB limit, the scheduler's own choice (MEMORY_OPT)
#   debug       normal, with no in-place reuse of activations
# EMULATOR (one argument, words separated by spaces, e.g. "qemu-arm -L
# /usr/arm-linux-gnueabihf") runs the cross-built GENERATE and INSPECT.
# Exit status: 0 identical, 1 failed, 77 skipped because MODEL (converted from
# ../shared) is absent; 1 then too when the environment sets
# TINYAI_REQUIRE_SHARED (to anything but 0).
gen=$1 model=$2 prompt=$3 threads=$4 mode=${5:-adaptive} inspect=$6 emu=${7:-}
expected=${prompt%.prompt}.expected
if [ ! -f "$model" ]; then
  case ${TINYAI_REQUIRE_SHARED:-0} in
    0) echo "skip: $model not found (../shared absent?); TINYAI_REQUIRE_SHARED=1 fails instead"; exit 77 ;;
    *) echo "TINYAI_REQUIRE_SHARED is set and $model is missing (converted from ../shared)"; exit 1 ;;
  esac
fi
out=$(mktemp) err=$(mktemp)
trap 'rm -f "$out" "$err"' EXIT
case $mode in
  normal) args="--mode normal"; want=NORMAL ;;
  memory_opt) args="--mode memory_opt --mem-limit 1.1M"; want=MEMORY_OPT ;;
  streaming)
    # shellcheck disable=SC2086
    least=$($emu "$inspect" "$model" --plan --json -t "$threads" | sed -n 's/.*"min_mem_limit_bytes":\([0-9]*\).*/\1/p')
    [ -n "$least" ] || { echo "tinyai-inspect reported no min_mem_limit_bytes"; exit 1; }
    args="--mode streaming --mem-limit $least"; want="STREAMING.* 1 row per pass" ;;
  adaptive) args="--mem-limit 1.1M"; want="MEMORY_OPT:" ;;
  debug) args="--mode normal --debug-exec"; want=NORMAL ;;
  *) echo "unknown mode $mode"; exit 2 ;;
esac
# shellcheck disable=SC2086
$emu "$gen" -m "$model" -p "$(cat "$prompt")" --steps 256 --temp 0 -t "$threads" $args > "$out" 2> "$err" || { cat "$err"; exit 1; }
if ! grep -q "$want" "$err"; then
  echo "the scheduler did not run in the expected mode ($want):"; cat "$err"; exit 1
fi
if cmp -s "$out" "$expected"; then
  echo "golden $(basename "$prompt" .prompt) [$mode, $threads threads]: identical ($(wc -c < "$expected") bytes); $(grep -o '[A-Z_]*:.*tokens per pass' "$err")"
  exit 0
fi
echo "MISMATCH for $(basename "$prompt") [$mode]:"
cmp "$out" "$expected"
echo "--- expected"; cat "$expected"; echo "--- got"; cat "$out"; cat "$err"
exit 1
