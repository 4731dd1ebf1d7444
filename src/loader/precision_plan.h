// <tinyai/utils/quantize_mixed.h> resolved against a model: the dtype each
// tensor runs at, and the directory (decoded layout) that gives. Pure
// functions of the file's directory and the config; the loader applies the
// result (TinyAIMappedModel::ApplyDTypes).
#ifndef TINYAI_LOADER_PRECISION_PLAN_H_
#define TINYAI_LOADER_PRECISION_PLAN_H_

#include <cstdint>

#include "common/array.h"
#include "format/tmai_reader.h"
#include "tinyai/utils/quantize_mixed.h"

namespace tinyai {

// The config tinyaiInitMixedPrecisionConfig gives.
TinyAIMixedPrecisionConfig DefaultMixedPrecisionConfig();

// The dtype a precision stores (-1 for TINYAI_PREC_AS_STORED and values
// outside the enum).
int32_t PrecisionDType(TinyAIPrecision p);
// The precision a dtype is (TINYAI_PREC_AS_STORED for an unknown dtype).
TinyAIPrecision DTypePrecision(int32_t dtype);

// dtypes[t] (one per tensor of reader's file directory) = the dtype tensor t
// runs at under config. Errors as tinyaiApplyMixedPrecision documents (the
// message names the field, override or tensor); dtypes is unchanged then.
TinyAIStatus ResolveDTypes(const TmaiReader& reader, const TinyAIMixedPrecisionConfig& config, Array<uint8_t>* dtypes);

// What one tensor runs as: its dtype and, when it is pruned as it loads,
// its blocks (common/sparse.h). A tensor the file stores block-sparse keeps
// its blocks (block and kept are the file's) and may change only its dtype.
struct TensorPlan {
  uint8_t dtype = 0;
  uint8_t block = 0;  // 0: dense; else block-sparse in blocks of `block`
  uint8_t score = 0;  // how its blocks are chosen (quant::PruneScore), when the file stores it dense
  uint64_t kept = 0;  // blocks kept a band
};

// The plan of every tensor as reader's current directory runs it (scores
// from scores[t], 0 where null).
TinyAIStatus CurrentPlan(const TmaiReader& reader, const uint8_t* scores, Array<TensorPlan>* plan);

// The runtime directory for plan: the file's entries, with each changed
// tensor's dtype, block-sparse fields (flags, shape[2..3]) and decoded size,
// and the decoded layout of every layer holding one laid out again (each
// tensor 64-aligned after the previous, as the writer lays them out).
// Stored offsets, sizes, codecs and checksums stay the file's. A layer
// without a changed tensor is the file's entry.
TinyAIStatus LayoutDirectory(const TmaiReader& reader, const TensorPlan* plan, Array<tmai::LayerEntry>* layers,
                             Array<tmai::TensorEntry>* tensors);

}  // namespace tinyai

#endif  // TINYAI_LOADER_PRECISION_PLAN_H_
