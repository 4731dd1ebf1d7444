// The committed default model (models/tinyai-fortunes.tmai, trained by
// models/recipe/) writes real text: sampled output is made of the training
// corpus's words, its greedy text is the one its model card records, and it
// runs under a memory limit smaller than its weights.
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "format/test_models.h"
#include "tinyai/llm.h"
#include "tinyai/tinyai.h"

namespace {

// Greedy continuations of "The" and "A" (64 positions), as models/tinyai-fortunes.md records them.
const char kGreedyThe[] = "The only thing that is a mind is a mind.\n-- Mark Twain";
const char kGreedyA[] = "Ask you're a sure to be a lot of mind.";

namespace tt = tinyai::testing;
using tt::LastMessage;

// Lower-cased runs of ASCII letters: the "words" of a text.
std::vector<std::string> Words(const std::string& text) {
  std::vector<std::string> words;
  std::string w;
  for (char c : text) {
    if (std::isalpha(static_cast<unsigned char>(c)) && static_cast<unsigned char>(c) < 0x80) {
      w += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    } else if (!w.empty()) {
      words.push_back(w);
      w.clear();
    }
  }
  if (!w.empty()) words.push_back(w);
  return words;
}

// Every word of the corpus files models/recipe/corpus.list names; empty (and
// *why says why) when the corpus is not installed.
std::set<std::string> CorpusVocabulary(std::string* why) {
  const std::string dir = tt::Env("TINYAI_CORPUS_DIR");
  const std::string list = tt::Env("TINYAI_CORPUS_LIST");
  std::ifstream names(list);
  std::set<std::string> vocabulary;
  if (!names) {
    *why = "cannot read the corpus list " + list;
    return vocabulary;
  }
  std::string name;
  while (std::getline(names, name)) {
    if (name.empty() || name[0] == '#') continue;
    std::ifstream f(dir + "/" + name, std::ios::binary);
    if (!f) {
      *why = "the corpus file " + dir + "/" + name + " is missing (Debian's fortunes package: scripts/bootstrap.sh)";
      return std::set<std::string>();
    }
    const std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    for (std::string& w : Words(text)) vocabulary.insert(std::move(w));
  }
  return vocabulary;
}

// Share of words (counted with repeats) found in the vocabulary.
double InVocabularyShare(const std::vector<std::string>& words, const std::set<std::string>& vocabulary) {
  if (words.empty()) return 0.0;
  size_t known = 0;
  for (const std::string& w : words) known += vocabulary.count(w);
  return static_cast<double>(known) / static_cast<double>(words.size());
}

class DefaultModelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string path = tt::Env("TINYAI_DEFAULT_MODEL");
    TinyAIMmapConfig config = tinyaiCreateDefaultMmapConfig();
    model_ = tinyaiOpenMappedModel(path.c_str(), &config);
    ASSERT_NE(model_, nullptr) << path << ": " << LastMessage();
  }
  void TearDown() override {
    if (llm_) tinyaiDestroyLLM(llm_);
    if (model_) tinyaiCloseMappedModel(model_);
  }
  void CreateLLM(size_t memoryLimit) {
    TinyAILLMConfig config = tinyaiCreateDefaultLLMConfig();
    config.threads = 1;
    config.memoryLimit = memoryLimit;
    ASSERT_EQ(tinyaiCreateLLM(model_, &config, &llm_), TINYAI_OK) << LastMessage();
  }
  std::string Generate(const char* prompt, int32_t steps, float temperature, uint64_t seed) {
    TinyAIGenerateParams params = tinyaiCreateDefaultGenerateParams();
    params.steps = steps;
    params.sampler.temperature = temperature;
    params.sampler.seed = seed;
    std::vector<char> text(8192);
    size_t len = 0;
    EXPECT_EQ(tinyaiLLMGenerate(llm_, prompt, &params, text.data(), text.size(), &len, nullptr), TINYAI_OK)
        << LastMessage();
    return std::string(text.data(), std::min(len, text.size()));
  }

  TinyAIMappedModel* model_ = nullptr;
  TinyAILLM* llm_ = nullptr;
};

