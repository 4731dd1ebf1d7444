// Calibration shared by tinyaiApplyMixedPrecision and tinyaiPruneModel: the
// model runs over a stream of tokens while an observer on its weight stream
// sums what each matrix's columns meet.
#include "capi/calibrate.h"

#include <cstdio>
#include <cstring>

#include "capi/llm_internal.h"
#include "common/array.h"
#include "common/format.h"
#include "common/status.h"
#include "quant/hessian.h"
#include "text/sampler.h"
#include "tinyai/llm.h"

using tinyai::SetError;

namespace tinyai {
namespace capi {
namespace {

// Calibration: per distinct input (the tensors one product reads share
// a slot: wq, wk and wv; w1 and w3), the sum of squares of each column's
// inputs and, for error feedback, the sum of their outer products (upper
// triangle; quant::InverseFactor turns it into the factor in place).
struct Observed {
  TinyAIMappedModel::Calibration* c;  // slot_of, importance (sums), factor (outer products)
  tinyai::Array<int32_t> cols;        // per slot
  tinyai::Array<uint64_t> rows;       // per slot: inputs seen
  tinyai::Array<tinyai::Array<double>> sums;
  int32_t slots = 0;
  bool feedback = false;
  TinyAIStatus status = TINYAI_OK;  // an allocation the observer could not make
};

void Observe(void* user, const int32_t* tensors, int count, const float* x, size_t ldx, int32_t cols, int32_t n) {
  Observed* o = static_cast<Observed*>(user);
  if (o->status != TINYAI_OK || count == 0 || n <= 0) return;
  int32_t slot = o->c->slot_of[static_cast<size_t>(tensors[0])];
  if (slot < 0) {
    slot = o->slots++;
    o->cols[static_cast<size_t>(slot)] = cols;
    o->status = o->sums[static_cast<size_t>(slot)].Allocate(static_cast<size_t>(cols), "calibration sums");
    if (o->status == TINYAI_OK && o->feedback) {
      o->status = o->c->factor[static_cast<size_t>(slot)].Allocate(
          static_cast<size_t>(cols) * static_cast<size_t>(cols), "calibration second moments");
    }
    if (o->status != TINYAI_OK) return;
    for (int k = 0; k < count; ++k) {
      if (o->c->slot_of[static_cast<size_t>(tensors[k])] < 0) o->c->slot_of[static_cast<size_t>(tensors[k])] = slot;
    }
  }
  double* s = o->sums[static_cast<size_t>(slot)].data();
  for (int32_t j = 0; j < n; ++j) {
    const float* row = x + static_cast<size_t>(j) * ldx;
    for (int32_t c = 0; c < cols; ++c) s[c] += static_cast<double>(row[c]) * row[c];
  }
  if (o->feedback) {
    tinyai::quant::AccumulateGram(x, ldx, static_cast<size_t>(cols), static_cast<size_t>(n),
                                  o->c->factor[static_cast<size_t>(slot)].data());
  }
  o->rows[static_cast<size_t>(slot)] += static_cast<uint64_t>(n);
}

}  // namespace

constexpr int32_t kCalibrationSequence = 256;

// Runs model (as its file stores it: the caller reset it) over the
// calibration stream and fills *c: per slot, the mean square of each
// column's inputs plus 10% of their mean (so that no column is ignored)
// and, with error feedback, quant::InverseFactor of their second moment.
TinyAIStatus Calibrate(TinyAIMappedModel* model, const CalibrationRequest& cfg, TinyAIMappedModel::Calibration* c) {
  const size_t tensors = model->reader().file_tensors().size();
  Observed o;
  o.c = c;
  o.feedback = cfg.feedback;
  TINYAI_RETURN_IF_ERROR(c->slot_of.Allocate(tensors, "calibration index"));
  TINYAI_RETURN_IF_ERROR(c->importance.Allocate(tensors, "calibration slots"));
  TINYAI_RETURN_IF_ERROR(c->factor.Allocate(tensors, "calibration slots"));
  TINYAI_RETURN_IF_ERROR(o.cols.Allocate(tensors, "calibration slots"));
  TINYAI_RETURN_IF_ERROR(o.rows.Allocate(tensors, "calibration counts"));
  TINYAI_RETURN_IF_ERROR(o.sums.Allocate(tensors, "calibration sums"));
  for (size_t t = 0; t < tensors; ++t) c->slot_of[t] = -1;
  int64_t seq_len = 0;
  TinyAILLMConfig lc = tinyaiCreateDefaultLLMConfig();
  if (tinyaiGetMetadataInt(model, "llama.seq_len", &seq_len) == TINYAI_OK && seq_len > kCalibrationSequence) {
    lc.contextLength = kCalibrationSequence;
  }
  TinyAILLM* llm = nullptr;
  TinyAIStatus s = tinyaiCreateLLM(model, &lc, &llm);
  if (s != TINYAI_OK) return tinyai::AddErrorContext(s, "%s: calibration: ", cfg.call);
  struct Destroy {
    TinyAILLM* llm;
    ~Destroy() { tinyaiDestroyLLM(llm); }
  } destroy{llm};
  TinyAIModelInfo info;
  std::memset(&info, 0, sizeof info);
  info.structSize = sizeof info;
  TINYAI_RETURN_IF_ERROR(tinyaiGetLLMModelInfo(llm, &info));
  tinyai::LLMWeightStream(llm)->SetInputObserver(&Observe, &o);
  tinyai::Array<float> logits;
  TINYAI_RETURN_IF_ERROR(logits.Allocate(static_cast<size_t>(info.vocabSize), "calibration logits"));
  const int32_t context = info.contextLength;
  // Texts as the model takes them (tokenizer.add_bos, add_eos), as
  // generation does: BOS first when it adds BOS, EOS last when it adds EOS.
  const tinyai::TextTokenizer& tok = tinyai::LLMTokenizer(llm);
  const bool bos = tok.add_bos();
  if (cfg.text) {
    int32_t count = 0;
    s = tinyaiLLMTokenize(llm, cfg.text, 1, nullptr, 0, &count);
    if (s != TINYAI_OK && s != TINYAI_ERR_BUFFER_TOO_SMALL) return s;
    tinyai::Array<int32_t> ids;
    TINYAI_RETURN_IF_ERROR(ids.Allocate(static_cast<size_t>(count), "calibration tokens"));
    TINYAI_RETURN_IF_ERROR(tinyaiLLMTokenize(llm, cfg.text, 1, ids.data(), count, &count));
    // The text's tokens are ids[first..count): after BOS, and with the EOS
    // the model ends a text with.
    const size_t first = bos ? 1 : 0;
    if (static_cast<size_t>(count) <= first + (tok.add_eos() ? 1 : 0)) {
      return SetError(TINYAI_ERR_INVALID_ARGUMENT, "%s: calibrationText has no tokens", cfg.call);
    }
    // Windows of the text from its first token (each after BOS when the
    // model adds it), the text repeated if short.
    int32_t done = 0;
    size_t next = first;
    while (done < cfg.tokens) {
      TINYAI_RETURN_IF_ERROR(tinyaiResetLLM(llm));
      if (bos) TINYAI_RETURN_IF_ERROR(tinyaiLLMEval(llm, &info.bosId, 1, nullptr));
      const int32_t window = bos ? context - 1 : context;
      int32_t room = window < cfg.tokens - done ? window : cfg.tokens - done;
      while (room > 0) {
        if (next >= static_cast<size_t>(count)) next = first;
        int32_t n = static_cast<int32_t>(static_cast<size_t>(count) - next);
        if (n > room) n = room;
        // 16 tokens per call: a call computes logits only at its end, and the
        // classifier's statistics take one token of every 16, as when every
        // pass of a longer call computed them.
        if (n > 16) n = 16;
        TINYAI_RETURN_IF_ERROR(tinyaiLLMEval(llm, ids.data() + next, n, nullptr));
        next += static_cast<size_t>(n);
        room -= n;
        done += n;
      }
    }
  } else {
    TinyAISamplerConfig sampler = tinyaiCreateDefaultSamplerConfig();
    sampler.temperature = 1.0f;
    uint64_t rng = cfg.seed;
    // A sampled text starts with BOS when the model adds it; else with a
    // token drawn uniformly from the rest of the vocabulary (there is
    // nothing to sample the first from).
    auto start = [&]() -> int32_t {
      if (bos || info.vocabSize < 2) return info.bosId;
      const uint32_t others = static_cast<uint32_t>(info.vocabSize - 1);
      const int32_t t = static_cast<int32_t>(tinyai::Sampler::RandomU32(&rng) % others);
      return t < info.bosId ? t : t + 1;
    };
    int32_t token = start();
    for (int32_t done = 0; done < cfg.tokens; ++done) {
      // A text ends at the context, or where the model samples BOS.
      if (tinyaiGetLLMPosition(llm) + 1 >= context || (done > 0 && token == info.bosId)) {
        TINYAI_RETURN_IF_ERROR(tinyaiResetLLM(llm));
        token = start();
      }
      TINYAI_RETURN_IF_ERROR(tinyaiLLMEval(llm, &token, 1, logits.data()));
      TINYAI_RETURN_IF_ERROR(tinyaiLLMSample(llm, logits.data(), &sampler, &rng, &token));
    }
  }
  tinyai::LLMWeightStream(llm)->SetInputObserver(nullptr, nullptr);
  TINYAI_RETURN_IF_ERROR(o.status);
  // A tensor is rounded with its slot's statistics only when their widths agree.
  const auto entries = model->reader().file_tensors();
  for (size_t t = 0; t < tensors; ++t) {
    const int32_t k = c->slot_of[t];
    if (k >= 0 && (entries[t].ndims == 0 ||
                   entries[t].shape[entries[t].ndims - 1] != static_cast<uint64_t>(o.cols[static_cast<size_t>(k)]))) {
      c->slot_of[t] = -1;
    }
  }
  size_t largest = 0;
  for (int32_t k = 0; k < o.slots; ++k) {
    const size_t cols = static_cast<size_t>(o.cols[static_cast<size_t>(k)]);
    if (cols > largest) largest = cols;
  }
  tinyai::Array<double> scratch;
  if (o.feedback) TINYAI_RETURN_IF_ERROR(scratch.Allocate(largest * largest, "calibration factorisation"));
  for (int32_t k = 0; k < o.slots; ++k) {
    const size_t cols = static_cast<size_t>(o.cols[static_cast<size_t>(k)]);
    const uint64_t rows = o.rows[static_cast<size_t>(k)];
    const double* sum = o.sums[static_cast<size_t>(k)].data();
    tinyai::Array<float>& importance = c->importance[static_cast<size_t>(k)];
    TINYAI_RETURN_IF_ERROR(importance.Allocate(cols, "calibration"));
    double mean = 0.0;
    for (size_t i = 0; i < cols; ++i) mean += sum[i];
    mean /= static_cast<double>(cols * rows);
    for (size_t i = 0; i < cols; ++i) importance[i] = static_cast<float>(sum[i] / static_cast<double>(rows) + 0.1 * mean);
    if (o.feedback) {
      float* f = c->factor[static_cast<size_t>(k)].data();
      TINYAI_RETURN_IF_ERROR(tinyai::quant::InverseFactor(f, rows, cols, scratch.data(), f));
    }
  }
  return TINYAI_OK;
}

TinyAIStatus CalibrateAndApply(TinyAIMappedModel* model, const CalibrationRequest& request, const TensorPlan* plan,
                               const char* what_for) {
  StringView arch;
  if (model->reader().GetString("general.architecture", &arch) != TINYAI_OK || arch.size != 5 ||
      std::memcmp(arch.data, "llama", 5) != 0) {
    return SetError(TINYAI_ERR_UNSUPPORTED, "%s: %s; '%s' is not one (%s)", request.call,
                    "calibration runs language models only", model->reader().source(), what_for);
  }
  Array<TensorPlan> current, stored;
  TINYAI_RETURN_IF_ERROR(model->CurrentPlan(&current));
  TINYAI_RETURN_IF_ERROR(stored.Allocate(current.size(), "tensor plan"));
  const auto file = model->reader().file_tensors();
  for (size_t t = 0; t < file.size(); ++t) {  // a tensor stored pruned keeps its blocks
    stored[t] = TensorPlan();
    stored[t].dtype = file[t].dtype;
  }
  TinyAIMappedModel::Calibration previous, calibration;
  TINYAI_RETURN_IF_ERROR(model->ApplyPlan(stored.data(), nullptr, &previous));
  TinyAIStatus s = Calibrate(model, request, &calibration);
  if (s == TINYAI_OK) s = model->ApplyPlan(plan, &calibration);
  if (s != TINYAI_OK) {
    char message[512];
    tinyai::Format(message, sizeof message, "%s", tinyaiGetLastErrorMessage());
    model->ApplyPlan(current.data(), &previous);
    return SetError(s, "%s", message);
  }
  return TINYAI_OK;
}

}  // namespace capi
}  // namespace tinyai
