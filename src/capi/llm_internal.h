// What other shims reach inside a TinyAILLM (llm_capi.cc owns the struct).
#ifndef TINYAI_CAPI_LLM_INTERNAL_H_
#define TINYAI_CAPI_LLM_INTERNAL_H_

#include "model/weight_stream.h"
#include "text/text_tokenizer.h"
#include "tinyai/llm.h"

namespace tinyai {

// What a runner's handle takes, counted in its plan's tables: the LLM's or
// the scheduler's handle, whichever is larger, so tinyai-inspect's plan (a
// scheduler) and tinyaiCreateLLM's agree on the least limit.
size_t RunnerHandleBytes();

// The weight stream of llm's model (calibration observes its products).
WeightStream* LLMWeightStream(TinyAILLM* llm);
// The tokenizer of llm's model (calibration follows its add_bos and add_eos).
const TextTokenizer& LLMTokenizer(const TinyAILLM* llm);

}  // namespace tinyai

#endif  // TINYAI_CAPI_LLM_INTERNAL_H_
