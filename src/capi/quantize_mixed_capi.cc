// extern "C" shims of <tinyai/utils/quantize_mixed.h>: argument checks, then
// loader/precision_plan.h (what each tensor becomes), the loader (running
// it so) and model/save_model.h (writing it out).
#include <cstdio>
#include <cstring>

#include "capi/calibrate.h"
#include "capi/handles.h"
#include "capi/llm_internal.h"
#include "common/array.h"
#include "common/format.h"
#include "common/status.h"
#include "common/struct_size.h"
#include "loader/mapped_model.h"
#include "loader/precision_plan.h"
#include "model/save_model.h"
#include "quant/prune.h"
#include "port/port.h"
#include "tinyai/utils/quantize_mixed.h"

using tinyai::SetError;
using tinyai::capi::CheckModel;

namespace {

TinyAIStatus ReadSaveOptions(const TinyAISaveOptions* in, TinyAISaveOptions* out, const char* call) {
  *out = tinyaiCreateDefaultSaveOptions();
  TINYAI_RETURN_IF_ERROR(tinyai::ReadVersioned(in, out, TINYAI_STRUCT_MIN(TinyAISaveOptions, progress), call));
  if (out->threads < 0 || out->threads > 256) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "%s.threads is %d; allowed 0 (one per core) .. 256", call,
                    out->threads);
  }
  return TINYAI_OK;
}

struct FileSink {
  tinyai::port::File file;
  const char* name;
  TinyAIStatus status = TINYAI_OK;
  char message[256] = "";  // the port's error, which says more than the callback's
};

// TinyAIWriteCallback over a port file; the port's error is kept for the caller.
int WriteFile(void* user, uint64_t offset, const void* data, size_t size) {
  FileSink* f = static_cast<FileSink*>(user);
  f->status = tinyai::port::WriteAt(f->file, offset, data, size, f->name);
  if (f->status == TINYAI_OK) return 0;
  tinyai::Format(f->message, sizeof f->message, "%s", tinyaiGetLastErrorMessage());
  return 1;
}

}  // namespace

extern "C" {

const char* tinyaiPrecisionName(TinyAIPrecision precision) {
  switch (precision) {
    case TINYAI_PREC_FP32: return "fp32";
    case TINYAI_PREC_FP16: return "fp16";
    case TINYAI_PREC_INT8: return "int8";
    case TINYAI_PREC_INT4: return "int4";
    case TINYAI_PREC_INT4_SYMMETRIC: return "int4-sym";
    case TINYAI_PREC_AS_STORED: return "keep";
    case TINYAI_PREC_Q4_K: return "q4_k";
    case TINYAI_PREC_Q5_K: return "q5_k";
    case TINYAI_PREC_Q6_K: return "q6_k";
    case TINYAI_PREC_Q5_0: return "q5_0";
    case TINYAI_PREC_Q5_1: return "q5_1";
    default: return "unknown";
  }
}

TinyAIStatus tinyaiParsePrecision(const char* name, TinyAIPrecision* out) {
  if (!name || !out) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "tinyaiParsePrecision: %s is NULL", !name ? "name" : "out");
  }
  char lower[16] = {};
  for (size_t i = 0; name[i] != '\0'; ++i) {
    if (i + 1 >= sizeof lower) {
      lower[0] = '\0';
      break;
    }
    lower[i] = static_cast<char>(name[i] >= 'A' && name[i] <= 'Z' ? name[i] - 'A' + 'a' : name[i]);
  }
  for (int p = TINYAI_PREC_FP32; p <= TINYAI_PREC_Q5_1; ++p) {
    if (std::strcmp(lower, tinyaiPrecisionName(static_cast<TinyAIPrecision>(p))) == 0) {
      *out = static_cast<TinyAIPrecision>(p);
      return TINYAI_OK;
    }
  }
  // GGUF's names for the same formats.
  static const struct {
    const char* name;
    TinyAIPrecision p;
  } kAliases[] = {{"f32", TINYAI_PREC_FP32},  {"f16", TINYAI_PREC_FP16},  {"q8_0", TINYAI_PREC_INT8},
                  {"iq4_nl", TINYAI_PREC_INT4}, {"q4_0", TINYAI_PREC_INT4_SYMMETRIC}};
  for (const auto& a : kAliases) {
    if (std::strcmp(lower, a.name) == 0) {
      *out = a.p;
      return TINYAI_OK;
    }
  }
  return SetError(TINYAI_ERR_INVALID_ARGUMENT,
                  "unknown precision '%s'; use fp32, fp16, int8, int4, int4-sym, q4_k, q5_k, q6_k, q5_0, q5_1 or keep "
                  "(GGUF's f32, f16, q8_0, iq4_nl and q4_0 name fp32, fp16, int8, int4 and int4-sym)", name);
}

