// What the offline builders (src/import/: llama2.c import, synthetic and
// dense models, re-encoding) share: how they store tensors, the checks a
// model must pass before it is written, and the pieces of a LLaMA .tmai
// description (its hyper-parameters are format/llama_params.h's, written
// under its keys). Offline code: it may allocate freely and uses the
// standard library; the runtime never links it.
#ifndef TINYAI_IMPORT_BUILDER_H_
#define TINYAI_IMPORT_BUILDER_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "format/llama_params.h"
#include "quant/quantize.h"
#include "tinyai/status.h"
#include "tinyai/types.h"

namespace tinyai {

// How builders store tensor data (TmaiWriter::SetCompression).
struct WriteOptions {
  TinyAICodec codec = TINYAI_CODEC_NONE;  // TINYAI_CODEC_ZSTD: zstd frames for every tensor they shrink
  int level = 3;                          // zstd level, 1..19
  std::string name;                       // general.name; empty: a default naming the source
  // The dtype of every matrix (embeddings, projections, classifier, dense
  // weights): f32, f16 (rounded to nearest even) or a grouped dtype (q8_g32,
  // q4_g32, q4nl_g32; scales by quant::EncodeRows' search). Norm weights and
  // biases stay f32: they are small and the runtime reads them as f32.
  TinyAIDType matrix_dtype = TINYAI_DTYPE_F32;
  // When set, receives each grouped tensor's encoding error, indexed by its
  // place in the file's directory.
  std::vector<quant::EncodeError>* errors = nullptr;
};

// TINYAI_ERR_INVALID_ARGUMENT unless options.matrix_dtype is one builders write.
TinyAIStatus CheckWriteOptions(const WriteOptions& options);

struct TmaiWriteStats;
class TmaiWriter;

// Gives w the row encoder of the grouped dtypes (quant::EncodeRows), adding
// each tensor's error to options.errors when set.
void UseRowEncoder(TmaiWriter* w, const WriteOptions& options);

// The smallest vocabulary of a synthetic model: <unk>, BOS, EOS, 256 byte
// pieces and the dummy prefix.
constexpr int32_t kMinSyntheticVocab = 260;

// Checks a shape is a valid LLaMA model the runtime runs, in this order:
// every dimension positive (TINYAI_ERR_INVALID_ARGUMENT); every field within
// format/limits.h (TINYAI_ERR_UNSUPPORTED naming the field, its value and the
// limits, as model/llama.cc refuses a file); heads divide dim into even head
// sizes and kv_heads divide heads, and vocab >= 260 when the synthetic
// tokenizer needs byte fallback (TINYAI_ERR_INVALID_ARGUMENT).
TinyAIStatus CheckShape(const LlamaHyperParams& shape, bool synthetic);

// CheckShape for an imported file's shape: what it refuses as an invalid
// argument (a dimension of 0, heads that do not divide dim) is the file's
// TINYAI_ERR_BAD_FORMAT; the limits stay TINYAI_ERR_UNSUPPORTED. The message
// starts with 'source': .
TinyAIStatus CheckImportedShape(const LlamaHyperParams& shape, const char* source);

// Checks a tokenizer the runtime accepts: as many scores as pieces, every
// piece 1..limits::kMaxPieceBytes bytes, every score finite.
// TINYAI_ERR_BAD_TOKENIZER names the token.
TinyAIStatus CheckTokenizerPieces(const std::vector<std::string>& pieces, const std::vector<float>& scores);

// SentencePiece marks a word's start with U+2581; llama2.c's files, and
// TinyAI's tokenizer, with a space: every U+2581 of piece becomes ' '.
void SpacesFromSentencePiece(std::string* piece);

// Checks an imported vocabulary has the 256 byte pieces "<0x00>".."<0xFF>"
// at ids 3..258, where TinyAI's tokenizer (as llama2.c's) falls back to a
// byte missing from the vocabulary: TINYAI_ERR_UNSUPPORTED naming source and
// the first token that is not (any other vocabulary would tokenize such
// text into the wrong tokens).
TinyAIStatus CheckBytePieces(const char* source, const std::vector<std::string>& pieces);

// The seeded generator of synthetic weights (splitmix64): next value of *state.
uint64_t SplitMix64(uint64_t* state);

// Streams n floats uniform in [-bound, bound] (or all `fill` when bound is
// 0) from *rng into w's current tensor.
TinyAIStatus WriteRandom(TmaiWriter* w, uint64_t n, float bound, float fill, uint64_t* rng);

// The pieces of a llama .tmai description, shared by every builder (and the
// tests' deliberately malformed models):
// where a model came from: general.source_format ("llama2c", "gguf",
// "safetensors", "synthetic", "dense"), general.source_file (the input's file
// name, when path is given) and general.source (the command that wrote it);
void AddSourceMetadata(TmaiWriter* w, const std::string& format, const char* path);
// the general.* (AddSourceMetadata's among them) and llama.* metadata, with
// the given architecture name (and llama.rope_freq_factors when given);
void AddLlamaMetadata(TmaiWriter* w, const LlamaHyperParams& s, const std::string& architecture, const std::string& name,
                      const std::string& source_format, const char* source_path,
                      const std::vector<float>& rope_freq_factors = std::vector<float>());
// the tokenizer.* metadata (llama2c-bpe, BOS 1 and EOS 2 unless given;
// tokenizer.add_bos 0 when a text does not start with BOS, tokenizer.add_eos
// 1 when it ends with EOS);
void AddTokenizerMetadata(TmaiWriter* w, const std::vector<std::string>& pieces, const std::vector<float>& scores,
                          int64_t bos = 1, int64_t eos = 2, bool add_bos = true, bool add_eos = false);
// the layers and tensors, in the order their data is written: embedding; per
// block attn_norm, q, k, v, o, ffn_norm, gate, up, down; output. q, k, v and
// gate, up are adjacent so the runner reads each group as one matrix. reshape,
// when set, may change a tensor's shape (tests); dtype_of, when set, gives
// each tensor's dtype (matrix_dtype and f32 for the norms otherwise).
using TensorReshape = std::function<void(const std::string& name, std::vector<uint64_t>* shape)>;
using TensorDType = std::function<TinyAIDType(const std::string& name)>;
void DeclareLlamaTensors(TmaiWriter* w, const LlamaHyperParams& s, const TensorReshape& reshape = nullptr,
                         TinyAIDType matrix_dtype = TINYAI_DTYPE_F32, const TensorDType& dtype_of = nullptr);

// Parses v as a decimal number of at most max: digits only, no sign, no
// spaces; false otherwise.
bool ParseDecimal(const std::string& v, uint64_t max, uint64_t* out);

// Whether a and b name the same existing file: the same device and inode, so
// hard links, symbolic links and different spellings of one path are caught.
// False when either does not exist.
bool SameFile(const char* a, const char* b);
// TINYAI_ERR_INVALID_ARGUMENT, naming both, when `out` is the input `in`
// (SameFile): an importer never writes over what it reads.
TinyAIStatus RefuseOutputIsInput(const char* out, const char* in);
// An importer's options: CheckWriteOptions, and matrix_dtype f32 (the file's
// own dtypes are kept; `format` names it in the message).
TinyAIStatus CheckImportOptions(const WriteOptions& options, const char* format);

}  // namespace tinyai

#endif  // TINYAI_IMPORT_BUILDER_H_
