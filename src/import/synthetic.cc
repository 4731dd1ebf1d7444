#include "import/synthetic.h"

#include <cmath>
#include <cstdio>
#include <string>
#include <unordered_set>
#include <vector>

#include "common/format.h"
#include "common/status.h"
#include "format/tmai_writer.h"

namespace tinyai {
namespace {

// A tokenizer for synthetic models: <unk> <s> </s>, the 256 byte-fallback
// pieces, then lowercase syllables (with and without a leading space) so
// generated text is printable.
void SyntheticTokenizer(int32_t vocab, uint64_t seed, std::vector<std::string>* pieces, std::vector<float>* scores) {
  pieces->clear();
  scores->clear();
  pieces->push_back("<unk>");
  pieces->push_back("\n<s>\n");
  pieces->push_back("\n</s>\n");
  for (int b = 0; b < 256; ++b) {
    char buf[8];
    tinyai::Format(buf, sizeof buf, "<0x%02X>", b);
    pieces->push_back(buf);
  }
  for (size_t i = 0; i < pieces->size(); ++i) scores->push_back(0.0f);
  pieces->push_back(" ");  // the dummy prefix, as SentencePiece vocabularies have it
  scores->push_back(0.0f);
  // The letters the syllables are made of, as single pieces (a trained
  // vocabulary has every character of its pieces as one): without them a
  // letter would be a byte-fallback token, which never merges, and
  // SentencePiece (which merges characters before falling back to bytes)
  // would encode the vocabulary's text differently.
  for (char c = 'a'; c <= 'z' && static_cast<int32_t>(pieces->size()) < vocab; ++c) {
    pieces->push_back(std::string(1, c));
    scores->push_back(0.0f);
  }
  static const char* kOnsets[] = {"b", "c", "d", "f", "g", "h", "l", "m", "n", "p", "r", "s", "t", "w", "th", "st"};
  static const char* kVowels[] = {"a", "e", "i", "o", "u", "ay", "ee", "oo"};
  static const char* kCodas[] = {"", "n", "t", "s", "r", "ng", "ll", "d"};
  uint64_t rng = seed ^ 0x5EEDull;
  // Pieces so far, for the duplicate test: a hash set keeps the whole
  // vocabulary linear (a scan of every earlier piece made it quadratic).
  std::unordered_set<std::string> seen(pieces->begin(), pieces->end());
  pieces->reserve(static_cast<size_t>(vocab));
  scores->reserve(static_cast<size_t>(vocab));
  int32_t rank = 0;
  while (static_cast<int32_t>(pieces->size()) < vocab) {
    std::string syl = std::string(kOnsets[SplitMix64(&rng) % 16]) + kVowels[SplitMix64(&rng) % 8] +
                      kCodas[SplitMix64(&rng) % 8];
    std::string piece = (rank % 2 == 0 ? " " : "") + syl;
    ++rank;
    if (seen.count(piece)) {
      // Keep every piece unique: syllables hold no digits, so the rank
      // suffix makes it a piece no other has.
      piece += std::to_string(rank);
    }
    seen.insert(piece);
    pieces->push_back(piece);
    scores->push_back(-static_cast<float>(rank));
  }
}

}  // namespace

TinyAIStatus ParseSyntheticSpec(const std::string& spec, LlamaShape* out) {
  LlamaShape s;
  s.kv_heads = -1;
  std::unordered_set<std::string> seen;
  size_t pos = 0;
  while (pos <= spec.size()) {
    size_t comma = spec.find(',', pos);
    if (comma == std::string::npos) comma = spec.size();
    std::string item = spec.substr(pos, comma - pos);
    pos = comma + 1;
    if (item.empty()) continue;
    size_t eq = item.find('=');
    if (eq == std::string::npos) return SetError(TINYAI_ERR_INVALID_ARGUMENT, "spec item '%s' has no '='", item.c_str());
    std::string key = item.substr(0, eq), value = item.substr(eq + 1);
    static const char* kKeys[] = {"dim", "hidden", "layers", "heads", "kv_heads", "vocab", "seq_len", "seed", "shared"};
    bool known = false;
    for (const char* k : kKeys) known = known || key == k;
    if (!known) {
      return SetError(TINYAI_ERR_INVALID_ARGUMENT,
                      "unknown spec key '%s' (dim, hidden, layers, heads, kv_heads, vocab, seq_len, seed, shared)",
                      key.c_str());
    }
    if (!seen.insert(key).second) return SetError(TINYAI_ERR_INVALID_ARGUMENT, "spec key '%s' is given twice", key.c_str());
    // Digits only; every key but seed is an int32 (the limits are checked
    // by CheckShape, naming the field), shared is 0 or 1.
    const uint64_t max = key == "seed" ? UINT64_MAX : key == "shared" ? 1 : static_cast<uint64_t>(INT32_MAX);
    uint64_t v = 0;
    if (!ParseDecimal(value, max, &v)) {
      return SetError(TINYAI_ERR_INVALID_ARGUMENT, "spec value '%s' for '%s' is not a number in 0..%llu",
                      value.c_str(), key.c_str(), static_cast<unsigned long long>(max));
    }
    int32_t iv = static_cast<int32_t>(v);
    if (key == "dim") s.dim = iv;
    else if (key == "hidden") s.hidden_dim = iv;
    else if (key == "layers") s.layers = iv;
    else if (key == "heads") s.heads = iv;
    else if (key == "kv_heads") s.kv_heads = iv;
    else if (key == "vocab") s.vocab_size = iv;
    else if (key == "seq_len") s.seq_len = iv;
    else if (key == "seed") s.seed = v;
    else s.shared_classifier = v != 0;
  }
  if (s.kv_heads < 0) s.kv_heads = s.heads;
  TINYAI_RETURN_IF_ERROR(CheckShape(s, true));
  *out = s;
  return TINYAI_OK;
}

TinyAIStatus WriteSyntheticModel(const LlamaShape& s, const char* outPath, const WriteOptions& options,
                                 TmaiWriteStats* stats) {
  TINYAI_RETURN_IF_ERROR(CheckShape(s, true));
  TINYAI_RETURN_IF_ERROR(CheckWriteOptions(options));
  TmaiWriter w;
  UseRowEncoder(&w, options);
  w.SetCompression(options.codec, options.level);
  AddLlamaMetadata(&w, s, llama_key::kArchitecture, "synthetic", "synthetic", nullptr);
  w.AddMetaInt("general.seed", static_cast<int64_t>(s.seed));
  std::vector<std::string> pieces;
  std::vector<float> scores;
  SyntheticTokenizer(s.vocab_size, s.seed, &pieces, &scores);
  TINYAI_RETURN_IF_ERROR(CheckTokenizerPieces(pieces, scores));
  AddTokenizerMetadata(&w, pieces, scores);
  DeclareLlamaTensors(&w, s, nullptr, options.matrix_dtype);
  TINYAI_RETURN_IF_ERROR(w.Open(outPath));

  uint64_t rng = s.seed;
  const uint64_t dim = static_cast<uint64_t>(s.dim), hidden = static_cast<uint64_t>(s.hidden_dim);
  const uint64_t kv_dim = dim * static_cast<uint64_t>(s.kv_heads) / static_cast<uint64_t>(s.heads);
  const uint64_t vocab = static_cast<uint64_t>(s.vocab_size);
  auto fan_in = [](uint64_t cols) { return std::sqrt(3.0f / static_cast<float>(cols)); };
  TINYAI_RETURN_IF_ERROR(WriteRandom(&w, vocab * dim, 1.0f, 0.0f, &rng));  // embedding rows ~ unit variance / 3
  for (int32_t l = 0; l < s.layers; ++l) {
    TINYAI_RETURN_IF_ERROR(WriteRandom(&w, dim, 0.0f, 1.0f, &rng));
    TINYAI_RETURN_IF_ERROR(WriteRandom(&w, dim * dim, fan_in(dim), 0.0f, &rng));
    TINYAI_RETURN_IF_ERROR(WriteRandom(&w, kv_dim * dim, fan_in(dim), 0.0f, &rng));
    TINYAI_RETURN_IF_ERROR(WriteRandom(&w, kv_dim * dim, fan_in(dim), 0.0f, &rng));
    TINYAI_RETURN_IF_ERROR(WriteRandom(&w, dim * dim, fan_in(dim), 0.0f, &rng));
    TINYAI_RETURN_IF_ERROR(WriteRandom(&w, dim, 0.0f, 1.0f, &rng));
    TINYAI_RETURN_IF_ERROR(WriteRandom(&w, hidden * dim, fan_in(dim), 0.0f, &rng));
    TINYAI_RETURN_IF_ERROR(WriteRandom(&w, hidden * dim, fan_in(dim), 0.0f, &rng));
    TINYAI_RETURN_IF_ERROR(WriteRandom(&w, dim * hidden, fan_in(hidden), 0.0f, &rng));
  }
  TINYAI_RETURN_IF_ERROR(WriteRandom(&w, dim, 0.0f, 1.0f, &rng));
  if (!s.shared_classifier) TINYAI_RETURN_IF_ERROR(WriteRandom(&w, vocab * dim, fan_in(dim), 0.0f, &rng));
  TINYAI_RETURN_IF_ERROR(w.Finish());
  if (stats) *stats = w.stats();
  return TINYAI_OK;
}

}  // namespace tinyai
