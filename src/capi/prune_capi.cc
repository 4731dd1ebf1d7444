// extern "C" shims of <tinyai/utils/prune.h>: argument checks, then the
// plan (which matrices lose how many blocks), calibration where the method
// measures, and the loader (running the model pruned as it loads).
#include <cmath>
#include <cstdio>
#include <cstring>

#include "capi/calibrate.h"
#include "capi/handles.h"
#include "common/array.h"
#include "common/format.h"
#include "common/sparse.h"
#include "common/status.h"
#include "common/struct_size.h"
#include "loader/mapped_model.h"
#include "loader/precision_plan.h"
#include "quant/prune.h"
#include "tinyai/utils/prune.h"

using tinyai::SetError;
using tinyai::capi::CheckModel;

namespace {

constexpr const char kCall[] = "tinyaiPruneModel";

TinyAIPruneConfig DefaultPruneConfig() {
  TinyAIPruneConfig c;
  std::memset(&c, 0, sizeof c);
  c.structSize = sizeof c;
  c.method = TINYAI_PRUNE_MAGNITUDE;
  c.sparsity = 0.5;
  c.blockSize = 4;
  for (double& s : c.layerSparsity) s = -1.0;
  c.pruneOutput = 0;
  c.calibrationTokens = 2048;
  c.calibrationText = nullptr;
  c.calibrationSeed = 7;
  return c;
}

bool Prunable(int32_t role) {
  switch (role) {
    case TINYAI_ROLE_ATTN_Q:
    case TINYAI_ROLE_ATTN_K:
    case TINYAI_ROLE_ATTN_V:
    case TINYAI_ROLE_ATTN_OUT:
    case TINYAI_ROLE_FFN_GATE:
    case TINYAI_ROLE_FFN_DOWN:
    case TINYAI_ROLE_FFN_UP:
    case TINYAI_ROLE_DENSE_WEIGHT: return true;
    default: return false;
  }
}

TinyAIStatus CheckSparsity(double s, const char* what) {
  if (!(s >= 0.0 && s < 1.0)) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "%s: %s is %g; the share of blocks removed is in [0, 1) (0.5 removes "
                    "half)", kCall, what, s);
  }
  return TINYAI_OK;
}

// The index layerSparsity uses for each tensor: its transformer block, or
// for a dense network the weight matrix's place among the model's dense
// weights; -1 for a tensor outside both. *count: how many indices there are.
TinyAIStatus LayerIndices(const tinyai::TmaiReader& r, tinyai::Array<int32_t>* index, int32_t* count) {
  const auto file = r.file_tensors();
  TINYAI_RETURN_IF_ERROR(index->Allocate(file.size(), "layer indices"));
  int32_t dense = 0;
  *count = 0;
  for (size_t t = 0; t < file.size(); ++t) {
    const tinyai::tmai::LayerEntry& l = r.file_layers()[file[t].layer];
    int32_t i = -1;
    if (l.kind == TINYAI_LAYER_TRANSFORMER) i = l.block_index;
    else if (file[t].role == TINYAI_ROLE_DENSE_WEIGHT) i = dense++;
    (*index)[t] = i;
    if (i + 1 > *count) *count = i + 1;
  }
  return TINYAI_OK;
}

