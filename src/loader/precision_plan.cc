#include "loader/precision_plan.h"

#include <cstdio>
#include <cstring>

#include "common/checked_math.h"
#include "common/format.h"
#include "common/groups.h"
#include "common/status.h"

namespace tinyai {
namespace {

bool KnownPrecision(int32_t p) { return p >= TINYAI_PREC_FP32 && p <= TINYAI_PREC_Q5_1; }

// Bits per value of a stored dtype.
int DTypeFineness(int32_t dtype) {
  switch (dtype) {
    case TINYAI_DTYPE_F32: return 32;
    case TINYAI_DTYPE_F16: return 16;
    case TINYAI_DTYPE_Q8_G32: return 8;
    case TINYAI_DTYPE_Q6_K: return 6;
    case TINYAI_DTYPE_Q5_K:
    case TINYAI_DTYPE_Q5_G32:
    case TINYAI_DTYPE_Q5M_G32: return 5;
    case TINYAI_DTYPE_Q4_G32:
    case TINYAI_DTYPE_Q4NL_G32:
    case TINYAI_DTYPE_Q4_K: return 4;
    default: return 64;  // a dtype no precision names: the file's own choice wins
  }
}

// Bits per value, for "the finer of two" (a tied embedding and classifier);
// as stored is the stored dtype's (an f16 table left as stored is coarser
// than FP32, finer than INT8).
int Fineness(TinyAIPrecision p, int32_t stored) {
  switch (p) {
    case TINYAI_PREC_FP32: return 32;
    case TINYAI_PREC_FP16: return 16;
    case TINYAI_PREC_INT8: return 8;
    case TINYAI_PREC_INT4:
    case TINYAI_PREC_INT4_SYMMETRIC:
    case TINYAI_PREC_Q4_K: return 4;
    case TINYAI_PREC_Q5_K:
    case TINYAI_PREC_Q5_0:
    case TINYAI_PREC_Q5_1: return 5;
    case TINYAI_PREC_Q6_K: return 6;
    default: return DTypeFineness(stored);
  }
}

TinyAIStatus CheckPrecision(int32_t p, const char* what) {
  if (KnownPrecision(p)) return TINYAI_OK;
  return SetError(TINYAI_ERR_INVALID_ARGUMENT,
                  "tinyaiApplyMixedPrecision: %s is %d, not a TinyAIPrecision (TINYAI_PREC_FP32 .. "
                  "TINYAI_PREC_Q5_1 = 0 .. 10)", what, p);
}

// The precision a tensor of this role gets from the per-kind fields.
TinyAIPrecision KindPrecision(const TinyAIMixedPrecisionConfig& c, const tmai::TensorEntry& e, bool tied) {
  switch (e.role) {
    case TINYAI_ROLE_TOKEN_EMBEDDING: {
      if (!tied) return c.embeddingPrecision;
      const bool as_stored = c.embeddingPrecision == TINYAI_PREC_AS_STORED || c.outputPrecision == TINYAI_PREC_AS_STORED;
      // A quantized table asked to stay as stored does: another precision
      // would quantize it twice (refused) or widen it (bytes, no precision).
      if (as_stored && IsGroupedDType(e.dtype)) return TINYAI_PREC_AS_STORED;
      const int out = Fineness(c.outputPrecision, e.dtype), emb = Fineness(c.embeddingPrecision, e.dtype);
      if (out > emb || (out == emb && c.outputPrecision == TINYAI_PREC_AS_STORED)) return c.outputPrecision;
      return c.embeddingPrecision;
    }
    case TINYAI_ROLE_ATTN_Q:
    case TINYAI_ROLE_ATTN_K:
    case TINYAI_ROLE_ATTN_V:
    case TINYAI_ROLE_ATTN_OUT: return c.attentionPrecision;
    case TINYAI_ROLE_FFN_GATE:
    case TINYAI_ROLE_FFN_DOWN:
    case TINYAI_ROLE_FFN_UP:
    case TINYAI_ROLE_DENSE_WEIGHT: return c.ffnPrecision;
    case TINYAI_ROLE_CLASSIFIER: return c.outputPrecision;
    default: return TINYAI_PREC_AS_STORED;
  }
}

}  // namespace

TinyAIMixedPrecisionConfig DefaultMixedPrecisionConfig() {
  TinyAIMixedPrecisionConfig c;
  std::memset(&c, 0, sizeof c);
  c.structSize = sizeof c;
  c.embeddingPrecision = TINYAI_PREC_INT8;
  c.attentionPrecision = TINYAI_PREC_INT4;
  c.ffnPrecision = TINYAI_PREC_INT4;
  c.outputPrecision = TINYAI_PREC_INT8;
  c.groupSize = static_cast<int32_t>(kGroup);
  c.overrides = nullptr;
  c.overrideCount = 0;
  c.calibrationTokens = 0;
  c.calibrationText = nullptr;
  c.calibrationSeed = 7;
  c.calibrationErrorFeedback = 1;
  return c;
}

int32_t PrecisionDType(TinyAIPrecision p) {
  switch (p) {
    case TINYAI_PREC_FP32: return TINYAI_DTYPE_F32;
    case TINYAI_PREC_FP16: return TINYAI_DTYPE_F16;
    case TINYAI_PREC_INT8: return TINYAI_DTYPE_Q8_G32;
    case TINYAI_PREC_INT4: return TINYAI_DTYPE_Q4NL_G32;
    case TINYAI_PREC_INT4_SYMMETRIC: return TINYAI_DTYPE_Q4_G32;
    case TINYAI_PREC_Q4_K: return TINYAI_DTYPE_Q4_K;
    case TINYAI_PREC_Q5_K: return TINYAI_DTYPE_Q5_K;
    case TINYAI_PREC_Q6_K: return TINYAI_DTYPE_Q6_K;
    case TINYAI_PREC_Q5_0: return TINYAI_DTYPE_Q5_G32;
    case TINYAI_PREC_Q5_1: return TINYAI_DTYPE_Q5M_G32;
    default: return -1;
  }
}

TinyAIPrecision DTypePrecision(int32_t dtype) {
  switch (dtype) {
    case TINYAI_DTYPE_F32: return TINYAI_PREC_FP32;
    case TINYAI_DTYPE_F16: return TINYAI_PREC_FP16;
    case TINYAI_DTYPE_Q8_G32: return TINYAI_PREC_INT8;
    case TINYAI_DTYPE_Q4NL_G32: return TINYAI_PREC_INT4;
    case TINYAI_DTYPE_Q4_G32: return TINYAI_PREC_INT4_SYMMETRIC;
    case TINYAI_DTYPE_Q4_K: return TINYAI_PREC_Q4_K;
    case TINYAI_DTYPE_Q5_K: return TINYAI_PREC_Q5_K;
    case TINYAI_DTYPE_Q6_K: return TINYAI_PREC_Q6_K;
    case TINYAI_DTYPE_Q5_G32: return TINYAI_PREC_Q5_0;
    case TINYAI_DTYPE_Q5M_G32: return TINYAI_PREC_Q5_1;
    default: return TINYAI_PREC_AS_STORED;
  }
}

TinyAIStatus ResolveDTypes(const TmaiReader& reader, const TinyAIMixedPrecisionConfig& c, Array<uint8_t>* dtypes) {
  const char* src = reader.source();
  TINYAI_RETURN_IF_ERROR(CheckPrecision(c.embeddingPrecision, "embeddingPrecision"));
  TINYAI_RETURN_IF_ERROR(CheckPrecision(c.attentionPrecision, "attentionPrecision"));
  TINYAI_RETURN_IF_ERROR(CheckPrecision(c.ffnPrecision, "ffnPrecision"));
  TINYAI_RETURN_IF_ERROR(CheckPrecision(c.outputPrecision, "outputPrecision"));
  if (c.groupSize <= 0) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "tinyaiApplyMixedPrecision: groupSize is %d; it must be positive "
                    "(32, the default)", c.groupSize);
  }
  if (c.groupSize != static_cast<int32_t>(kGroup)) {
    return SetError(TINYAI_ERR_UNSUPPORTED, "tinyaiApplyMixedPrecision: groupSize %d has no kernels; the int8 and "
                    "int4 formats use groups of %zu", c.groupSize, kGroup);
  }
  if (c.overrideCount > 0 && c.overrides == nullptr) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "tinyaiApplyMixedPrecision: overrides is NULL but overrideCount is %zu",
                    c.overrideCount);
  }
  const auto layers = reader.file_layers();
  const auto tensors = reader.file_tensors();
  int32_t blocks = 0;
  bool has_embedding = false, has_classifier = false;
  for (const tmai::LayerEntry& l : layers) {
    if (l.kind == TINYAI_LAYER_TRANSFORMER && l.block_index >= blocks) blocks = l.block_index + 1;
  }
  for (const tmai::TensorEntry& e : tensors) {
    has_embedding |= e.role == TINYAI_ROLE_TOKEN_EMBEDDING;
    has_classifier |= e.role == TINYAI_ROLE_CLASSIFIER;
  }
  const bool tied = has_embedding && !has_classifier;

  Array<uint8_t> out;
  TINYAI_RETURN_IF_ERROR(out.Allocate(tensors.size(), "tensor precisions"));
  Array<int8_t> chosen;  // TinyAIPrecision per tensor
  TINYAI_RETURN_IF_ERROR(chosen.Allocate(tensors.size(), "tensor precisions"));
  for (size_t t = 0; t < tensors.size(); ++t) {
    const tmai::TensorEntry& e = tensors[t];
    chosen[t] = static_cast<int8_t>(e.ndims == 2 ? KindPrecision(c, e, tied) : TINYAI_PREC_AS_STORED);
  }
  // Blocks first, then tensors: a tensor's override wins over its block's.
  for (int pass = 0; pass < 2; ++pass) {
    for (size_t i = 0; i < c.overrideCount; ++i) {
      const TinyAIPrecisionOverride& o = c.overrides[i];
      char what[48];
      tinyai::Format(what, sizeof what, "overrides[%zu].precision", i);
      TINYAI_RETURN_IF_ERROR(CheckPrecision(o.precision, what));
      const bool by_tensor = o.tensor != nullptr;
      if (by_tensor == (o.layer != -1)) {
        return SetError(TINYAI_ERR_INVALID_ARGUMENT,
                        "tinyaiApplyMixedPrecision: overrides[%zu] names %s; give a block (layer >= 0, tensor NULL) "
                        "or a tensor (tensor set, layer -1)", i, by_tensor ? "both a tensor and a layer" : "neither a tensor nor a block");
      }
      if (!by_tensor) {
        if (o.layer < 0 || o.layer >= blocks) {
          return SetError(TINYAI_ERR_INVALID_ARGUMENT,
                          "tinyaiApplyMixedPrecision: overrides[%zu].layer is %d; '%s' has transformer blocks 0..%d", i,
                          o.layer, src, blocks - 1);
        }
        if (pass != 0) continue;
        for (size_t t = 0; t < tensors.size(); ++t) {
          const tmai::LayerEntry& l = layers[tensors[t].layer];
          if (l.kind == TINYAI_LAYER_TRANSFORMER && l.block_index == o.layer && tensors[t].ndims == 2) {
            chosen[t] = static_cast<int8_t>(o.precision);
          }
        }
        continue;
      }
      const int32_t t = reader.FindTensor(o.tensor);
      if (t < 0) {
        return SetError(TINYAI_ERR_NOT_FOUND, "tinyaiApplyMixedPrecision: overrides[%zu] names tensor '%s'; '%s' has "
                        "no tensor of that name", i, o.tensor, src);
      }
      if (pass == 1) chosen[static_cast<size_t>(t)] = static_cast<int8_t>(o.precision);
    }
  }
  for (size_t t = 0; t < tensors.size(); ++t) {
    const tmai::TensorEntry& e = tensors[t];
    const TinyAIPrecision p = static_cast<TinyAIPrecision>(chosen[t]);
    int32_t want = p == TINYAI_PREC_AS_STORED ? e.dtype : PrecisionDType(p);
    // A K-quant's blocks hold 256 values: rows that are not whole blocks
    // take llama.cpp's fallback (llama_tensor_get_type), which the report
    // of what each tensor became then shows.
    if (IsSuperBlockDType(want) && want != e.dtype && e.ndims == 2 && !RowFits(want, e.shape[1])) {
      want = want == TINYAI_DTYPE_Q4_K ? TINYAI_DTYPE_Q5_G32
             : want == TINYAI_DTYPE_Q5_K ? TINYAI_DTYPE_Q5M_G32 : TINYAI_DTYPE_Q8_G32;
    }
    out[t] = static_cast<uint8_t>(want);
    if (want == e.dtype) continue;
    const char* from = tinyaiDTypeName(static_cast<TinyAIDType>(e.dtype));
    const char* to = tinyaiDTypeName(static_cast<TinyAIDType>(want));
    if (e.ndims != 2) {
      return SetError(TINYAI_ERR_UNSUPPORTED, "tinyaiApplyMixedPrecision: '%s' tensor '%s' is not a matrix (%u dims); "
                      "only matrices change precision", src, e.name, static_cast<unsigned>(e.ndims));
    }
    if (IsGroupedDType(e.dtype) && IsGroupedDType(want)) {
      return SetError(TINYAI_ERR_UNSUPPORTED, "tinyaiApplyMixedPrecision: '%s' tensor '%s' is stored %s already; "
                      "quantizing it again to %s would round it twice, so TinyAI refuses: quantize the fp32 or fp16 "
                      "model instead (or keep it: TINYAI_PREC_AS_STORED)", src, e.name, from, to);
    }
    if (e.dtype != TINYAI_DTYPE_F32 && e.dtype != TINYAI_DTYPE_F16 && !IsGroupedDType(e.dtype)) {
      return SetError(TINYAI_ERR_UNSUPPORTED, "tinyaiApplyMixedPrecision: '%s' tensor '%s' is %s, which cannot be "
                      "converted", src, e.name, from);
    }
    if (e.codec != TINYAI_CODEC_NONE) {
      return SetError(TINYAI_ERR_UNSUPPORTED, "tinyaiApplyMixedPrecision: '%s' tensor '%s' is %s-compressed; convert "
                      "it to %s from an uncompressed copy (tinyai-convert --compress none)", src, e.name,
                      tinyaiCodecName(static_cast<TinyAICodec>(e.codec)), to);
    }
  }
  TINYAI_RETURN_IF_ERROR(dtypes->Allocate(tensors.size(), "tensor dtypes"));
  std::memcpy(dtypes->data(), out.data(), tensors.size());
  return TINYAI_OK;
}

