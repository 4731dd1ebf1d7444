#!/usr/bin/env bash
# The firmware's CI stage (scripts/test.sh): on every board of examples/firmware, greedy text from
# stories260K (f32 and int8) and the default model (int8, and the default int4 mix) must equal,
# byte for byte, what the host's reference kernels generate from the same file and prompt
# (scripts/firmware.sh against TINYAI_KERNELS=ref tinyai-generate); and bad input on the device -
# a corrupt image, an arena too small - must end in a TinyAI status printed on the log UART and a
# clean stop (exit 1), never a fault; a model larger than the flash fails the build. Figures (flash, RAM, stack, instructions per token) go to
# build/firmware/figures.txt. Needs a host build (TINYAI_HOST_BUILD, default build/release) with
# its test data (stories260K converted from ../shared).
set -euo pipefail
cd "$(dirname "$0")/.."
host=${TINYAI_HOST_BUILD:-build/release}
export TINYAI_HOST_BUILD=$host
stories=$host/testdata/stories260K.tmai
[ -f "$stories" ] || { echo "firmware-test: $stories missing: build and test $host first (scripts/test.sh)" >&2; exit 1; }
out=build/firmware
mkdir -p "$out/models"
figures=$out/figures.txt
: > "$figures"
export FIRMWARE_FIGURES=$PWD/$figures
quantize() { [ -f "$3" ] || "$host/bin/tinyai-quantize" --quiet $1 "$2" "$3" > /dev/null; }
quantize "--all int8" "$stories" "$out/models/stories260K-int8.tmai"
quantize "--all int8" models/tinyai-fortunes.tmai "$out/models/tinyai-fortunes-int8.tmai"
quantize "" models/tinyai-fortunes.tmai "$out/models/tinyai-fortunes-mix.tmai"  # int4 layers, int8 embedding

failures=0
check() {  # board model prompt steps
  local status=0
  TINYAI_KERNELS=ref "$host/bin/tinyai-generate" -m "$2" -p "$3" --steps "$4" --temp 0 --quiet > "$out/host.txt"
  bash scripts/firmware.sh "$1" "$2" "$3" "$4" > "$out/device.txt" 2> "$out/last.log" || status=$?
  if [ $status -ne 0 ] || ! cmp -s "$out/host.txt" "$out/device.txt"; then
    echo "FAIL $1 $(basename "$2"): exit $status; the host printed:"; cat "$out/host.txt"
    echo "the firmware printed:"; cat "$out/device.txt"; cat "$out/last.log"
    failures=$((failures + 1))
  else
    echo "ok   $1 $(basename "$2"): $(grep -o 'decode_insn_per_token=[0-9-]*' "$out/last.log")"
  fi
}
for board in mps2-an386 mps2-an500 mps2-an505 mps3-an547; do
  check $board "$stories" "Once upon a time" 64
  check $board "$out/models/stories260K-int8.tmai" "Once upon a time" 64
  check $board "$out/models/tinyai-fortunes-int8.tmai" "Love is" 64
  check $board "$out/models/tinyai-fortunes-mix.tmai" "Love is" 64
done

# Bad input on the device: the status on the log UART, exit 1, no fault.
expect_status() {  # name, status expected in the log, then FIRMWARE_* settings
  local name=$1 want=$2 status=0
  shift 2
  env "$@" FIRMWARE_FIGURES= bash scripts/firmware.sh mps2-an500 "$stories" "Once upon a time" 16 \
    > /dev/null 2> "$out/last.log" || status=$?
  if [ $status -eq 1 ] && grep -q "^tinyai-firmware: .*$want" "$out/last.log" && ! grep -q "fault" "$out/last.log"; then
    echo "ok   $name: $(grep -m1 "$want" "$out/last.log" | cut -c1-160)"
  else
    echo "FAIL $name: exit $status (want 1 and $want on the log UART, no fault)"; cat "$out/last.log"
    failures=$((failures + 1))
  fi
}
corrupt() {  # file offset out: a copy with one byte flipped
  cp "$1" "$3"
  printf "$(printf '\\x%02x' $(( $(od -An -tu1 -j "$2" -N1 "$1") ^ 0xff )))" |
    dd of="$3" bs=1 seek="$2" conv=notrunc status=none
}
size=$(stat -c %s "$stories")
corrupt "$stories" 0 "$out/models/corrupt-magic.tmai"
corrupt "$stories" $((size / 2)) "$out/models/corrupt-weights.tmai"
d=$PWD/$out/bad
expect_status "corrupt magic" TINYAI_ERR_BAD_MAGIC FIRMWARE_BUILD_DIR=$d FIRMWARE_IMAGE=$PWD/$out/models/corrupt-magic.tmai
expect_status "corrupt weights" TINYAI_ERR_CHECKSUM FIRMWARE_BUILD_DIR=$d FIRMWARE_IMAGE=$PWD/$out/models/corrupt-weights.tmai
expect_status "arena too small" TINYAI_ERR_OUT_OF_MEMORY FIRMWARE_BUILD_DIR=$d FIRMWARE_ARENA_BYTES=65536
# A model the board's flash cannot hold fails the build, with the sizes and what to do.
status=0
FIRMWARE_BUILD_DIR=$d bash scripts/firmware.sh mps2-an500 models/tinyai-fortunes.tmai "Love is" 16 \
  > /dev/null 2> "$out/last.log" || status=$?
if [ $status -ne 0 ] && grep -q "is 3707392 bytes; mps2-an500's flash holds 4194304 bytes.*quantize it" "$out/last.log"; then
  echo "ok   model larger than the flash: $(grep -m1 'flash holds' "$out/last.log" | sed 's/^ *//' | cut -c1-150)"
else
  echo "FAIL model larger than the flash: exit $status (want a failed build naming the sizes)"; cat "$out/last.log"
  failures=$((failures + 1))
fi
echo "=== firmware figures ($figures)"
cat "$figures"
[ $failures -eq 0 ] || { echo "firmware-test: $failures failed"; exit 1; }
