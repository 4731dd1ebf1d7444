#!/usr/bin/env bash
# The main job: builds TinyAI and generates text from the default model in
# models/ (tinyai-fortunes.tmai, a small LLaMA trained on Debian's fortunes by
# models/recipe/; its card is models/tinyai-fortunes.md) under a memory cap,
# printing where the memory went.
#   bash scripts/demo.sh [PROMPT]
# It builds only tinyai-generate and tinyai-memplot: afterwards
# `cmake --install build/release --prefix DIR` installs the library, its
# headers and those two; `cmake --build build/release` builds every tool.
set -euo pipefail
cd "$(dirname "$0")/.."
# Only the packages the demo needs (scripts/bootstrap.sh --demo --print lists them).
bash scripts/bootstrap.sh --demo
# Configured as the full build is (scripts/test.sh and the README's third
# command build this tree with its tests); only the demo's tools are built.
cmake -S . -B build/release -G Ninja -DCMAKE_BUILD_TYPE=Release > /dev/null
cmake --build build/release -j "$(nproc)" --target tinyai-generate tinyai-memplot
prompt=${1:-A man}
cap_mb=${TINYAI_DEMO_CAP_MB:-32}
# TinyAI's own limit, below the model's 3.7 MB of weights: they stream through
# the weight cache while it writes.
limit=${TINYAI_DEMO_LIMIT:-2M}
cmd=(build/release/bin/tinyai-generate -m models/tinyai-fortunes.tmai -p "$prompt"
     -n 200 --temp 0.8 --seed "${TINYAI_DEMO_SEED:-3}" --mem-limit "$limit" --stats
     --memory-report build/demo-memory.json --memory-trace build/demo-memory.csv)
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
# Where the memory went, stage by stage and token by token, as a picture.
build/release/bin/tinyai-memplot build/demo-memory.csv -o build/demo-memory.svg \
  --title "scripts/demo.sh: tinyai-fortunes under --mem-limit $limit"
echo "demo: where the memory went: build/demo-memory.json, drawn in build/demo-memory.svg" >&2
