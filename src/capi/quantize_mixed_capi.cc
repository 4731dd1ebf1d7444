// extern "C" shims of <tinyai/utils/quantize_mixed.h>: argument checks, then
// loader/precision_plan.h (what each tensor becomes), the loader (running
// it so) and loader/save_model.h (writing it out).
#include <cstdio>
#include <cstring>

#include "common/array.h"
#include "common/status.h"
#include "common/struct_size.h"
#include "loader/mapped_model.h"
#include "loader/save_model.h"
#include "port/port.h"
#include "loader/precision_plan.h"
#include "tinyai/utils/quantize_mixed.h"

using tinyai::SetError;

namespace {

TinyAIStatus CheckModel(const TinyAIMappedModel* model, const char* call) {
  if (!model) return SetError(TINYAI_ERR_INVALID_ARGUMENT, "%s: model is NULL", call);
  if (!TinyAIMappedModel::IsOpen(model)) {
    return SetError(TINYAI_ERR_MISUSE, "%s: %p is not an open model (closed already?)", call,
                    static_cast<const void*>(model));
  }
  return TINYAI_OK;
}

TinyAIStatus ReadSaveOptions(const TinyAISaveOptions* in, TinyAISaveOptions* out, const char* call) {
  std::memset(out, 0, sizeof *out);
  out->structSize = sizeof *out;
  return tinyai::ReadVersioned(in, out, TINYAI_STRUCT_MIN(TinyAISaveOptions, progress), call);
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
  std::snprintf(f->message, sizeof f->message, "%s", tinyaiGetLastErrorMessage());
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
    default: return "unknown";
  }
}

TinyAIStatus tinyaiParsePrecision(const char* name, TinyAIPrecision* out) {
  if (!name || !out) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "tinyaiParsePrecision: %s is NULL", !name ? "name" : "out");
  }
  for (int p = TINYAI_PREC_FP32; p <= TINYAI_PREC_AS_STORED; ++p) {
    if (std::strcmp(name, tinyaiPrecisionName(static_cast<TinyAIPrecision>(p))) == 0) {
      *out = static_cast<TinyAIPrecision>(p);
      return TINYAI_OK;
    }
  }
  return SetError(TINYAI_ERR_INVALID_ARGUMENT,
                  "unknown precision '%s'; use fp32, fp16, int8, int4, int4-sym or keep", name);
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
  return model->ApplyDTypes(dtypes.data());
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
  const size_t n = std::strlen(path);
  tinyai::Array<char> part;
  TINYAI_RETURN_IF_ERROR(part.Allocate(n + 6, "output path"));
  std::memcpy(part.data(), path, n);
  std::memcpy(part.data() + n, ".part", 6);
  FileSink sink;
  sink.name = part.data();
  TINYAI_RETURN_IF_ERROR(tinyai::port::CreateOutputFile(part.data(), &sink.file));
  TinyAIStatus s = tinyai::SaveModel(model, &WriteFile, &sink, path, opt);
  if (s != TINYAI_OK) {
    tinyai::port::AbortOutputFile(&sink.file, part.data());
    if (sink.status != TINYAI_OK) return SetError(sink.status, "%s", sink.message);
    return s;
  }
  return tinyai::port::CommitOutputFile(&sink.file, part.data(), path);
}

}  // extern "C"