// The plan tinyaiPruneModel makes of cfg: every prunable matrix's blocks,
// the dtypes applied kept. Errors name the field or tensor.
TinyAIStatus MakePlan(const TinyAIMappedModel& model, const TinyAIPruneConfig& cfg,
                      tinyai::Array<tinyai::TensorPlan>* plan) {
  const tinyai::TmaiReader& r = model.reader();
  const char* src = r.source();
  TINYAI_RETURN_IF_ERROR(model.CurrentPlan(plan));
  const auto file = r.file_tensors();
  tinyai::Array<int32_t> index;
  int32_t layers = 0;
  TINYAI_RETURN_IF_ERROR(LayerIndices(r, &index, &layers));
  for (int32_t i = 0; i < TINYAI_PRUNE_MAX_LAYERS; ++i) {
    const double s = cfg.layerSparsity[i];
    if (s < 0.0) continue;
    char what[40];
    tinyai::Format(what, sizeof what, "layerSparsity[%d]", i);
    TINYAI_RETURN_IF_ERROR(CheckSparsity(s, what));
    if (i >= layers) {
      return SetError(TINYAI_ERR_INVALID_ARGUMENT, "%s: layerSparsity[%d] is set (%g) but '%s' has %d prunable "
                      "layers (0..%d); leave the others negative", kCall, i, s, src, layers, layers - 1);
    }
  }
  for (size_t t = 0; t < file.size(); ++t) {
    const tinyai::tmai::TensorEntry& f = file[t];
    tinyai::TensorPlan& p = (*plan)[t];
    const int32_t i = index[t];
    const bool classifier = f.role == TINYAI_ROLE_CLASSIFIER && cfg.pruneOutput != 0;
    const bool candidate = f.ndims == 2 && (classifier || (Prunable(f.role) && i >= 0));
    const double s = i >= 0 && i < TINYAI_PRUNE_MAX_LAYERS && cfg.layerSparsity[i] >= 0.0 ? cfg.layerSparsity[i]
                                                                                             : cfg.sparsity;
    if (tinyai::tmai::IsBlockSparse(f)) {  // keeps its blocks, unless asked to lose more
      if (candidate && s > 0.0) {
        return SetError(TINYAI_ERR_UNSUPPORTED, "%s: '%s' tensor '%s' is stored pruned already (%llu of %llu blocks "
                        "of %llu kept a band); TinyAI does not prune twice: prune the dense model instead, or give "
                        "its layer sparsity 0 to keep it as stored", kCall, src, f.name,
                        static_cast<unsigned long long>(f.shape[3]),
                        static_cast<unsigned long long>((f.shape[1] + f.shape[2] - 1) / f.shape[2]),
                        static_cast<unsigned long long>(f.shape[2]));
      }
      continue;
    }
    p.block = 0;
    p.kept = 0;
    p.score = 0;
    if (!candidate || s == 0.0) continue;
    if (f.dtype != TINYAI_DTYPE_F32 && f.dtype != TINYAI_DTYPE_F16) {
      return SetError(TINYAI_ERR_UNSUPPORTED, "%s: '%s' tensor '%s' is stored %s; pruning it would round its kept "
                      "values again, so TinyAI refuses: prune the fp32 or fp16 model, then quantize the result "
                      "(tinyai-quantize keeps its blocks)", kCall, src, f.name,
                      tinyaiDTypeName(static_cast<TinyAIDType>(f.dtype)));
    }
    if (f.codec != TINYAI_CODEC_NONE) {
      return SetError(TINYAI_ERR_UNSUPPORTED, "%s: '%s' tensor '%s' is %s-compressed; prune an uncompressed copy "
                      "(tinyai-convert --compress none)", kCall, src, f.name,
                      tinyaiCodecName(static_cast<TinyAICodec>(f.codec)));
    }
    const uint64_t block = static_cast<uint64_t>(cfg.blockSize);
    const uint64_t blocks = (f.shape[1] + block - 1) / block;
    const uint64_t removed = static_cast<uint64_t>(std::floor(s * static_cast<double>(blocks) + 0.5));
    p.block = static_cast<uint8_t>(block);
    p.kept = blocks - (removed > blocks ? blocks : removed);
    p.score = static_cast<uint8_t>(cfg.method);
  }
  return TINYAI_OK;
}

bool Measures(TinyAIPruneMethod m) { return m == TINYAI_PRUNE_ACTIVATION || m == TINYAI_PRUNE_SPARSEGPT; }

}  // namespace

