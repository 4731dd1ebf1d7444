// Calibration: what the inputs of each weight matrix look like, measured by
// running the model (as its file stores it: the caller resets it) over a
// stream of tokens. Shared by tinyaiApplyMixedPrecision (rounding) and
// tinyaiPruneModel (choosing blocks).
#ifndef TINYAI_CAPI_CALIBRATE_H_
#define TINYAI_CAPI_CALIBRATE_H_

#include <cstdint>

#include "loader/mapped_model.h"
#include "tinyai/status.h"

namespace tinyai {
namespace capi {

struct CalibrationRequest {
  int32_t tokens = 0;          // positions to run (> 0)
  const char* text = nullptr;  // their text, or null for a stream the model samples itself
  uint64_t seed = 7;           // of that stream
  bool feedback = false;       // also the inputs' second moments (error feedback, SparseGPT)
  const char* call = "";       // the public call, for messages
};

// Fills *c: per slot (an input: the tensors one product reads share one),
// the mean square of each column's inputs plus 10% of their mean (so that
// no column is ignored) and, with feedback, quant::InverseFactor of their
// second moment. Language models only (the caller checks).
TinyAIStatus Calibrate(TinyAIMappedModel* model, const CalibrationRequest& request, TinyAIMappedModel::Calibration* c);

// Measures on the model as its file stores it (its plan set aside), then
// runs plan with what was measured. TINYAI_ERR_UNSUPPORTED naming
// request.call for a model that is not a language model (what_for says
// what the caller may do instead). On failure the model is put back as it
// was, with the calibration it had, and the first error kept.
TinyAIStatus CalibrateAndApply(TinyAIMappedModel* model, const CalibrationRequest& request, const TensorPlan* plan,
                               const char* what_for);

}  // namespace capi
}  // namespace tinyai

#endif  // TINYAI_CAPI_CALIBRATE_H_
