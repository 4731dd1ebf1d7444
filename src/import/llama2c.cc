#include "import/llama2c.h"

#include <cstring>
#include <string>
#include <vector>

#include "common/checked_math.h"
#include "common/status.h"
#include "format/limits.h"
#include "format/tmai_writer.h"
#include "import/llama2c_tokenizer.h"
#include "port/port.h"

namespace tinyai {

TinyAIStatus ConvertLlama2c(const char* checkpointPath, const char* tokenizerPath, const char* outPath,
                            LlamaHyperParams* paramsOut, const WriteOptions& options, TmaiWriteStats* stats) {
  TINYAI_RETURN_IF_ERROR(CheckWriteOptions(options));
  // Writing over an input would truncate the mapped checkpoint under the
  // reader (SIGBUS) and destroy it: refuse before anything is written.
  const char* inputs[] = {checkpointPath, tokenizerPath};
  const char* what[] = {"checkpoint", "tokenizer"};
  for (int i = 0; i < 2; ++i) {
    if (SameFile(outPath, inputs[i])) {
      return SetError(TINYAI_ERR_INVALID_ARGUMENT, "the output '%s' is the %s '%s' (the same file); refusing to overwrite an input",
                      outPath, what[i], inputs[i]);
    }
  }
  port::MappedFile ckpt;
  TINYAI_RETURN_IF_ERROR(port::MapFile(checkpointPath, &ckpt));
  struct Unmap {
    port::MappedFile* f;
    ~Unmap() { port::UnmapFile(f); }
  } unmap_ckpt{&ckpt};
  if (ckpt.size < 7 * sizeof(int32_t)) {
    return SetError(TINYAI_ERR_TRUNCATED, "'%s': %llu bytes cannot hold a llama2.c header", checkpointPath,
                    static_cast<unsigned long long>(ckpt.size));
  }
  int32_t h[7];
  std::memcpy(h, ckpt.data, sizeof h);
  LlamaHyperParams s;
  s.dim = h[0];
  s.hidden_dim = h[1];
  s.layers = h[2];
  s.heads = h[3];
  s.kv_heads = h[4];
  s.shared_classifier = h[5] > 0;
  s.vocab_size = h[5] > 0 ? h[5] : (h[5] == INT32_MIN ? 0 : -h[5]);
  s.seq_len = h[6];
  const TinyAIStatus shape_status = CheckShape(s, false);
  if (shape_status == TINYAI_ERR_UNSUPPORTED) {
    // A llama2.c shape, beyond what the runtime runs (format/limits.h).
    return AddErrorContext(shape_status, "'%s': ", checkpointPath);
  }
  if (shape_status != TINYAI_OK) {
    return AddErrorContext(TINYAI_ERR_BAD_FORMAT, "'%s': not a llama2.c checkpoint: ", checkpointPath);
  }
  const uint64_t dim = static_cast<uint64_t>(s.dim), hidden = static_cast<uint64_t>(s.hidden_dim);
  const uint64_t L = static_cast<uint64_t>(s.layers), vocab = static_cast<uint64_t>(s.vocab_size);
  const uint64_t kv_dim = dim * static_cast<uint64_t>(s.kv_heads) / static_cast<uint64_t>(s.heads);
  const uint64_t head_size = dim / static_cast<uint64_t>(s.heads);
  // Float offsets of each stacked tensor after the 28-byte header, computed
  // with overflow checks: the header is untrusted.
  bool overflow = false;
  uint64_t cursor = 0;
  auto next = [&](uint64_t a, uint64_t b, uint64_t c) {
    uint64_t at = cursor, n = 0;
    if (!CheckedMul(a, b, &n) || !CheckedMul(n, c, &n) || !CheckedAdd(cursor, n, &cursor)) overflow = true;
    return at;
  };
  const uint64_t o_emb = next(vocab, dim, 1), o_rms_att = next(L, dim, 1), o_wq = next(L, dim, dim);
  const uint64_t o_wk = next(L, kv_dim, dim), o_wv = next(L, kv_dim, dim), o_wo = next(L, dim, dim);
  const uint64_t o_rms_ffn = next(L, dim, 1), o_w1 = next(L, hidden, dim), o_w2 = next(L, dim, hidden);
  const uint64_t o_w3 = next(L, hidden, dim), o_rms_final = next(dim, 1, 1);
  next(static_cast<uint64_t>(s.seq_len), head_size, 1);  // legacy freq_cis real and imag halves
  const uint64_t o_cls = s.shared_classifier ? 0 : next(vocab, dim, 1);
  uint64_t expected = 0;
  if (overflow || !CheckedMul(cursor, 4, &expected) || !CheckedAdd(expected, 28, &expected)) {
    return SetError(TINYAI_ERR_OVERFLOW, "'%s': the header's shape (dim %d, hidden %d, layers %d) overflows 64-bit sizes",
                    checkpointPath, s.dim, s.hidden_dim, s.layers);
  }
  if (ckpt.size != expected) {
    return SetError(ckpt.size < expected ? TINYAI_ERR_TRUNCATED : TINYAI_ERR_BAD_FORMAT,
                    "'%s': a llama2.c checkpoint of this shape has %llu bytes, the file %llu", checkpointPath,
                    static_cast<unsigned long long>(expected), static_cast<unsigned long long>(ckpt.size));
  }
  const float* f = reinterpret_cast<const float*>(ckpt.data + 28);

  port::MappedFile tokfile;
  TINYAI_RETURN_IF_ERROR(port::MapFile(tokenizerPath, &tokfile));
  Unmap unmap_tok{&tokfile};
  Llama2cVocab vocab_data;
  TinyAIStatus ts = ParseLlama2cTokenizer(tokfile.data, static_cast<size_t>(tokfile.size), s.vocab_size, &vocab_data);
  if (ts != TINYAI_OK) return AddErrorContext(ts, "'%s': ", tokenizerPath);

  TmaiWriter w;
  UseRowEncoder(&w, options);
  w.SetCompression(options.codec, options.level);
  AddLlamaMetadata(&w, s, llama_key::kArchitecture, options.name.empty() ? "llama2.c checkpoint" : options.name,
                   "llama2c", checkpointPath);
  std::vector<std::string> pieces;
  std::vector<float> scores;
  for (int32_t i = 0; i < s.vocab_size; ++i) {
    pieces.emplace_back(vocab_data.pieces[static_cast<size_t>(i)].data, vocab_data.pieces[static_cast<size_t>(i)].size);
    scores.push_back(vocab_data.scores[static_cast<size_t>(i)]);
  }
  // A piece the runtime refuses (an empty one, which llama2.c files can
  // hold) is refused here, before anything is written.
  ts = CheckTokenizerPieces(pieces, scores);
  if (ts != TINYAI_OK) return AddErrorContext(ts, "'%s': ", tokenizerPath);
  AddTokenizerMetadata(&w, pieces, scores);
  DeclareLlamaTensors(&w, s, nullptr, options.matrix_dtype);
  TINYAI_RETURN_IF_ERROR(w.Open(outPath));
  auto put = [&](uint64_t offset, uint64_t count) { return w.WriteValues(f + offset, static_cast<size_t>(count)); };
  TINYAI_RETURN_IF_ERROR(put(o_emb, vocab * dim));
  for (uint64_t l = 0; l < L; ++l) {
    TINYAI_RETURN_IF_ERROR(put(o_rms_att + l * dim, dim));
    TINYAI_RETURN_IF_ERROR(put(o_wq + l * dim * dim, dim * dim));
    TINYAI_RETURN_IF_ERROR(put(o_wk + l * kv_dim * dim, kv_dim * dim));
    TINYAI_RETURN_IF_ERROR(put(o_wv + l * kv_dim * dim, kv_dim * dim));
    TINYAI_RETURN_IF_ERROR(put(o_wo + l * dim * dim, dim * dim));
    TINYAI_RETURN_IF_ERROR(put(o_rms_ffn + l * dim, dim));
    TINYAI_RETURN_IF_ERROR(put(o_w1 + l * hidden * dim, hidden * dim));
    TINYAI_RETURN_IF_ERROR(put(o_w3 + l * hidden * dim, hidden * dim));
    TINYAI_RETURN_IF_ERROR(put(o_w2 + l * dim * hidden, dim * hidden));
  }
  TINYAI_RETURN_IF_ERROR(put(o_rms_final, dim));
  if (!s.shared_classifier) TINYAI_RETURN_IF_ERROR(put(o_cls, vocab * dim));
  TINYAI_RETURN_IF_ERROR(w.Finish());
  if (paramsOut) *paramsOut = s;
  if (stats) *stats = w.stats();
  return TINYAI_OK;
}

}  // namespace tinyai
