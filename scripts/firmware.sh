#!/usr/bin/env bash
# Builds the firmware of examples/firmware for a board with a model and a prompt, runs it under
# qemu-system-arm, and prints on stdout what it printed on its console UART: exactly what
#   TINYAI_KERNELS=ref tinyai-generate -m MODEL -p PROMPT --steps STEPS --temp 0 --quiet
# prints on the host. Its log UART (figures, errors) and this script's own lines go to stderr.
# Exits 0 when the firmware generated its text, non-zero otherwise (1: a TinyAI error the
# firmware printed; 2: a fault; 124: the timeout).
#   bash scripts/firmware.sh BOARD MODEL.tmai PROMPT STEPS
# BOARD: mps2-an386 (Cortex-M4), mps2-an500 (Cortex-M7), mps2-an505 (Cortex-M33),
# mps3-an547 (Cortex-M55). Environment:
#   TINYAI_HOST_BUILD      a host build of TinyAI's tools, for tinyai-arena (default build/release;
#                          built there when missing)
#   FIRMWARE_BUILD_DIR     the firmware's build tree (default build/firmware/BOARD)
#   FIRMWARE_TIMEOUT       seconds before the emulator is stopped (default 900)
#   FIRMWARE_ARENA_BYTES   the arena's bytes instead of tinyai-arena's figure (tests)
#   FIRMWARE_KERNELS       TINYAI_KERNELS on the device, e.g. ref (default: the core's best: Helium
#                          on a Cortex-M55, the DSP extension's products on the others)
#   FIRMWARE_IMAGE         a file linked instead of MODEL, the arena still measured on MODEL (tests)
#   FIRMWARE_FIGURES       a file to append one line of figures to (key=value)
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -ne 4 ]; then
  echo "usage: bash scripts/firmware.sh BOARD MODEL.tmai PROMPT STEPS" >&2
  echo "  BOARD: $(cd examples/firmware/boards && ls *.cmake | sed 's/\.cmake$//' | tr '\n' ' ')" >&2
  exit 2
fi
board=$1 model=$2 prompt=$3 steps=$4
[ -f "examples/firmware/boards/$board.cmake" ] || {
  echo "firmware: no board '$board' (examples/firmware/boards/*.cmake)" >&2; exit 2; }
[ -f "$model" ] || { echo "firmware: no model file '$model'" >&2; exit 2; }
[[ $steps =~ ^[0-9]+$ ]] || { echo "firmware: STEPS is '$steps', not a count of positions" >&2; exit 2; }
for tool in arm-none-eabi-gcc qemu-system-arm cmake ninja; do
  command -v $tool > /dev/null || { echo "firmware: $tool not found: run scripts/bootstrap.sh" >&2; exit 1; }
done
model=$(realpath "$model")
image=$(realpath "${FIRMWARE_IMAGE:-$model}")

# tinyai-arena from a host build, built there if it is missing.
host=${TINYAI_HOST_BUILD:-build/release}
arena_tool=$host/bin/tinyai-arena
if [ ! -x "$arena_tool" ]; then
  echo "firmware: building tinyai-arena in $host" >&2
  [ -f "$host/build.ninja" ] || cmake -S . -B "$host" -G Ninja -DCMAKE_BUILD_TYPE=Release > "$host.configure.log" 2>&1 \
    || { cat "$host.configure.log" >&2; exit 1; }
  cmake --build "$host" --target tinyai-arena >&2
fi
arena_tool=$(realpath "$arena_tool")

