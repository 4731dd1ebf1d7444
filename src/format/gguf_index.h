// A GGUF file run in place: the .tmai index (format/tmai_format.h) the
// runtime reads a model through, built in memory from the GGUF's header, its
// tensor directory pointing at the GGUF's own bytes. No byte of the file is
// copied or rewritten; the weight cache reads its rows as it reads a .tmai's.
//
// What the index says, and how it differs from a converted file's
// (docs/format.md, "GGUF in place"):
//  - the metadata a conversion writes: llama.* from the architecture's keys
//    (llama and qwen2), tokenizer.* from tokenizer.ggml.* (SentencePiece or
//    byte-level BPE, with llama.cpp's BOS/EOS rules), the chat template,
//    llama.rope_freq_factors from rope_freqs.weight; and llama.rope_neox for
//    Qwen2, whose rotary pairs are each head's halves (a conversion permutes
//    the rows instead, which a file read in place cannot);
//  - one layer for the embedding, one per block, one for the output, each
//    its tensors in file order, wherever they lie in the file;
//  - tensors at the GGUF's alignment (32 by default) rather than 64, laid out
//    compactly once loaded, with no checksums (GGUF records none);
//  - the header's flags say kHeaderFlagInPlace, which the reader accepts only
//    from this builder (TmaiReader::Parse's in_place), never from a file.
// What a conversion would widen (BF16 matrices, F16 norms) is refused with the
// command that converts the file.
#ifndef TINYAI_FORMAT_GGUF_INDEX_H_
#define TINYAI_FORMAT_GGUF_INDEX_H_

#include <cstddef>
#include <cstdint>

#include "common/array.h"
#include "format/gguf_format.h"
#include "tinyai/status.h"

namespace tinyai {

// Copies size bytes of the file at offset into dst.
using GgufReadFn = TinyAIStatus (*)(void* user, uint64_t offset, size_t size, void* dst);

// Builds the index of a GGUF file of file_size bytes whose header h was
// parsed (gguf::ParseHeader); read reads the small tensors the metadata takes
// (rope_freqs.weight). *index receives the image (index_size bytes, 64-byte
// aligned), for TmaiReader::Parse(..., in_place = true). Errors name the
// key or tensor and, where there is one, the way to a file TinyAI runs.
TinyAIStatus BuildGgufIndex(const gguf::HeaderView& h, uint64_t file_size, const char* source, GgufReadFn read,
                            void* user, AlignedBuffer* index, uint64_t* index_size);

// The TinyAI dtype a GGUF tensor of ggml type `type` is run or converted as
// (a matrix, or a vector: norms and biases), or -1 when TinyAI reads no such
// tensor. widened: BF16 (and F16 vectors) become f32, so a conversion
// rewrites them; read in place they are refused.
int32_t GgufTensorDType(uint32_t type, bool matrix, bool* widened);

// Texts llama.cpp makes control tokens whatever a file says
// (src/llama-vocab.cpp, load): end-of-turn and fill-in-the-middle markers.
bool GgufControlByText(const char* text, size_t size);

// What TinyAI's LLaMA makes of one "<arch>." key of a GGUF file: read (a
// hyper-parameter), without effect on the numbers, or required to hold the
// value TinyAI computes with (the head size, 0, 1, true, false); `what`
// says what another value would mean.
struct GgufLlamaKey {
  enum Rule { kRead, kNoEffect, kHeadSize, kZero, kOne, kTrue, kFalse };
  const char* key;  // after "<arch>."
  Rule rule;
  const char* what;
};
// The rule for key (after "<arch>."), or nullptr for a key TinyAI does not
// know (refused: it may change what the model computes).
const GgufLlamaKey* FindGgufLlamaKey(const char* key, size_t size);

}  // namespace tinyai

#endif  // TINYAI_FORMAT_GGUF_INDEX_H_