TinyAIStatus CurrentPlan(const TmaiReader& reader, const uint8_t* scores, Array<TensorPlan>* plan) {
  const auto tensors = reader.tensors();
  TINYAI_RETURN_IF_ERROR(plan->Allocate(tensors.size(), "tensor plan"));
  for (size_t t = 0; t < tensors.size(); ++t) {
    const tmai::TensorEntry& e = tensors[t];
    TensorPlan& p = (*plan)[t];
    p = TensorPlan();
    p.dtype = e.dtype;
    if (tmai::IsBlockSparse(e)) {
      p.block = static_cast<uint8_t>(e.shape[2]);
      p.kept = e.shape[3];
      p.score = scores ? scores[t] : 0;
    }
  }
  return TINYAI_OK;
}

TinyAIStatus LayoutDirectory(const TmaiReader& reader, const TensorPlan* plan, Array<tmai::LayerEntry>* layers,
                             Array<tmai::TensorEntry>* tensors) {
  const auto file_layers = reader.file_layers();
  const auto file_tensors = reader.file_tensors();
  TINYAI_RETURN_IF_ERROR(layers->Allocate(file_layers.size(), "layer directory"));
  TINYAI_RETURN_IF_ERROR(tensors->Allocate(file_tensors.size(), "tensor directory"));
  std::memcpy(layers->data(), file_layers.data(), file_layers.size() * sizeof(tmai::LayerEntry));
  std::memcpy(tensors->data(), file_tensors.data(), file_tensors.size() * sizeof(tmai::TensorEntry));
  auto changes = [&](uint32_t t) {
    const tmai::TensorEntry& f = file_tensors[t];
    const bool sparse = tmai::IsBlockSparse(f);
    return plan[t].dtype != f.dtype || (!sparse && plan[t].block != 0);
  };
  for (size_t li = 0; li < file_layers.size(); ++li) {
    tmai::LayerEntry& l = (*layers)[li];
    bool changed = false;
    for (uint32_t t = l.first_tensor; t < l.first_tensor + l.tensor_count; ++t) changed |= changes(t);
    if (!changed) continue;
    uint64_t end = 0;
    for (uint32_t t = l.first_tensor; t < l.first_tensor + l.tensor_count; ++t) {
      tmai::TensorEntry& e = (*tensors)[t];
      bool overflow = false;
      uint64_t bytes = 0;
      if (plan[t].block != 0 && !tmai::IsBlockSparse(e)) {
        e.flags |= kTensorFlagBlockSparse;
        e.shape[2] = plan[t].block;
        e.shape[3] = plan[t].kept;
      }
      e.dtype = plan[t].dtype;
      SparseLayout sparse;
      if (tmai::IsBlockSparse(e)) {
        if (!tmai::SparseLayoutOf(e, &sparse)) {
          return SetError(TINYAI_ERR_INVALID_ARGUMENT, "'%s': tensor '%s' has no block-sparse layout as %s in blocks "
                          "of %llu keeping %llu a band", reader.source(), e.name,
                          tinyaiDTypeName(static_cast<TinyAIDType>(e.dtype)), static_cast<unsigned long long>(e.shape[2]),
                          static_cast<unsigned long long>(e.shape[3]));
        }
        bytes = sparse.bytes();
      } else {
        bytes = tmai::DecodedBytes(e.dtype, e.shape, e.ndims, &overflow);
      }
      if (overflow || bytes == 0) {
        return SetError(TINYAI_ERR_OVERFLOW, "'%s': tensor '%s' has no size as %s", reader.source(), e.name,
                        tinyaiDTypeName(static_cast<TinyAIDType>(e.dtype)));
      }
      e.decoded_offset = AlignUp(end, tmai::kDataAlignment);
      e.decoded_size = bytes;
      end = e.decoded_offset + bytes;
    }
    l.decoded_size = end;
  }
  return TINYAI_OK;
}

}  // namespace tinyai
