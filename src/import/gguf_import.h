// Import of GGUF files (tinyai-convert --from gguf): LLaMA-architecture
// models, their hyper-parameters, tensors and SentencePiece vocabulary. The
// file's parser is import/gguf.h.
#ifndef TINYAI_IMPORT_GGUF_IMPORT_H_
#define TINYAI_IMPORT_GGUF_IMPORT_H_

#include "format/llama_params.h"
#include "import/builder.h"
#include "tinyai/status.h"

namespace tinyai {

// Converts a GGUF file (version 2 or 3) of a LLaMA model to a .tmai.
//
// Read: llama.embedding_length, feed_forward_length, block_count,
// context_length, attention.head_count, attention.head_count_kv (default
// head_count), attention.layer_norm_rms_epsilon (required, as llama.cpp
// requires it), rope.freq_base (default 10000), rope.dimension_count (must
// be the head size when present); linear rope scaling as llama.cpp reads it
// (rope.scaling.type, "linear" when absent; rope.scaling.factor, else the
// older rope.scale_linear; 0 or none: no scaling), recorded as
// llama.rope_linear_factor and computed by the runtime; the vocabulary from
// tokenizer.ggml.tokens and .scores (model "llama": SentencePiece pieces,
// U+2581 stored as a space, as llama2.c stores them),
// tokenizer.ggml.bos_token_id / eos_token_id and add_bos_token /
// add_eos_token (recorded as tokenizer.add_bos / add_eos, which the
// generation path and the C API's tokenize follow);
// tensors by their GGUF names (token_embd, blk.N.attn_norm, attn_q, attn_k,
// attn_v, attn_output, ffn_norm, ffn_gate, ffn_up, ffn_down, output_norm,
// output - tied to token_embd when absent), each ".weight". The pieces
// keep GGUF's spelling of control tokens ("<s>"); the 256 byte pieces must
// be ids 3..258 (TinyAI's tokenizer falls back to a byte by id, as
// llama2.c's does), and tokenizer.ggml.token_type, when present, must give
// type 6 (byte) to them and only them. The .tmai records where it came from
// (general.source_format "gguf", general.source_file).
//
// No llama.* key is ignored: each is read, known not to change what the
// model computes (rope.scaling.original_context_length, .finetuned,
// tensor_data_layout as llama.cpp writes it), or checked to hold the value
// TinyAI computes with (attention.key_length and value_length: the head
// size; expert_count, expert_used_count, attention.clamp_kqv,
// attention.scale, attention.sliding_window, the soft-cappings: 0;
// logit_scale, residual_scale, embedding_scale, rope.scaling.attn_factor:
// 1; attention.causal true; use_parallel_residual false). Another value,
// or a llama.* key TinyAI does not know, is refused naming the key
// (TINYAI_ERR_UNSUPPORTED).
//
// Tensors are copied as stored: F32 and F16 to f32 and f16, Q8_0 to
// q8_g32, Q4_0 to q4_g32, IQ4_NL to q4nl_g32 (the same bytes); BF16 is
// widened to f32 exactly, and a norm stored in F16 or BF16 to f32 (the
// runtime reads norms as f32). Every other ggml type (Q4_K, Q6_K, ...) is
// refused by name (TINYAI_ERR_UNSUPPORTED): requantize with llama.cpp's
// llama-quantize --pure to Q8_0 or Q4_0, or convert from F16. GGUF's
// dimension order (dims[0] is the row length) is the .tmai's rows, and its
// Q and K rows are in llama2.c's interleaved rotary layout: nothing is
// permuted.
//
// Errors, each before anything is written: TINYAI_ERR_INVALID_ARGUMENT when
// outPath is the input, or options.matrix_dtype is not f32 (the file's own
// dtypes are kept: tinyai-quantize converts them after); the parser's
// errors (import/gguf.h); TINYAI_ERR_UNSUPPORTED for another architecture,
// one file of a split model (split.count), rope scaling other than linear
// (yarn, longrope, ...; rope_freqs factors), a linear factor beyond
// 1/65536 .. 65536, a rotary dimension other than the head size, a llama.*
// key as above, an unknown extra tensor, or a shape beyond
// format/limits.h; TINYAI_ERR_BAD_FORMAT for a missing key or tensor, a key
// of the wrong type, a negative rope factor or two that disagree, a tensor
// of the wrong shape, a vocabulary whose size disagrees with the embedding
// or with llama.vocab_size; TINYAI_ERR_UNSUPPORTED for another tokenizer model or
// byte pieces elsewhere than ids 3..258; TINYAI_ERR_BAD_TOKENIZER for
// missing tokens or scores, counts that disagree, token types that do not
// mark the byte pieces, BOS or EOS outside the vocabulary, or a piece the
// runtime refuses.
TinyAIStatus ConvertGguf(const char* ggufPath, const char* outPath, LlamaHyperParams* paramsOut,
                         const WriteOptions& options = WriteOptions(), TmaiWriteStats* stats = nullptr);

}  // namespace tinyai

#endif  // TINYAI_IMPORT_GGUF_IMPORT_H_
