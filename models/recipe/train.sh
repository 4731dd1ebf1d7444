#!/usr/bin/env bash
# Trains TinyAI's default model from scratch and writes models/tinyai-fortunes.tmai.
#   bash models/recipe/train.sh [extra train.py options]
# Installs what it needs (Debian's python3-torch, python3-sentencepiece,
# OpenBLAS and the fortunes corpus), builds tinyai-convert, trains
# (models/recipe/train.py; about 30 minutes on 2 cores), converts, and checks
# that TinyAI computes what torch trained. Work files go to build/recipe/.
set -euo pipefail
cd "$(dirname "$0")/../.."
bash scripts/bootstrap.sh --recipe
cmake -S . -B build/release -G Ninja -DCMAKE_BUILD_TYPE=Release > /dev/null
cmake --build build/release -j "$(nproc)" --target tinyai-convert tinyai-generate recipe_parity
work=build/recipe
rm -rf "$work"
# Debian's interpreter: torch and sentencepiece are its packages.
/usr/bin/python3 models/recipe/train.py "$work" "$@"
build/release/bin/tinyai-convert --from llama2c --name tinyai-fortunes --tokenizer "$work/tok.bin" \
  "$work/model.bin" models/tinyai-fortunes.tmai
# TinyAI's logits and token ids against torch's and SentencePiece's, then its
# greedy text against torch's, and samples for the model card.
build/release/tests/recipe_parity models/tinyai-fortunes.tmai "$work/reference.bin"
/usr/bin/python3 models/recipe/check.py "$work/metrics.json" models/tinyai-fortunes.tmai build/release/bin/tinyai-generate
