#!/usr/bin/env bash
# What a context past a model's seq_len costs (docs/tools.md, "-c past seq_len"):
# builds tools/bench/long_context_nll.c against BUILD_DIR's libtinyai.a and runs
# it on each MODEL=CONTEXT pair.
#   bash tools/bench/run_long_context.sh build/release [MODEL=CONTEXT ...]
# Default: stories260K (converted by the tests into BUILD_DIR) at 2048 and the
# default model at 1024.
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build/release}
shift || true
pairs=("$@")
[ ${#pairs[@]} -gt 0 ] || pairs=("$build/testdata/stories260K.tmai=2048" "models/tinyai-fortunes.tmai=1024")
bin=$(mktemp -d)/long_context_nll
cc -O2 -Wall -Wextra -Iinclude tools/bench/long_context_nll.c "$build/libtinyai.a" -lstdc++ -lzstd -lm -lpthread -o "$bin"
for pair in "${pairs[@]}"; do
  echo "== ${pair%=*} at ${pair#*=} positions"
  "$bin" "${pair%=*}" "${pair#*=}"
done
