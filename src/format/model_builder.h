// Offline model builders (used by tinyai-convert and the tests): a llama2.c
// checkpoint and tokenizer into .tmai, random-weight LLaMA models for speed
// and memory tests, and random-weight dense networks from a definition file.
// They stream tensor data, so writing a multi-GiB model needs little memory.
#ifndef TINYAI_FORMAT_MODEL_BUILDER_H_
#define TINYAI_FORMAT_MODEL_BUILDER_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "tinyai/status.h"
#include "tinyai/types.h"

namespace tinyai {

struct LlamaShape {
  int32_t dim = 0;
  int32_t hidden_dim = 0;
  int32_t layers = 0;
  int32_t heads = 0;
  int32_t kv_heads = 0;
  int32_t vocab_size = 0;
  int32_t seq_len = 0;
  bool shared_classifier = true;
  uint64_t seed = 1;  // synthetic models only
};

// How builders store tensor data (TmaiWriter::SetCompression).
struct WriteOptions {
  TinyAICodec codec = TINYAI_CODEC_NONE;  // TINYAI_CODEC_ZSTD: zstd frames for every tensor they shrink
  int level = 3;                          // zstd level, 1..19
  std::string name;                       // general.name; empty: a default naming the source
  // The dtype of every matrix (embeddings, projections, classifier, dense
  // weights): f32 or f16 (rounded to nearest even). Norm weights and biases
  // stay f32: they are small and the runtime reads them as f32.
  TinyAIDType matrix_dtype = TINYAI_DTYPE_F32;
};

// TINYAI_ERR_INVALID_ARGUMENT unless options.matrix_dtype is one builders write.
TinyAIStatus CheckWriteOptions(const WriteOptions& options);

struct TmaiWriteStats;

// Parses "dim=768,hidden=2048,layers=12,heads=12,kv_heads=12,vocab=32000,
// seq_len=1024,seed=1[,shared=0]" (kv_heads defaults to heads, seed to 1,
// shared to 1). TINYAI_ERR_INVALID_ARGUMENT names the bad key or value (an
// unknown or repeated key, a value that is not digits, shared not 0 or 1);
// then CheckShape(out, true).
TinyAIStatus ParseSyntheticSpec(const std::string& spec, LlamaShape* out);

// Checks a shape is a valid LLaMA model the runtime runs, in this order:
// every dimension positive (TINYAI_ERR_INVALID_ARGUMENT); every field within
// format/limits.h (TINYAI_ERR_UNSUPPORTED naming the field, its value and the
// limits, as model/llama.cc refuses a file); heads divide dim into even head
// sizes and kv_heads divide heads, and vocab >= 260 when the synthetic
// tokenizer needs byte fallback (TINYAI_ERR_INVALID_ARGUMENT).
TinyAIStatus CheckShape(const LlamaShape& shape, bool synthetic);

// Checks a tokenizer the runtime accepts: as many scores as pieces, every
// piece 1..limits::kMaxPieceBytes bytes, every score finite.
// TINYAI_ERR_BAD_TOKENIZER names the token.
TinyAIStatus CheckTokenizerPieces(const std::vector<std::string>& pieces, const std::vector<float>& scores);

// Writes a random-weight model with a synthetic tokenizer (byte fallback plus
// generated pieces); weights are uniform with variance 1/fan_in, norms 1.
// stats, when not null, receives what was written.
TinyAIStatus WriteSyntheticModel(const LlamaShape& shape, const char* outPath,
                                 const WriteOptions& options = WriteOptions(), TmaiWriteStats* stats = nullptr);

class TmaiWriter;

// The seeded generator of synthetic weights (splitmix64): next value of *state.
uint64_t SplitMix64(uint64_t* state);

// The pieces of a llama .tmai description, shared by every builder (and the
// tests' deliberately malformed models):
// the general.* and llama.* metadata, with the given architecture name;
void AddLlamaMetadata(TmaiWriter* w, const LlamaShape& s, const std::string& architecture, const std::string& name,
                      const std::string& source);
// the tokenizer.* metadata (llama2c-bpe, BOS 1, EOS 2);
void AddTokenizerMetadata(TmaiWriter* w, const std::vector<std::string>& pieces, const std::vector<float>& scores);
// the layers and tensors, in the order their data is written: embedding; per
// block attn_norm, q, k, v, o, ffn_norm, gate, up, down; output. q, k, v and
// gate, up are adjacent so the runner reads each group as one matrix. reshape,
// when set, may change a tensor's shape (tests).
using TensorReshape = std::function<void(const std::string& name, std::vector<uint64_t>* shape)>;
void DeclareLlamaTensors(TmaiWriter* w, const LlamaShape& s, const TensorReshape& reshape = nullptr,
                         TinyAIDType matrix_dtype = TINYAI_DTYPE_F32);

// Whether a and b name the same existing file: the same device and inode, so
// hard links, symbolic links and different spellings of one path are caught.
// False when either does not exist.
bool SameFile(const char* a, const char* b);

// Converts a llama2.c checkpoint (version-0 header) and its tokenizer.
// TINYAI_ERR_INVALID_ARGUMENT, before anything is written, when outPath is
// one of the inputs (the same file: device and inode); TINYAI_ERR_BAD_FORMAT
// for a header that is no llama2.c shape; TINYAI_ERR_UNSUPPORTED for a shape
// beyond format/limits.h; TINYAI_ERR_BAD_TOKENIZER for a tokenizer file or a
// piece the runtime refuses (an empty one).
TinyAIStatus ConvertLlama2c(const char* checkpointPath, const char* tokenizerPath, const char* outPath,
                            LlamaShape* shapeOut, const WriteOptions& options = WriteOptions(),
                            TmaiWriteStats* stats = nullptr);

// Writes an existing .tmai again: the same metadata, layers and tensors, its
// matrices (2-D f32 or f16 tensors) in options.matrix_dtype when
// keep_dtypes is false (else as they are), compressed per options.codec;
// compressed input is decoded. The input is read through the loader (a
// capped weight cache), so a model larger than memory converts.
// TINYAI_ERR_INVALID_ARGUMENT when outPath is the input; the reader's errors
// for a bad input.
TinyAIStatus ReencodeModel(const char* inPath, const char* outPath, const WriteOptions& options, bool keep_dtypes,
                           TmaiWriteStats* stats = nullptr);

// ---- Dense networks (docs/format.md, "Dense networks") ----------------------
//
// A definition file describes an MLP whose layers may read several earlier
// layers (their outputs are summed), which is how residual blocks are written:
//
//   # comment lines and blank lines are ignored; '#' also ends a line early
//   name mlp-residual          # optional: general.name
//   input 32                   # floats per input row (required, before the first layer)
//   seed 7                     # optional, default 1
//   layer fc_in  out=64 act=relu
//   layer b0_fc1 out=64 act=relu
//   layer b0_fc2 out=64 act=none
//   layer b1_fc1 out=64 act=relu inputs=b0_fc2,fc_in    # input = b0_fc2 + fc_in: a residual block
//   ...
//   layer head   out=10 act=none bias=0
//
// Directives are whitespace-separated tokens, one directive per line; each of
// name, input and seed appears at most once. `layer NAME key=value...` takes
// out=N (required, 1..16777216), act=none|relu|tanh (default none), bias=0|1
// (default 1) and inputs=A,B,... (no spaces; default: the previous layer, or
// the network input for the first layer). In inputs=, a name is an earlier
// layer and `input` is the network's input, each at most once and at most
// limits::kMaxDenseInputs (64) of them; the inputs must all have the same
// width, which becomes the layer's input width. The network's output (the
// layers no later layer reads) is at most limits::kMaxDenseOutputWidth floats. NAME is letters, digits, '_',
// '-' and '.', unique, and not `input`. The network's output is the
// concatenation, in layer order, of the layers no later layer reads.

struct DenseLayerDef {
  std::string name;
  int32_t out = 0;                  // output width (rows of the weight)
  std::string activation;           // "none", "relu" or "tanh"; empty means none
  std::vector<std::string> inputs;  // earlier layer names or "input"; empty: the previous layer (or the input)
  bool bias = true;
};

struct DenseNetDef {
  std::string name;       // general.name; may be empty
  int32_t input_dim = 0;  // floats per input row
  uint64_t seed = 1;      // of the random weights
  std::vector<DenseLayerDef> layers;
};

// Parses a definition (above). Errors are TINYAI_ERR_INVALID_ARGUMENT with a
// message "line N: ..." naming the problem: an unknown directive or key, a
// missing or repeated `input`, a bad number, a duplicate layer name, an input
// naming an unknown or later layer, an input named twice, more than 64
// inputs, an unknown activation, inputs of different widths, an output wider
// than limits::kMaxDenseOutputWidth, or no layers.
TinyAIStatus ParseDenseDefinition(const std::string& text, DenseNetDef* out);

// Writes a dense network with seeded random weights: each weight uniform with
// variance 1/in, each bias uniform in [-0.1, 0.1]; the same definition and
// seed give the same bytes. def is checked as ParseDenseDefinition checks a
// file (TINYAI_ERR_INVALID_ARGUMENT naming the layer). stats, when not null,
// receives what was written.
TinyAIStatus WriteDenseModel(const DenseNetDef& def, const char* outPath, const WriteOptions& options = WriteOptions(),
                             TmaiWriteStats* stats = nullptr);

}  // namespace tinyai

#endif  // TINYAI_FORMAT_MODEL_BUILDER_H_