dir=${FIRMWARE_BUILD_DIR:-build/firmware/$board}
mkdir -p "$dir"
dir=$(realpath "$dir")
printf '%s' "$prompt" > "$dir/prompt.txt"
echo "firmware: configure and build $dir" >&2
cmake -S examples/firmware -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_TOOLCHAIN_FILE="$PWD/examples/firmware/cmake/arm-none-eabi.cmake" -DFIRMWARE_BOARD="$board" \
  -DFIRMWARE_MODEL="$model" -DFIRMWARE_IMAGE="$image" -DFIRMWARE_PROMPT_FILE="$dir/prompt.txt" \
  -DFIRMWARE_STEPS="$steps" -DFIRMWARE_ARENA_BYTES="${FIRMWARE_ARENA_BYTES:-0}" \
  -DFIRMWARE_KERNELS="${FIRMWARE_KERNELS:-}" -DTINYAI_ARENA="$arena_tool" \
  > "$dir/configure.log" 2>&1 || {
  # CMake's error, on one line.
  sed -n '/^CMake Error/,/^See also/p' "$dir/configure.log" | grep -v -e '^CMake Error' -e '^See also' |
    tr -s ' \n' ' ' | sed 's/^ */firmware: /; s/ *-- Configuring incomplete.*//; s/ *$//' >&2
  echo >&2; exit 1; }
grep '^-- firmware:' "$dir/configure.log" | sed 's/^-- //' >&2
cmake --build "$dir" --target firmware > "$dir/build.log" 2>&1 || {
  grep -E 'error|overflow|undefined' "$dir/build.log" >&2 || tail -20 "$dir/build.log" >&2; exit 1; }

machine=$(sed -n 's/^set(FIRMWARE_QEMU_MACHINE \(.*\))/\1/p' "examples/firmware/boards/$board.cmake")
rm -f "$dir/console.txt" "$dir/log.txt"
status=0
timeout "${FIRMWARE_TIMEOUT:-900}" qemu-system-arm -M "$machine" -nographic -monitor none \
  -semihosting-config enable=on,target=native -icount shift=0 \
  -serial file:"$dir/console.txt" -serial file:"$dir/log.txt" -kernel "$dir/firmware.elf" || status=$?
cat "$dir/console.txt"
cat "$dir/log.txt" >&2
case $status in
  0) ;;
  124) echo "firmware: $board: stopped after ${FIRMWARE_TIMEOUT:-900} s (FIRMWARE_TIMEOUT)" >&2 ;;
  *) echo "firmware: $board: the firmware stopped with status $status" >&2 ;;
esac

# Figures: flash (code, model) and RAM (data, arena) from the image's sections; the stack and
# the arena's high-water mark as the firmware measured them; instructions (QEMU -icount shift=0:
# one instruction a nanosecond of the board's clock).
size=$(arm-none-eabi-size -A "$dir/firmware.elf")
section() { awk -v s="$1" '$1 == s {print $2}' <<< "$size"; }
figure() { sed -n "s/^tinyai-firmware: $1 //p" "$dir/log.txt"; }
code=$(( $(section .vectors) + $(section .text) + $(section .rodata) + $(section .ARM.exidx || echo 0) + $(section .data) ))
data=$(( $(section .data) + $(section .bss) ))
per_token() { local n=$1 t=$2; [ -n "$n" ] && [ -n "$t" ] && [ "$n" -gt 0 ] && echo $(( t / n )) || echo -; }
line="board=$board model=$(basename "$model") kernels=${FIRMWARE_KERNELS:-best} steps=$steps status=$status code_bytes=$code model_bytes=$(section .model)"
line+=" data_bytes=$data arena_bytes=$(section .arena) arena_peak_bytes=$(figure arena_peak_bytes)"
line+=" stack_bytes=$(figure stack_bytes) stack_reserved=$(section .stack)"
line+=" prompt_tokens=$(figure prompt_tokens) prompt_insn_per_token=$(per_token "$(figure prompt_tokens)" "$(figure prompt_ns)")"
line+=" decode_tokens=$(figure decode_tokens) decode_insn_per_token=$(per_token "$(figure decode_tokens)" "$(figure decode_ns)")"
echo "firmware: $line" >&2
[ -n "${FIRMWARE_FIGURES:-}" ] && echo "$line" >> "$FIRMWARE_FIGURES"
exit $status
