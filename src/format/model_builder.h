// Offline model builders (used by tinyai-convert and the tests): a llama2.c
// checkpoint and tokenizer into .tmai, and random-weight LLaMA models for
// speed and memory tests. Both stream tensor data, so writing a multi-GiB
// model needs little memory.
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
};

struct TmaiWriteStats;

// Parses "dim=768,hidden=2048,layers=12,heads=12,kv_heads=12,vocab=32000,
// seq_len=1024,seed=1[,shared=0]" (kv_heads defaults to heads, seed to 1,
// shared to 1). TINYAI_ERR_INVALID_ARGUMENT names the bad key or value.
TinyAIStatus ParseSyntheticSpec(const std::string& spec, LlamaShape* out);

// Checks a shape is a valid LLaMA model (dimensions positive, heads divide
// dim into even head sizes, kv_heads divide heads, vocab >= 259 when the
// synthetic tokenizer needs byte fallback).
TinyAIStatus CheckShape(const LlamaShape& shape, bool synthetic);

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
void DeclareLlamaTensors(TmaiWriter* w, const LlamaShape& s, const TensorReshape& reshape = nullptr);

// Converts a llama2.c checkpoint (version-0 header) and its tokenizer.
TinyAIStatus ConvertLlama2c(const char* checkpointPath, const char* tokenizerPath, const char* outPath,
                            LlamaShape* shapeOut, const WriteOptions& options = WriteOptions(),
                            TmaiWriteStats* stats = nullptr);

}  // namespace tinyai

#endif  // TINYAI_FORMAT_MODEL_BUILDER_H_
