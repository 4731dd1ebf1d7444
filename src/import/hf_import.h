// Import of Hugging Face LLaMA checkpoints in safetensors (tinyai-convert
// --from safetensors): config.json, the weights in one file or in shards
// named by model.safetensors.index.json, and the SentencePiece
// tokenizer.model. The file parser is import/safetensors.h.
#ifndef TINYAI_IMPORT_HF_IMPORT_H_
#define TINYAI_IMPORT_HF_IMPORT_H_

#include "format/llama_params.h"
#include "import/builder.h"
#include "tinyai/status.h"

namespace tinyai {

// True when this build reads SentencePiece tokenizer.model files (Debian's
// libsentencepiece-dev was found; the cross builds go without it).
bool SentencePieceAvailable();

// Converts a Hugging Face LLaMA checkpoint. inPath is its folder (holding
// model.safetensors or model.safetensors.index.json), a .safetensors file or
// the index .json file; config.json and tokenizer.model are read from the
// same folder.
//
// config.json: model_type "llama" (or architectures naming
// LlamaForCausalLM), hidden_size, intermediate_size, num_hidden_layers,
// num_attention_heads, num_key_value_heads (default: the heads),
// max_position_embeddings, vocab_size, rms_norm_eps (default 1e-6),
// rope_theta (default 10000), tie_word_embeddings (default false),
// rope_scaling (null, rope_type "default", or "linear" with its factor,
// recorded as llama.rope_linear_factor and computed by the runtime; other
// types are refused by name); hidden_act must be silu, head_dim (when
// given) dim / heads, attention_bias and mlp_bias false, quantization_config
// absent. tokenizer_config.json, when present: add_bos_token and
// add_eos_token (transformers' defaults: BOS yes, EOS no), recorded as
// tokenizer.add_bos / add_eos and followed by the runtime; add_prefix_space
// must not be false. The tensors by their Hugging Face
// names (model.embed_tokens, model.layers.N.input_layernorm,
// self_attn.{q,k,v,o}_proj, post_attention_layernorm,
// mlp.{gate,up,down}_proj, model.norm, lm_head - absent or ignored when the
// embeddings are tied; rotary_emb.inv_freq buffers are ignored), each
// ".weight", [out, in] as the .tmai's rows. q_proj's and k_proj's rows are
// in Hugging Face's rotary layout (each head's first halves of the rotated
// pairs, then their second halves); they are permuted back to the
// interleaved layout llama2.c and GGUF use (k_proj per KV head), so the
// result equals the model's llama2.c import. F32 tensors stay f32, F16
// matrices f16 (norms f32), BF16 is widened to f32 exactly; other dtypes
// are refused by name. The vocabulary comes from tokenizer.model (pieces
// with U+2581 as a space, scores, BOS and EOS): it must be a model TinyAI's
// tokenizer reproduces - its byte pieces at ids 3..258, and its encoding of
// a set of probe texts equal to SentencePiece's own (a unigram model, or
// one that normalizes the text, is refused) - and agree with vocab_size and
// the embedding. Every file the importer picks from the folder (the shards
// the index names, model.safetensors, the index, config.json,
// tokenizer.model, tokenizer_config.json) must resolve inside it, symbolic
// links followed (in the Hugging Face hub's cache, snapshots/REV's links
// into the repository's blobs/ folder are followed too). Everything
// streams: the peak RSS is a tensor's rows at most, not the model.
//
// Errors, before anything is written: TINYAI_ERR_INVALID_ARGUMENT when
// outPath is an input or options.matrix_dtype is not f32; the parsers'
// (import/safetensors.h, import/json.h); TINYAI_ERR_FILE_NOT_FOUND for a
// missing config.json, tokenizer.model or weights file;
// TINYAI_ERR_BAD_FORMAT for a missing or mistyped config field, a missing
// tensor, a tensor of the wrong shape, a tensor in two shards or in a shard
// the index does not say, an index naming a file outside the folder, a
// rope_scaling without a type or with a factor of 0 or less, a vocabulary
// whose size disagrees with vocab_size or the embedding;
// TINYAI_ERR_OUT_OF_BOUNDS for a file of the folder that is a link out of
// it; TINYAI_ERR_BAD_MAGIC for a shard that is not a safetensors file;
// TINYAI_ERR_UNSUPPORTED for another architecture, rope scaling other than
// linear, a quantized checkpoint, add_prefix_space false, biases, an
// activation other than silu, a dtype other than F32, F16 and BF16, an
// unknown extra tensor, a tokenizer TinyAI does not reproduce, or a build
// without SentencePiece; TINYAI_ERR_BAD_TOKENIZER for a tokenizer.model
// SentencePiece cannot load or a piece the runtime refuses.
TinyAIStatus ConvertSafetensors(const char* inPath, const char* outPath, LlamaHyperParams* paramsOut,
                                const WriteOptions& options = WriteOptions(), TmaiWriteStats* stats = nullptr);

}  // namespace tinyai

#endif  // TINYAI_IMPORT_HF_IMPORT_H_
