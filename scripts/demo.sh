#!/usr/bin/env bash
# The main job: builds TinyAI and generates text from the default model in
# models/ under a memory cap, printing where the memory went.
# Until our own trained model lands, the default model is a small synthetic
# (random-weight) LLaMA generated at build time, so its text is nonsense.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
cmake -S . -B build/release -G Ninja -DCMAKE_BUILD_TYPE=Release > /dev/null
cmake --build build/release -j "$(nproc)" --target tinyai-generate default_model
prompt=${1:-Once upon a time}
cap_mb=${TINYAI_DEMO_CAP_MB:-32}
limit=${TINYAI_DEMO_LIMIT:-4M}
cmd=(build/release/bin/tinyai-generate -m build/release/models/tinyai-default-synthetic.tmai -p "$prompt"
     -n 128 --temp 0.8 --seed 1 --mem-limit "$limit" --stats)
# The kernel enforces the cap (page cache included) where ../shared/tools/run-capped
# can make a cgroup; elsewhere the run is uncapped and the report still shows peak RSS.
capper=../shared/tools/run-capped
if [ -x "$capper" ] && "$capper" "$cap_mb" -- true 2>/dev/null; then
  echo "demo: running under a ${cap_mb} MB memory cap enforced by the kernel" >&2
  "$capper" "$cap_mb" -- "${cmd[@]}"
else
  echo "demo: no cgroup memory controller here; running without a kernel-enforced cap" >&2
  "${cmd[@]}"
fi
