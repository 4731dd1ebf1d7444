#!/usr/bin/python3
"""Checks a converted default model against the torch model it came from.

  check.py METRICS.json MODEL.tmai TINYAI_GENERATE

train.py records torch's greedy continuation of a few prompts (token ids) in
METRICS.json; this runs tinyai-generate greedily on the same prompts and fails
unless TinyAI writes the same text. Then it prints sampled text (temperature
0.8, fixed seeds) for the model card.
"""

import json
import os
import subprocess
import sys

import sentencepiece as spm


def generate(tool, model, prompt, steps, extra=()):
    out = subprocess.run([tool, "-m", model, "-p", prompt, "--steps", str(steps), "--quiet", *extra],
                         check=True, capture_output=True)
    return out.stdout.decode("utf-8", errors="replace").rstrip("\n")


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    metrics_path, model, tool = sys.argv[1:]
    with open(metrics_path) as f:
        metrics = json.load(f)
    sp = spm.SentencePieceProcessor(model_file=os.path.join(os.path.dirname(metrics_path), "tok.model"))
    failures = 0
    for sample in metrics["torch_greedy"]:
        if not sample["prompt"]:
            continue
        ids = sample["greedy_ids"]
        want = sp.decode(ids[1:])  # after BOS
        got = generate(tool, model, sample["prompt"], sample["steps"], ["--temp", "0"])
        same = got == want
        failures += not same
        print(f"greedy {sample['prompt']!r}: {'same text' if same else 'DIFFERENT'} as torch ({len(ids)} positions)")
        if not same:
            print(f"  torch:  {want!r}\n  tinyai: {got!r}")
    print("\nsamples (temperature 0.8, top-p 0.9, 128 positions):")
    for prompt, seed in (("The", 1), ("A man", 2), ("Love", 3), ("Computers", 4)):
        text = generate(tool, model, prompt, 128, ["--temp", "0.8", "--seed", str(seed)])
        print(f"\n--seed {seed} -p {prompt!r}:\n{text}")
    if failures:
        sys.exit(f"check: {failures} greedy continuation(s) differ between torch and TinyAI")


if __name__ == "__main__":
    main()
