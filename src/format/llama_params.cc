#include "format/llama_params.h"

#include <cmath>
#include <cstring>

#include "common/printable.h"
#include "common/status.h"
#include "format/limits.h"
#include "format/tmai_reader.h"

namespace tinyai {

const LlamaDimField kLlamaDims[kLlamaDimFields] = {
    {llama_key::kDim, &LlamaHyperParams::dim, 1, limits::kMaxLlamaDim},
    {llama_key::kHiddenDim, &LlamaHyperParams::hidden_dim, 1, limits::kMaxLlamaHiddenDim},
    {llama_key::kLayers, &LlamaHyperParams::layers, 1, limits::kMaxLlamaLayers},
    {llama_key::kHeads, &LlamaHyperParams::heads, 1, limits::kMaxLlamaHeads},
    {llama_key::kKvHeads, &LlamaHyperParams::kv_heads, 1, limits::kMaxLlamaHeads},
    {llama_key::kVocabSize, &LlamaHyperParams::vocab_size, limits::kMinVocab, limits::kMaxVocab},
    {llama_key::kSeqLen, &LlamaHyperParams::seq_len, 1, limits::kMaxSeqLen},
};

namespace {

TinyAIStatus ReadDim(const TmaiReader& r, const char* key, int32_t min, int32_t max, int32_t* out) {
  int64_t v = 0;
  TINYAI_RETURN_IF_ERROR(r.GetInt(key, &v));
  if (v < min || v > max) {
    return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': metadata '%s' is %lld; allowed %d..%d", r.source(), key,
                    static_cast<long long>(v), min, max);
  }
  *out = static_cast<int32_t>(v);
  return TINYAI_OK;
}

}  // namespace

TinyAIStatus LlamaHyperParams::Load(const TmaiReader& r) {
  StringView arch;
  TINYAI_RETURN_IF_ERROR(r.GetString("general.architecture", &arch));
  const size_t n = sizeof llama_key::kArchitecture - 1;
  if (arch.size != n || std::memcmp(arch.data, llama_key::kArchitecture, n) != 0) {
    return SetError(TINYAI_ERR_UNSUPPORTED, "'%s': architecture '%s' is not supported (expected 'llama')",
                    r.source(), Printable(arch).c_str());
  }
  for (const LlamaDimField& f : kLlamaDims) TINYAI_RETURN_IF_ERROR(ReadDim(r, f.key, f.min, f.max, &(this->*f.field)));
  int32_t shared = 1;
  TINYAI_RETURN_IF_ERROR(ReadDim(r, llama_key::kSharedClassifier, 0, 1, &shared));
  shared_classifier = shared != 0;
  int32_t bias = 0;
  if (r.FindMeta(llama_key::kQkvBias)) TINYAI_RETURN_IF_ERROR(ReadDim(r, llama_key::kQkvBias, 0, 1, &bias));
  qkv_bias = bias != 0;
  int32_t neox = 0;
  if (r.FindMeta(llama_key::kRopeNeox)) TINYAI_RETURN_IF_ERROR(ReadDim(r, llama_key::kRopeNeox, 0, 1, &neox));
  rope_neox = neox != 0;
  if (r.FindMeta(llama_key::kNormEps)) TINYAI_RETURN_IF_ERROR(r.GetFloat(llama_key::kNormEps, &norm_eps));
  if (r.FindMeta(llama_key::kRopeTheta)) TINYAI_RETURN_IF_ERROR(r.GetFloat(llama_key::kRopeTheta, &rope_theta));
  if (!limits::NormEpsInRange(norm_eps) || !limits::RopeThetaInRange(rope_theta)) {
    return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': norm_eps %g or rope_theta %g is out of range", r.source(),
                    static_cast<double>(norm_eps), static_cast<double>(rope_theta));
  }
  if (r.FindMeta(llama_key::kRopeLinearFactor)) {
    TINYAI_RETURN_IF_ERROR(r.GetFloat(llama_key::kRopeLinearFactor, &rope_linear_factor));
  }
  if (!RopeLinearFactorInRange(rope_linear_factor)) {
    return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': %s %g is outside what the runtime runs (1/65536 .. 65536)",
                    r.source(), llama_key::kRopeLinearFactor, static_cast<double>(rope_linear_factor));
  }
  if (dim % heads != 0 || heads % kv_heads != 0 || (dim / heads) % 2 != 0) {
    return SetError(TINYAI_ERR_BAD_FORMAT,
                    "'%s': dim %d, heads %d, kv_heads %d do not divide into even-sized heads", r.source(), dim,
                    heads, kv_heads);
  }
  return TINYAI_OK;
}

}  // namespace tinyai