TEST_F(DefaultModelTest, IsTheTrainedLlamaItsCardDescribes) {
  const char* name = nullptr;
  size_t len = 0;
  ASSERT_EQ(tinyaiGetMetadataString(model_, "general.name", &name, &len), TINYAI_OK) << LastMessage();
  EXPECT_EQ(std::string(name, len), "tinyai-fortunes");
  CreateLLM(0);
  TinyAIModelInfo info;
  std::memset(&info, 0, sizeof info);
  info.structSize = sizeof info;
  ASSERT_EQ(tinyaiGetLLMModelInfo(llm_, &info), TINYAI_OK) << LastMessage();
  EXPECT_EQ(info.dim, 128);
  EXPECT_EQ(info.layers, 4);
  EXPECT_EQ(info.heads, 4);
  EXPECT_EQ(info.kvHeads, 2);  // grouped-query attention
  EXPECT_EQ(info.vocabSize, 1024);
  EXPECT_EQ(info.seqLen, 256);
  EXPECT_EQ(info.sharedClassifier, 1);
}

// Sampled text (the demo's settings) is made of the corpus's words. A fortune
// is short and the model ends it by sampling BOS, so the test samples until it
// has 300 words. The same measure on the same text with its letters shuffled
// (spaces and punctuation kept) falls far below: it tells text from noise.
TEST_F(DefaultModelTest, SampledTextIsMadeOfTheCorpusWords) {
  std::string why;
  const std::set<std::string> vocabulary = CorpusVocabulary(&why);
  if (vocabulary.empty()) GTEST_SKIP() << why;
  CreateLLM(0);
  std::string all;
  const char* prompts[] = {"The", "A man", "Love", "Computers", "When", "If you"};
  int samples = 0;
  for (uint64_t seed = 1; seed <= 200 && Words(all).size() < 300; ++seed, ++samples) {
    all += Generate(prompts[seed % 6], 256, 0.8f, seed) + "\n";
  }
  const std::vector<std::string> words = Words(all);
  const std::set<std::string> distinct(words.begin(), words.end());
  const double share = InVocabularyShare(words, vocabulary);
  std::printf("%d samples: %zu words (%zu distinct), %.1f%% in the corpus's %zu distinct words\n", samples,
              words.size(), distinct.size(), 100.0 * share, vocabulary.size());
  ASSERT_GE(words.size(), 300u) << all;
  EXPECT_GE(distinct.size(), 100u) << "repetitive text:\n" << all;
  EXPECT_GE(share, 0.85) << all;

  std::string letters;
  for (char c : all) {
    if (std::isalpha(static_cast<unsigned char>(c))) letters += c;
  }
  std::shuffle(letters.begin(), letters.end(), std::mt19937(7));
  std::string scrambled = all;
  size_t next = 0;
  for (char& c : scrambled) {
    if (std::isalpha(static_cast<unsigned char>(c))) c = letters[next++];
  }
  const double noise = InVocabularyShare(Words(scrambled), vocabulary);
  std::printf("the same text with its letters shuffled: %.1f%% in the corpus\n", 100.0 * noise);
  EXPECT_LT(noise, 0.6);
}

// Greedy text is deterministic and identical on every kernel table and target;
// these are the continuations models/tinyai-fortunes.md records (and
// models/recipe/check.py matched against torch when the model was made).
TEST_F(DefaultModelTest, GreedyTextIsTheRecordedOne) {
  CreateLLM(0);
  EXPECT_EQ(Generate("The", 64, 0.0f, 1), kGreedyThe);
  EXPECT_EQ(Generate("A", 64, 0.0f, 1), kGreedyA);
}

// The demo's setting: a memory limit below the weights' size streams them and
// writes the same text as with everything resident.
TEST_F(DefaultModelTest, RunsUnderALimitBelowItsWeights) {
  CreateLLM(2u << 20);
  const std::string limited = Generate("The", 96, 0.8f, 3);
  TinyAIMemoryReport report;
  report.structSize = sizeof report;
  ASSERT_EQ(tinyaiGetLLMMemoryReport(llm_, &report), TINYAI_OK) << LastMessage();
  EXPECT_LE(report.peakTotalBytes, static_cast<uint64_t>(2u << 20));
  EXPECT_LT(report.weightPeakBytes, tinyaiGetMappedModelFileSize(model_) / 2);
  tinyaiDestroyLLM(llm_);
  llm_ = nullptr;
  CreateLLM(0);
  EXPECT_EQ(Generate("The", 96, 0.8f, 3), limited);
}

}  // namespace
