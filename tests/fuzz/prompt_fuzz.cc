// libFuzzer target: any bytes as a prompt (invalid UTF-8 included; the C API
// reads a NUL-terminated text, so the input ends at its first NUL), through
// the tokenizers of two runners made once at start: a synthetic model
// written by the project's synthetic writer (seq_len 2048, its generated
// vocabulary) and the default model, models/tinyai-fortunes.tmai (a
// SentencePiece BPE vocabulary with real merges; $TINYAI_DEFAULT_MODEL
// overrides the path; skipped when absent). For each:
//
//  - tinyaiLLMTokenize sizes its output with capacity 0
//    (TINYAI_ERR_BUFFER_TOO_SMALL and the count), then gives BOS and ids
//    inside the vocabulary, at most one per byte plus the dummy prefix;
//    without BOS the same ids follow; a short buffer gets the first ids;
//  - the ids are llama2.c's encode() (fuzz_util.h's plain transcription),
//    for prompts up to 192 bytes;
//  - tinyaiLLMDecodeToken of each id after the one before gives the prompt's
//    bytes back (both vocabularies have " ", llama2.c's byte-fallback pieces
//    and no merge that makes one, which the start checks; a prompt that
//    encodes to BOS's id somewhere is exempt, as Decode drops a space after
//    BOS);
//  - tinyaiLLMGenerate over the prompt alone (steps = its ids, BOS excluded,
//    so nothing is evaluated) prints the prompt, and fails with
//    TINYAI_ERR_CONTEXT_OVERFLOW exactly when the ids do not fit the
//    context;
//  - on the synthetic model, prompts of at most 300 ids are also evaluated
//    (one more step, one sampled token): the text starts with the prompt.
#include <sys/stat.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "import/model_builder.h"
#include "fuzz_util.h"
#include "tinyai/tinyai.h"

