#!/usr/bin/env bash
# recipe_smoke.sh PYTHON SOURCE_DIR CONVERT PARITY WORK_DIR
# The default model's recipe (models/recipe/) end to end at toy size: trains a
# 2-layer model on two fortune files for 30 steps, twice, and requires the
# same bytes both times (the recipe is deterministic given its seed); converts
# it with tinyai-convert; and requires TinyAI's logits and tokenizer to agree
# with torch's and SentencePiece's (recipe_parity). Skips (77) without
# Debian's python3-torch, python3-sentencepiece or fortunes.
set -euo pipefail
python=$1 src=$2 convert=$3 parity=$4 work=$5
if ! "$python" -c "import torch, sentencepiece" 2> /dev/null; then
  echo "skip: $python cannot import torch and sentencepiece (bash scripts/bootstrap.sh --recipe)"
  exit 77
fi
corpus=${TINYAI_CORPUS_DIR:-/usr/share/games/fortunes}
if [ ! -r "$corpus/fortunes" ] || [ ! -r "$corpus/riddles" ]; then
  echo "skip: the fortunes corpus is not in $corpus"
  exit 77
fi
rm -rf "$work"
mkdir -p "$work"
printf 'fortunes\nriddles\n' > "$work/corpus.list"
for run in a b; do
  "$python" "$src/models/recipe/train.py" "$work/$run" --corpus-dir "$corpus" --corpus-list "$work/corpus.list" \
    --vocab 512 --dim 32 --hidden 64 --layers 2 --heads 4 --kv-heads 2 --seq-len 64 --batch 4 --steps 30 \
    --eval-every 10 --warmup 5
done
for f in tok.bin model.bin reference.bin; do
  cmp "$work/a/$f" "$work/b/$f" || { echo "FAIL: two runs with the same seed wrote different $f"; exit 1; }
done
echo "two runs with the same seed: identical tokenizer, weights and reference"
"$convert" --from llama2c --name recipe-smoke --tokenizer "$work/a/tok.bin" "$work/a/model.bin" "$work/model.tmai"
"$parity" "$work/model.tmai" "$work/a/reference.bin"