TinyAISaveOptions tinyaiCreateDefaultSaveOptions(void) {
  TinyAISaveOptions o;
  std::memset(&o, 0, sizeof o);
  o.structSize = sizeof o;
  o.threads = 1;
  return o;
}

TinyAIStatus tinyaiInitMixedPrecisionConfig(TinyAIMixedPrecisionConfig* config) {
  if (!config) return SetError(TINYAI_ERR_INVALID_ARGUMENT, "tinyaiInitMixedPrecisionConfig: config is NULL");
  *config = tinyai::DefaultMixedPrecisionConfig();
  return TINYAI_OK;
}

TinyAIStatus tinyaiApplyMixedPrecision(TinyAIMappedModel* model, const TinyAIMixedPrecisionConfig* config) {
  TINYAI_RETURN_IF_ERROR(CheckModel(model, "tinyaiApplyMixedPrecision"));
  if (!config) return SetError(TINYAI_ERR_INVALID_ARGUMENT, "tinyaiApplyMixedPrecision: config is NULL");
  TinyAIMixedPrecisionConfig cfg = tinyai::DefaultMixedPrecisionConfig();
  TINYAI_RETURN_IF_ERROR(tinyai::ReadVersioned(config, &cfg,
                                               TINYAI_STRUCT_MIN(TinyAIMixedPrecisionConfig, embeddingPrecision),
                                               "tinyaiApplyMixedPrecision: config"));
  tinyai::Array<uint8_t> dtypes;
  TINYAI_RETURN_IF_ERROR(tinyai::ResolveDTypes(model->reader(), cfg, &dtypes));
  if (cfg.calibrationTokens < 0) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "tinyaiApplyMixedPrecision: calibrationTokens is %d; 0 (none) or more",
                    cfg.calibrationTokens);
  }
  if (cfg.calibrationErrorFeedback != 0 && cfg.calibrationErrorFeedback != 1) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "tinyaiApplyMixedPrecision: calibrationErrorFeedback is %d; 0 or 1",
                    cfg.calibrationErrorFeedback);
  }
  // The pruning applied stays (the kept values take the new precisions).
  tinyai::Array<tinyai::TensorPlan> plan;
  TINYAI_RETURN_IF_ERROR(model->CurrentPlan(&plan));
  bool measured = false, feedback = false;  // pruning that chose its blocks by a calibration
  for (size_t t = 0; t < plan.size(); ++t) {
    plan[t].dtype = dtypes[t];
    const int32_t score = model->PruneScoreOf(static_cast<int32_t>(t));
    measured |= score == static_cast<int32_t>(tinyai::quant::PruneScore::kActivation) ||
                score == static_cast<int32_t>(tinyai::quant::PruneScore::kSparseGpt);
    feedback |= score == static_cast<int32_t>(tinyai::quant::PruneScore::kSparseGpt);
  }
  if (cfg.calibrationTokens == 0) {
    // Without a calibration of its own the model rounds plainly, unless its
    // pruning needs the one it has (which then weights the rounding too).
    if (measured) return model->ApplyPlan(plan.data(), nullptr, nullptr, /*keep_calibration=*/true);
    TinyAIMappedModel::Calibration none;
    return model->ApplyPlan(plan.data(), &none);
  }
  tinyai::capi::CalibrationRequest request;
  request.tokens = cfg.calibrationTokens;
  request.text = cfg.calibrationText;
  request.seed = cfg.calibrationSeed;
  request.feedback = cfg.calibrationErrorFeedback != 0 || feedback;
  request.call = "tinyaiApplyMixedPrecision";
  return tinyai::capi::CalibrateAndApply(model, request, plan.data(), "set calibrationTokens to 0");
}