extern "C" {

TinyAIStatus tinyaiInitPruneConfig(TinyAIPruneConfig* config) {
  if (!config) return SetError(TINYAI_ERR_INVALID_ARGUMENT, "tinyaiInitPruneConfig: config is NULL");
  *config = DefaultPruneConfig();
  return TINYAI_OK;
}

const char* tinyaiPruneMethodName(TinyAIPruneMethod method) {
  switch (method) {
    case TINYAI_PRUNE_MAGNITUDE: return "magnitude";
    case TINYAI_PRUNE_ACTIVATION: return "activation";
    case TINYAI_PRUNE_SPARSEGPT: return "sparsegpt";
    default: return "unknown";
  }
}

TinyAIStatus tinyaiParsePruneMethod(const char* name, TinyAIPruneMethod* out) {
  if (!name || !out) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "tinyaiParsePruneMethod: %s is NULL", !name ? "name" : "out");
  }
  for (int m = TINYAI_PRUNE_MAGNITUDE; m <= TINYAI_PRUNE_SPARSEGPT; ++m) {
    if (std::strcmp(name, tinyaiPruneMethodName(static_cast<TinyAIPruneMethod>(m))) == 0) {
      *out = static_cast<TinyAIPruneMethod>(m);
      return TINYAI_OK;
    }
  }
  return SetError(TINYAI_ERR_INVALID_ARGUMENT, "unknown pruning method '%s'; use magnitude, activation or sparsegpt",
                  name);
}

TinyAIStatus tinyaiPruneModel(TinyAIMappedModel* model, const TinyAIPruneConfig* config) {
  TINYAI_RETURN_IF_ERROR(CheckModel(model, kCall));
  if (!config) return SetError(TINYAI_ERR_INVALID_ARGUMENT, "%s: config is NULL", kCall);
  TinyAIPruneConfig cfg = DefaultPruneConfig();
  TINYAI_RETURN_IF_ERROR(tinyai::ReadVersioned(config, &cfg, TINYAI_STRUCT_MIN(TinyAIPruneConfig, method),
                                               "tinyaiPruneModel: config"));
  if (cfg.method < TINYAI_PRUNE_MAGNITUDE || cfg.method > TINYAI_PRUNE_SPARSEGPT) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "%s: method is %d; use TINYAI_PRUNE_MAGNITUDE (0), "
                    "TINYAI_PRUNE_ACTIVATION (1) or TINYAI_PRUNE_SPARSEGPT (2)", kCall, static_cast<int>(cfg.method));
  }
  TINYAI_RETURN_IF_ERROR(CheckSparsity(cfg.sparsity, "sparsity"));
  if (cfg.blockSize <= 0) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "%s: blockSize is %d; blocks are B x B weights with B 1 "
                    "(unstructured), 2, 4, 8, 16 or 32", kCall, cfg.blockSize);
  }
  if (!tinyai::IsSparseBlock(static_cast<uint64_t>(cfg.blockSize))) {
    return SetError(TINYAI_ERR_UNSUPPORTED, "%s: blockSize is %d; no kernel multiplies %dx%d blocks: use 1 "
                    "(unstructured), 2, 4, 8, 16 or 32", kCall, cfg.blockSize, cfg.blockSize, cfg.blockSize);
  }
  if (cfg.calibrationTokens < 0 || (Measures(cfg.method) && cfg.calibrationTokens == 0)) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "%s: calibrationTokens is %d; the %s method measures the inputs "
                    "over 1 or more positions (2048 pays)", kCall, cfg.calibrationTokens,
                    tinyaiPruneMethodName(cfg.method));
  }
  tinyai::Array<tinyai::TensorPlan> plan;
  TINYAI_RETURN_IF_ERROR(MakePlan(*model, cfg, &plan));
  if (!Measures(cfg.method)) return model->ApplyPlan(plan.data(), nullptr, nullptr, /*keep_calibration=*/true);
  tinyai::capi::CalibrationRequest request;
  request.tokens = cfg.calibrationTokens;
  request.text = cfg.calibrationText;
  request.seed = cfg.calibrationSeed;
  request.feedback = cfg.method == TINYAI_PRUNE_SPARSEGPT;
  request.call = kCall;
  return tinyai::capi::CalibrateAndApply(model, request, plan.data(), "use TINYAI_PRUNE_MAGNITUDE");
}