namespace {

using tinyai_fuzz::CheckFailure;

struct Runner {
  const char* name = "";
  TinyAIMappedModel* model = nullptr;
  TinyAILLM* llm = nullptr;
  TinyAIModelInfo info{};
  std::vector<std::string> pieces;
  std::vector<float> scores;
  tinyai_fuzz::ReferenceTokenizer* ref = nullptr;
  bool evaluate = false;
};

std::vector<Runner>& Runners() {
  static std::vector<Runner>* runners = new std::vector<Runner>();
  return *runners;
}

void AddRunner(const char* name, const std::string& path, bool evaluate) {
  Runner r;
  r.name = name;
  r.evaluate = evaluate;
  r.model = tinyaiOpenMappedModel(path.c_str(), nullptr);
  FUZZ_CHECK(r.model != nullptr, "cannot open %s", path.c_str());
  TinyAILLMConfig cfg = tinyaiCreateDefaultLLMConfig();
  FUZZ_CHECK(tinyaiCreateLLM(r.model, &cfg, &r.llm) == TINYAI_OK, "cannot create a runner for %s", path.c_str());
  r.info.structSize = sizeof r.info;
  FUZZ_CHECK(tinyaiGetLLMModelInfo(r.llm, &r.info) == TINYAI_OK, "model info");
  FUZZ_CHECK(tinyai_fuzz::ModelVocabulary(path, &r.pieces, &r.scores), "%s has no tokenizer", path.c_str());
  // Decoding gives the prompt back only with llama2.c's byte-fallback
  // pieces, and when no merge can make one (no two pieces concatenate to
  // "<0xXX>"): check both once.
  FUZZ_CHECK(tinyai_fuzz::VocabularyRoundTrips(r.pieces), "%s: the vocabulary does not round-trip", name);
  r.ref = new tinyai_fuzz::ReferenceTokenizer(r.pieces, r.scores);
  for (int32_t id = 3; id < 259; ++id) {
    const std::string& p = r.pieces[static_cast<size_t>(id)];
    for (size_t cut = 1; cut < p.size(); ++cut) {
      FUZZ_CHECK(r.ref->Lookup(p.substr(0, cut)) < 0 || r.ref->Lookup(p.substr(cut)) < 0,
                 "%s: pieces merge into the byte piece %s", name, p.c_str());
    }
  }
  Runners().push_back(r);
}

void CheckPrompt(const Runner& r, const std::string& prompt) {
  const char* text = prompt.c_str();
  int32_t count = -1;
  TinyAIStatus s = tinyaiLLMTokenize(r.llm, text, 1, nullptr, 0, &count);
  FUZZ_CHECK(s == TINYAI_ERR_BUFFER_TOO_SMALL && count >= 1, "%s: sizing: %s, count %d", r.name,
             tinyaiStatusString(s), count);
  CheckFailure(s, "tinyaiLLMTokenize");
  FUZZ_CHECK(static_cast<size_t>(count) <= prompt.size() + 2, "%s: %d ids for %zu bytes", r.name, count,
             prompt.size());
  std::vector<int32_t> ids(static_cast<size_t>(count));
  int32_t again = -1;
  s = tinyaiLLMTokenize(r.llm, text, 1, ids.data(), count, &again);
  FUZZ_CHECK(s == TINYAI_OK && again == count, "%s: tokenize: %s, %d of %d", r.name, tinyaiStatusString(s), again,
             count);
  FUZZ_CHECK(ids[0] == r.info.bosId, "%s: the first id is %d, not BOS", r.name, ids[0]);
  bool bos_inside = false;
  for (int32_t i = 1; i < count; ++i) {
    FUZZ_CHECK(ids[static_cast<size_t>(i)] >= 0 && ids[static_cast<size_t>(i)] < r.info.vocabSize,
               "%s: id %d outside the vocabulary", r.name, ids[static_cast<size_t>(i)]);
    bos_inside = bos_inside || ids[static_cast<size_t>(i)] == r.info.bosId;
  }
  if (count > 1) {
    std::vector<int32_t> no_bos(static_cast<size_t>(count - 1));
    s = tinyaiLLMTokenize(r.llm, text, 0, no_bos.data(), count - 1, &again);
    FUZZ_CHECK(s == TINYAI_OK && again == count - 1 && std::equal(no_bos.begin(), no_bos.end(), ids.begin() + 1),
               "%s: without BOS: %s", r.name, tinyaiStatusString(s));
    std::vector<int32_t> part(static_cast<size_t>(count / 2));
    s = tinyaiLLMTokenize(r.llm, text, 1, part.data(), count / 2, &again);
    FUZZ_CHECK(s == TINYAI_ERR_BUFFER_TOO_SMALL && again == count &&
                   std::equal(part.begin(), part.end(), ids.begin()),
               "%s: a short buffer: %s", r.name, tinyaiStatusString(s));
  }
  if (prompt.size() <= 192) {
    std::vector<int32_t> expected;
    FUZZ_CHECK(r.ref->Encode(prompt, &expected), "%s: the reference cannot encode", r.name);
    FUZZ_CHECK(expected.size() + 1 == static_cast<size_t>(count) &&
                   std::equal(expected.begin(), expected.end(), ids.begin() + 1),
               "%s: %d ids differ from llama2.c's encode (%zu ids)", r.name, count - 1, expected.size());
  }

  // Decoding gives the prompt back.
  std::string decoded;
  for (int32_t i = 1; i < count; ++i) {
    size_t len = 0;
    s = tinyaiLLMDecodeToken(r.llm, ids[static_cast<size_t>(i - 1)], ids[static_cast<size_t>(i)], nullptr, 0, &len);
    FUZZ_CHECK(s == (len == 0 ? TINYAI_OK : TINYAI_ERR_BUFFER_TOO_SMALL), "%s: decode sizing: %s", r.name,
               tinyaiStatusString(s));
    std::vector<char> piece(len);
    size_t len2 = 0;
    s = tinyaiLLMDecodeToken(r.llm, ids[static_cast<size_t>(i - 1)], ids[static_cast<size_t>(i)], piece.data(), len,
                          &len2);
    FUZZ_CHECK(s == TINYAI_OK && len2 == len, "%s: decode: %s", r.name, tinyaiStatusString(s));
    decoded.append(piece.data(), len);
  }
  if (!bos_inside) FUZZ_CHECK(decoded == prompt, "%s: the ids decode to other bytes", r.name);

  // The prompt alone through generation.
  TinyAIGenerateParams params = tinyaiCreateDefaultGenerateParams();
  std::vector<char> out(prompt.size() + 64);
  size_t len = 0;
  if (count >= 2) {
    params.steps = count - 1;
    s = tinyaiLLMGenerate(r.llm, text, &params, out.data(), out.size(), &len, nullptr);
    if (count > r.info.contextLength) {
      FUZZ_CHECK(s == TINYAI_ERR_CONTEXT_OVERFLOW, "%s: %d ids in a context of %d: %s", r.name, count,
                 r.info.contextLength, tinyaiStatusString(s));
      CheckFailure(s, "tinyaiLLMGenerate");
      return;
    }
    FUZZ_CHECK(s == TINYAI_OK, "%s: generating the prompt alone: %s", r.name, tinyaiStatusString(s));
    if (!bos_inside) {
      FUZZ_CHECK(len == prompt.size() && std::string(out.data(), len) == prompt, "%s: generation prints other text",
                 r.name);
    }
  }
  if (r.evaluate && count <= 300 && count < r.info.contextLength) {
    params.steps = count;
    s = tinyaiLLMGenerate(r.llm, text, &params, out.data(), out.size(), &len, nullptr);
    FUZZ_CHECK(s == TINYAI_OK || s == TINYAI_ERR_BUFFER_TOO_SMALL, "%s: generating: %s", r.name,
               tinyaiStatusString(s));
    if (!bos_inside) {
      FUZZ_CHECK(len >= prompt.size() && std::memcmp(out.data(), text, prompt.size()) == 0,
                 "%s: the text does not start with the prompt", r.name);
    }
  }
}

// Prompts in English, valid and invalid UTF-8, every byte but NUL, a long
// one, and ones that look like the vocabulary's special pieces.
void WriteSeeds(const char* dir) {
  std::string bytes;
  for (int b = 1; b < 256; ++b) bytes.push_back(static_cast<char>(b));
  std::string long_text;
  while (long_text.size() < 1100) long_text += "Once upon a time, there was a little girl named Lily. ";
  const std::string prompts[] = {
      "Once upon a time",
      "A man walks into a bar. \"Ouch,\" he says.",
      "\xc3\x9c" "n\xc3\xaf" "c\xc3\xb6" "d\xc3\xa9 \xe2\x80\x94 \xe2\x98\x83 \xf0\x9f\x98\x80 \xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e",
      "\xff\xfe\xc0\xaf\xed\xa0\x80 x \x80\x80\x80\x80\x80 \xf4\x90\x80\x80",
      bytes,
      long_text,
      "<0x41><0x0A>\n<s>\n</s> <unk>",
      "   leading and trailing spaces   ",
      "\t\n\r\x01",
  };
  for (size_t i = 0; i < sizeof prompts / sizeof prompts[0]; ++i) {
    tinyai_fuzz::WriteSeed(dir, "prompt-" + std::to_string(i), prompts[i]);
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  tinyai_fuzz::WriteSeedsIfAsked(WriteSeeds);
  const std::string synthetic = tinyai_fuzz::ScratchDir::Get().File("model.tmai");
  tinyai::LlamaShape shape;
  FUZZ_CHECK(tinyai::ParseSyntheticSpec("dim=16,hidden=32,layers=1,heads=2,kv_heads=1,vocab=512,seq_len=2048", &shape) ==
                 TINYAI_OK,
             "spec");
  FUZZ_CHECK(tinyai::WriteSyntheticModel(shape, synthetic.c_str()) == TINYAI_OK, "cannot write %s", synthetic.c_str());
  AddRunner("synthetic", synthetic, true);
  const char* env = std::getenv("TINYAI_DEFAULT_MODEL");
  const std::string fortunes = env ? env : TINYAI_FUZZ_DEFAULT_MODEL;
  struct stat st;
  if (::stat(fortunes.c_str(), &st) == 0) {
    AddRunner("default model", fortunes, false);
  } else {
    std::fprintf(stderr, "prompt fuzz: no default model at '%s'; the synthetic model only\n", fortunes.c_str());
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string prompt(reinterpret_cast<const char*>(data), strnlen(reinterpret_cast<const char*>(data), size));
  for (const Runner& r : Runners()) CheckPrompt(r, prompt);
  return 0;
}