TinyAIStatus tinyaiGetTensorPrecision(const TinyAIMappedModel* model, int tensorIndex, TinyAIPrecision* out) {
  TINYAI_RETURN_IF_ERROR(CheckModel(model, "tinyaiGetTensorPrecision"));
  if (!out) return SetError(TINYAI_ERR_INVALID_ARGUMENT, "tinyaiGetTensorPrecision: out is NULL");
  const auto tensors = model->reader().tensors();
  if (tensorIndex < 0 || static_cast<size_t>(tensorIndex) >= tensors.size()) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "tinyaiGetTensorPrecision: tensor %d is out of range (the model "
                    "has %zu)", tensorIndex, tensors.size());
  }
  *out = tinyai::DTypePrecision(tensors[static_cast<size_t>(tensorIndex)].dtype);
  return TINYAI_OK;
}

TinyAIStatus tinyaiGetSavedModelSize(const TinyAIMappedModel* model, uint64_t* size) {
  TINYAI_RETURN_IF_ERROR(CheckModel(model, "tinyaiGetSavedModelSize"));
  if (!size) return SetError(TINYAI_ERR_INVALID_ARGUMENT, "tinyaiGetSavedModelSize: size is NULL");
  *size = tinyai::SavedModelSize(*model);
  return TINYAI_OK;
}

TinyAIStatus tinyaiSaveMappedModelTo(TinyAIMappedModel* model, TinyAIWriteCallback write, void* user,
                                     const TinyAISaveOptions* options) {
  TINYAI_RETURN_IF_ERROR(CheckModel(model, "tinyaiSaveMappedModelTo"));
  if (!write) return SetError(TINYAI_ERR_INVALID_ARGUMENT, "tinyaiSaveMappedModelTo: write is NULL");
  TinyAISaveOptions opt;
  TINYAI_RETURN_IF_ERROR(ReadSaveOptions(options, &opt, "tinyaiSaveMappedModelTo: options"));
  return tinyai::SaveModel(model, write, user, "<write callback>", opt);
}

TinyAIStatus tinyaiSaveMappedModel(TinyAIMappedModel* model, const char* path, const TinyAISaveOptions* options) {
  TINYAI_RETURN_IF_ERROR(CheckModel(model, "tinyaiSaveMappedModel"));
  if (!path || path[0] == '\0') {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "tinyaiSaveMappedModel: path is %s", path ? "empty" : "NULL");
  }
  TinyAISaveOptions opt;
  TINYAI_RETURN_IF_ERROR(ReadSaveOptions(options, &opt, "tinyaiSaveMappedModel: options"));
  if (model->source().IsFile(path)) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "tinyaiSaveMappedModel: '%s' is the model's own file; save to "
                    "another path", path);
  }
  FileSink sink;
  sink.name = path;
  tinyai::port::OutputFile out;
  TINYAI_RETURN_IF_ERROR(tinyai::port::BeginOutput(path, &out));
  sink.file = out.file;
  TinyAIStatus s = tinyai::SaveModel(model, &WriteFile, &sink, path, opt);
  if (s != TINYAI_OK) {
    tinyai::port::AbortOutput(&out);
    if (sink.status != TINYAI_OK) return SetError(sink.status, "%s", sink.message);
    return s;
  }
  return tinyai::port::CommitOutput(&out);
}

}  // extern "C"
