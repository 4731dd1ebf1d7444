/* What a context past a model's seq_len costs: a text of CONTEXT tokens the
 * model samples itself (temperature 1, stories of at most seq_len tokens
 * separated by BOS) read back with teacher forcing in one LLM of CONTEXT
 * positions; the mean negative log-likelihood of each next token, in
 * buckets of a quarter of seq_len.
 *   long_context_nll MODEL CONTEXT        (built by tools/bench/run_long_context.sh) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tinyai/tinyai.h>
int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: long_context_nll MODEL CONTEXT\n");
    return 2;
  }
  TinyAIMappedModel* m = tinyaiOpenMappedModel(argv[1], NULL);
  if (!m) {
    printf("%s\n", tinyaiGetLastErrorMessage());
    return 1;
  }
  int ctx = atoi(argv[2]);
  TinyAILLMConfig cfg = tinyaiCreateDefaultLLMConfig();
  cfg.contextLength = ctx; cfg.threads = 2;
  TinyAILLM* llm = NULL;
  if (tinyaiCreateLLM(m, &cfg, &llm) != TINYAI_OK) { printf("%s\n", tinyaiGetLastErrorMessage()); return 1; }
  TinyAIModelInfo info; memset(&info, 0, sizeof info); info.structSize = sizeof info; tinyaiGetLLMModelInfo(llm, &info);
  int V = info.vocabSize, trained = info.seqLen;
  /* a text of ctx tokens: stories sampled at temperature 1 with a fresh LLM of the trained context, BOS between */
  TinyAILLM* gen = NULL; TinyAILLMConfig g = tinyaiCreateDefaultLLMConfig(); g.threads = 2;
  tinyaiCreateLLM(m, &g, &gen);
  int* text = malloc(sizeof(int) * ctx); int n = 0; float* logits = malloc(sizeof(float) * V);
  uint64_t rng = 7; TinyAISamplerConfig sc = tinyaiCreateDefaultSamplerConfig(); sc.temperature = 1.0f; sc.topP = 1.0f;
  while (n < ctx) {
    tinyaiResetLLM(gen); int t = info.bosId; text[n++] = t; int len = 1;
    while (n < ctx && len < trained) {
      tinyaiLLMEval(gen, &t, 1, logits); tinyaiLLMSample(gen, logits, &sc, &rng, &t);
      text[n++] = t; ++len; if (t == info.bosId) break;
    }
  }
  /* teacher-forced NLL in buckets of the trained length */
  double sum[16] = {0}; int cnt[16] = {0};
  for (int i = 0; i + 1 < ctx; ++i) {
    tinyaiLLMEval(llm, &text[i], 1, logits);
    double mx = logits[0]; for (int v = 1; v < V; ++v) if (logits[v] > mx) mx = logits[v];
    double z = 0; for (int v = 0; v < V; ++v) z += exp(logits[v] - mx);
    double nll = -(logits[text[i + 1]] - mx - log(z));
    int b = (i * 4) / trained; if (b > 15) b = 15; sum[b] += nll; cnt[b]++;
  }
  for (int b = 0; b < 16; ++b) if (cnt[b]) printf("positions %d-%d: mean NLL %.3f (%d)\n", b * trained / 4, (b + 1) * trained / 4 - 1, sum[b] / cnt[b], cnt[b]);
  return 0;
}