TinyAIStatus tinyaiGetTensorSparsity(const TinyAIMappedModel* model, int tensorIndex, TinyAITensorSparsity* out) {
  TINYAI_RETURN_IF_ERROR(CheckModel(model, "tinyaiGetTensorSparsity"));
  if (!out) return SetError(TINYAI_ERR_INVALID_ARGUMENT, "tinyaiGetTensorSparsity: out is NULL");
  TINYAI_RETURN_IF_ERROR(tinyai::CheckOutputSize(out, TINYAI_STRUCT_MIN(TinyAITensorSparsity, blockSize),
                                                 "tinyaiGetTensorSparsity: out"));
  const auto tensors = model->reader().tensors();
  if (tensorIndex < 0 || static_cast<size_t>(tensorIndex) >= tensors.size()) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "tinyaiGetTensorSparsity: tensor %d is out of range (the model has "
                    "%zu)", tensorIndex, tensors.size());
  }
  const tinyai::tmai::TensorEntry& e = tensors[static_cast<size_t>(tensorIndex)];
  TinyAITensorSparsity info;
  std::memset(&info, 0, sizeof info);
  info.structSize = sizeof info;
  info.bytes = e.decoded_size;
  info.denseBytes = e.decoded_size;
  tinyai::SparseLayout s;
  if (tinyai::tmai::SparseLayoutOf(e, &s)) {
    bool overflow = false;
    info.blockSize = static_cast<int32_t>(s.block);
    info.keptBlocks = s.kept;
    info.blocksPerBand = s.blocks;
    info.sparsity = 1.0 - static_cast<double>(s.kept) / static_cast<double>(s.blocks);
    info.denseBytes = tinyai::tmai::DecodedBytes(e.dtype, e.shape, 2, &overflow);
  }
  tinyai::WriteVersioned(info, out);
  return TINYAI_OK;
}

size_t tinyaiCalculatePruningSavings(const TinyAIMappedModel* model) {
  if (CheckModel(model, "tinyaiCalculatePruningSavings") != TINYAI_OK) return 0;
  // The saved file laid out twice, as tinyaiSaveMappedModel lays it out
  // (each tensor 64-aligned in its layer, each layer on the file's group
  // alignment): with the tensors as they run, and with every block-sparse
  // one dense at its dtype.
  const tinyai::TmaiReader& r = model->reader();
  const uint64_t align = r.header().group_alignment;
  uint64_t pruned = 0, dense = 0;
  for (const tinyai::tmai::LayerEntry& l : r.layers()) {
    uint64_t end_pruned = 0, end_dense = 0;
    for (uint32_t t = l.first_tensor; t < l.first_tensor + l.tensor_count; ++t) {
      const tinyai::tmai::TensorEntry& e = r.tensors()[t];
      uint64_t bytes = e.decoded_size;
      tinyai::SparseLayout s;
      if (tinyai::tmai::SparseLayoutOf(e, &s)) {
        bool overflow = false;
        bytes = tinyai::tmai::DecodedBytes(e.dtype, e.shape, 2, &overflow);
      }
      end_pruned = tinyai::AlignUp(end_pruned, tinyai::tmai::kDataAlignment) + e.decoded_size;
      end_dense = tinyai::AlignUp(end_dense, tinyai::tmai::kDataAlignment) + bytes;
    }
    pruned = tinyai::AlignUp(pruned, align) + end_pruned;
    dense = tinyai::AlignUp(dense, align) + end_dense;
  }
  const uint64_t saved = dense > pruned ? dense - pruned : 0;
  return saved > SIZE_MAX ? SIZE_MAX : static_cast<size_t>(saved);
}

}  // extern "C"
