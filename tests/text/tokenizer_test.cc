// Tests of the llama2.c tokenizer parser and of Tokenizer (encode/decode).
//
// The expected ids for tok512.bin were computed by an independent Python
// transliteration of llama2.c's encode() (a quadratic rescan of all pairs
// after every merge, BOS both inside and outside the merge scan giving the
// same ids). The randomized tests compare Encode with a C++ brute-force
// transliteration of the same function written below.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "require_shared.h"

#include "common/span.h"
#include "import/llama2c_tokenizer.h"
#include "text/tokenizer.h"
#include "tinyai/status.h"

namespace tinyai {
namespace {

std::string LastMessage() { return tinyaiGetLastErrorMessage(); }

// ---- llama2.c file images ------------------------------------------------------

struct Entry {
  float score;
  std::string piece;
};

void PutI32(std::vector<uint8_t>* out, int32_t v) {
  uint32_t u;
  std::memcpy(&u, &v, 4);
  for (int i = 0; i < 4; ++i) out->push_back(static_cast<uint8_t>(u >> (8 * i)));
}

void PutF32(std::vector<uint8_t>* out, float v) {
  int32_t i;
  std::memcpy(&i, &v, 4);
  PutI32(out, i);
}

std::vector<uint8_t> Serialize(int32_t maxLength, const std::vector<Entry>& entries) {
  std::vector<uint8_t> out;
  PutI32(&out, maxLength);
  for (const Entry& e : entries) {
    PutF32(&out, e.score);
    PutI32(&out, static_cast<int32_t>(e.piece.size()));
    out.insert(out.end(), e.piece.begin(), e.piece.end());
  }
  return out;
}

std::vector<Entry> SmallEntries() {
  return {{0.0f, "<unk>"}, {0.0f, "\n<s>\n"}, {0.0f, "\n</s>\n"}, {-1.0f, "ab"}, {-2.0f, "abc"}};
}

TinyAIStatus ParseBytes(const std::vector<uint8_t>& bytes, int32_t vocabSize, Llama2cVocab* out) {
  return ParseLlama2cTokenizer(bytes.empty() ? nullptr : bytes.data(), bytes.size(), vocabSize,
                               out);
}

// Expects TINYAI_ERR_BAD_TOKENIZER with a message containing each needle.
void ExpectBadTokenizer(const std::vector<uint8_t>& bytes, int32_t vocabSize,
                        const std::vector<std::string>& needles) {
  Llama2cVocab vocab;
  tinyaiClearLastError();
  EXPECT_EQ(ParseBytes(bytes, vocabSize, &vocab), TINYAI_ERR_BAD_TOKENIZER);
  EXPECT_EQ(tinyaiGetLastError(), TINYAI_ERR_BAD_TOKENIZER);
  const std::string message = LastMessage();
  for (const std::string& needle : needles) {
    EXPECT_NE(message.find(needle), std::string::npos)
        << "message \"" << message << "\" lacks \"" << needle << "\"";
  }
}

TEST(Llama2cTokenizerParser, ParsesASmallFile) {
  const std::vector<uint8_t> bytes = Serialize(6, SmallEntries());
  Llama2cVocab vocab;
  ASSERT_EQ(ParseBytes(bytes, 5, &vocab), TINYAI_OK) << LastMessage();
  EXPECT_EQ(vocab.max_token_length, 6u);
  ASSERT_EQ(vocab.pieces.size(), 5u);
  ASSERT_EQ(vocab.scores.size(), 5u);
  EXPECT_EQ(std::string(vocab.pieces[1].data, vocab.pieces[1].size), "\n<s>\n");
  EXPECT_EQ(std::string(vocab.pieces[4].data, vocab.pieces[4].size), "abc");
  EXPECT_EQ(vocab.scores[4], -2.0f);
  // The pieces are copies that survive a move of the vocabulary.
  Llama2cVocab moved = std::move(vocab);
  EXPECT_EQ(std::string(moved.pieces[3].data, moved.pieces[3].size), "ab");
}

TEST(Llama2cTokenizerParser, AcceptsZeroLengthPieces) {
  std::vector<Entry> entries = SmallEntries();
  entries[0].piece = "";
  Llama2cVocab vocab;
  ASSERT_EQ(ParseBytes(Serialize(6, entries), 5, &vocab), TINYAI_OK) << LastMessage();
  EXPECT_EQ(vocab.pieces[0].size, 0u);
  EXPECT_NE(vocab.pieces[0].data, nullptr);
}

TEST(Llama2cTokenizerParser, RejectsShortFiles) {
  for (size_t size = 0; size < 4; ++size) {
    ExpectBadTokenizer(std::vector<uint8_t>(size, 7), 5, {"token 0", std::to_string(size)});
  }
}

TEST(Llama2cTokenizerParser, RejectsNonPositiveMaxTokenLength) {
  ExpectBadTokenizer(Serialize(0, SmallEntries()), 5, {"max_token_length 0", "token 0"});
  ExpectBadTokenizer(Serialize(-3, SmallEntries()), 5, {"max_token_length -3", "token 0"});
}

TEST(Llama2cTokenizerParser, RejectsNegativeLength) {
  std::vector<uint8_t> bytes = Serialize(6, SmallEntries());
  // Token 3 starts after the max length and tokens 0..2 (8 + 5, 8 + 5, 8 + 6).
  const size_t token3 = 4 + 13 + 13 + 14;
  std::vector<uint8_t> length;
  PutI32(&length, -1);
  std::memcpy(&bytes[token3 + 4], length.data(), 4);
  ExpectBadTokenizer(bytes, 5, {"token 3", "negative length -1"});
}

TEST(Llama2cTokenizerParser, RejectsLengthAboveMaxTokenLength) {
  std::vector<Entry> entries = SmallEntries();
  entries[2].piece = "abcdefghij";
  ExpectBadTokenizer(Serialize(6, entries), 5, {"token 2", "length 10", "max_token_length 6"});
}

TEST(Llama2cTokenizerParser, RejectsLengthAboveRemainingBytes) {
  std::vector<uint8_t> bytes = Serialize(6, SmallEntries());
  bytes.resize(bytes.size() - 2);  // "abc" of token 4 loses two bytes
  ExpectBadTokenizer(bytes, 5, {"token 4", "length 3", "1 bytes left"});
}

TEST(Llama2cTokenizerParser, RejectsHugeLengthWithoutOverflow) {
  std::vector<uint8_t> bytes;
  PutI32(&bytes, INT32_MAX);
  PutF32(&bytes, 0.0f);
  PutI32(&bytes, INT32_MAX);
  bytes.push_back('x');
  ExpectBadTokenizer(bytes, 1, {"token 0", "length 2147483647", "1 bytes left"});
}

TEST(Llama2cTokenizerParser, RejectsTooFewTokens) {
  ExpectBadTokenizer(Serialize(6, SmallEntries()), 6, {"token 5", "after 5 tokens", "has 6"});
}

TEST(Llama2cTokenizerParser, RejectsCutRecordHeader) {
  std::vector<uint8_t> bytes = Serialize(6, SmallEntries());
  bytes.resize(4 + 13 + 13 + 14 + 5);  // token 3: score and one byte of length
  ExpectBadTokenizer(bytes, 5, {"token 3", "5 bytes left"});
}

TEST(Llama2cTokenizerParser, RejectsTrailingGarbage) {
  std::vector<uint8_t> bytes = Serialize(6, SmallEntries());
  bytes.push_back(0);
  bytes.push_back(1);
  bytes.push_back(2);
  ExpectBadTokenizer(bytes, 5, {"3 bytes of trailing garbage", "token 4"});
  // A file of 6 tokens read with a vocabulary of 5 is trailing garbage too.
  std::vector<Entry> six = SmallEntries();
  six.push_back({-3.0f, "x"});
  ExpectBadTokenizer(Serialize(6, six), 5, {"trailing garbage", "token 4"});
}

TEST(Llama2cTokenizerParser, RejectsNonFiniteScores) {
  std::vector<Entry> entries = SmallEntries();
  entries[3].score = std::numeric_limits<float>::quiet_NaN();
  ExpectBadTokenizer(Serialize(6, entries), 5, {"token 3", "non-finite score"});
  entries[3].score = -std::numeric_limits<float>::infinity();
  ExpectBadTokenizer(Serialize(6, entries), 5, {"token 3", "non-finite score"});
}

TEST(Llama2cTokenizerParser, RejectsBadArguments) {
  const std::vector<uint8_t> bytes = Serialize(6, SmallEntries());
  Llama2cVocab vocab;
  EXPECT_EQ(ParseBytes(bytes, 0, &vocab), TINYAI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(ParseBytes(bytes, -512, &vocab), TINYAI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(ParseLlama2cTokenizer(bytes.data(), bytes.size(), 5, nullptr),
            TINYAI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(ParseLlama2cTokenizer(nullptr, 10, 5, &vocab), TINYAI_ERR_INVALID_ARGUMENT);
}

// Every truncation of a valid file fails cleanly (run under ASan this also
// shows that no prefix is read past its end).
TEST(Llama2cTokenizerParser, EveryTruncationFails) {
  const std::vector<uint8_t> bytes = Serialize(6, SmallEntries());
  for (size_t size = 0; size < bytes.size(); ++size) {
    std::vector<uint8_t> prefix(bytes.begin(), bytes.begin() + static_cast<long>(size));
    Llama2cVocab vocab;
    EXPECT_EQ(ParseBytes(prefix, 5, &vocab), TINYAI_ERR_BAD_TOKENIZER) << "size " << size;
  }
}

// ---- The real tokenizer ------------------------------------------------------------

// llama2.c's encode(), transliterated (quadratic; BOS outside the merges).
std::vector<int32_t> BruteForceEncode(const std::vector<std::string>& vocab,
                                      const std::vector<float>& scores, const std::string& text,
                                      bool bos, bool eos) {
  std::map<std::string, int32_t> lookup;
  for (size_t i = 0; i < vocab.size(); ++i) lookup.emplace(vocab[i], static_cast<int32_t>(i));
  auto find = [&](const std::string& s) {
    auto it = lookup.find(s);
    return it == lookup.end() ? -1 : it->second;
  };
  std::vector<int32_t> tokens;
  if (!text.empty()) {
    const int32_t space = find(" ");
    tokens.push_back(space >= 0 ? space : ' ' + 3);
  }
  std::string buffer;
  for (size_t i = 0; i < text.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if ((c & 0xC0) != 0x80) buffer.clear();
    buffer.push_back(static_cast<char>(c));
    const unsigned char next = i + 1 < text.size() ? static_cast<unsigned char>(text[i + 1]) : 0;
    if ((next & 0xC0) == 0x80 && buffer.size() < 4) continue;
    const int32_t id = find(buffer);
    if (id >= 0) {
      tokens.push_back(id);
    } else {
      for (unsigned char b : buffer) tokens.push_back(static_cast<int32_t>(b) + 3);
    }
    buffer.clear();
  }
  while (true) {
    float best = -1e10f;
    int32_t bestId = -1;
    long bestIndex = -1;
    for (size_t i = 0; i + 1 < tokens.size(); ++i) {
      const int32_t id = find(vocab[static_cast<size_t>(tokens[i])] +
                              vocab[static_cast<size_t>(tokens[i + 1])]);
      if (id >= 0 && scores[static_cast<size_t>(id)] > best) {
        best = scores[static_cast<size_t>(id)];
        bestId = id;
        bestIndex = static_cast<long>(i);
      }
    }
    if (bestIndex < 0) break;
    tokens[static_cast<size_t>(bestIndex)] = bestId;
    tokens.erase(tokens.begin() + bestIndex + 1);
  }
  if (bos) tokens.insert(tokens.begin(), 1);
  if (eos) tokens.push_back(2);
  return tokens;
}

std::vector<uint8_t> ReadFile(const std::string& path) {
  std::vector<uint8_t> bytes;
  FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return bytes;
  uint8_t chunk[4096];
  size_t n;
  while ((n = std::fread(chunk, 1, sizeof(chunk), f)) > 0) bytes.insert(bytes.end(), chunk, chunk + n);
  std::fclose(f);
  return bytes;
}

// The shared folder: $TINYAI_SHARED_DIR, else the path tests/CMakeLists.txt compiled in.
const char* SharedDir() {
  const char* shared = std::getenv("TINYAI_SHARED_DIR");
  return shared ? shared : TINYAI_TEST_SHARED_DIR;
}

class Tok512Test : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* shared = SharedDir();
    if (shared == nullptr || shared[0] == '\0') {
      TINYAI_SKIP_WITHOUT_SHARED("TINYAI_SHARED_DIR is not set; point it at the shared folder holding "
                                 "models/stories260K/tok512.bin to run the tokenizer tests");
    }
    const std::string path = std::string(shared) + "/models/stories260K/tok512.bin";
    const std::vector<uint8_t> bytes = ReadFile(path);
    if (bytes.empty()) TINYAI_SKIP_WITHOUT_SHARED("cannot read " << path);
    ASSERT_EQ(ParseBytes(bytes, 512, &vocab_), TINYAI_OK) << LastMessage();
    ASSERT_EQ(tokenizer_.Init(Span<const StringView>(vocab_.pieces.data(), vocab_.pieces.size()),
                              Span<const float>(vocab_.scores.data(), vocab_.scores.size()), 1, 2,
                              vocab_.max_token_length),
              TINYAI_OK)
        << LastMessage();
    for (size_t i = 0; i < vocab_.pieces.size(); ++i) {
      pieces_.emplace_back(vocab_.pieces[i].data, vocab_.pieces[i].size);
      scores_.push_back(vocab_.scores[i]);
    }
  }

  std::vector<int32_t> Encode(const std::string& text, bool bos = true, bool eos = false) {
    size_t count = 0;
    EXPECT_EQ(tokenizer_.Encode(text.c_str(), bos, eos, nullptr, 0, &count),
              text.empty() && !bos && !eos ? TINYAI_OK : TINYAI_ERR_BUFFER_TOO_SMALL);
    std::vector<int32_t> ids(count + 1, -7);
    size_t count2 = 0;
    EXPECT_EQ(tokenizer_.Encode(text.c_str(), bos, eos, ids.data(), ids.size(), &count2),
              TINYAI_OK)
        << LastMessage();
    EXPECT_EQ(count2, count);
    EXPECT_EQ(ids[count], -7);  // nothing written past the count
    ids.resize(count2);
    return ids;
  }

  std::string Decode(const std::vector<int32_t>& ids) {
    std::string text;
    for (size_t i = 1; i < ids.size(); ++i) {
      char scratch[1];
      const StringView piece = tokenizer_.Decode(ids[i - 1], ids[i], scratch);
      text.append(piece.data, piece.size);
    }
    return text;
  }

  Llama2cVocab vocab_;
  Tokenizer tokenizer_;
  std::vector<std::string> pieces_;
  std::vector<float> scores_;
};

TEST_F(Tok512Test, Vocabulary) {
  EXPECT_EQ(tokenizer_.vocab_size(), 512);
  EXPECT_EQ(vocab_.max_token_length, 7u);
  EXPECT_EQ(tokenizer_.bos_id(), 1);
  EXPECT_EQ(tokenizer_.eos_id(), 2);
  EXPECT_EQ(pieces_[1], "\n<s>\n");
  EXPECT_EQ(pieces_[3], "<0x00>");
  EXPECT_EQ(pieces_[258], "<0xFF>");
  EXPECT_EQ(pieces_[410], " ");
}

TEST_F(Tok512Test, KnownEncodings) {
  EXPECT_EQ(Encode("Once upon a time"), (std::vector<int32_t>{1, 403, 407, 261, 378}));
  EXPECT_EQ(Encode("Tom and Lily went to the park"),
            (std::vector<int32_t>{1, 274, 287, 269, 317, 263, 377, 267, 265, 282, 295, 433}));
  EXPECT_EQ(Encode("The cat sat on the mat. It was happy!"),
            (std::vector<int32_t>{1, 291, 280, 294, 262, 294, 353, 265, 284, 294, 426, 359, 413,
                                  286, 393, 443}));
  EXPECT_EQ(Encode("The little dog was sad because"),
            (std::vector<int32_t>{1, 291, 376, 400, 428, 286, 296, 418, 329, 429, 412, 425, 372}));
  EXPECT_EQ(Encode("Hello\nworld"), (std::vector<int32_t>{1, 346, 306, 414, 13, 424, 304, 341}));
  EXPECT_EQ(Encode("  two  spaces "),
            (std::vector<int32_t>{1, 410, 410, 259, 424, 414, 410, 262, 427, 412, 331, 419, 410}));
  // The literal text "<0x0A>" is not the byte token.
  EXPECT_EQ(Encode("<0x0A>"), (std::vector<int32_t>{1, 410, 504, 477, 444, 477, 447, 505}));
}

// The golden prompts (whose expected outputs print the prompt back).
TEST_F(Tok512Test, GoldenPrompts) {
  const std::string dir = std::string(SharedDir()) + "/golden/stories260K/";
  int found = 0;
  for (int i = 1; i <= 99; ++i) {
    char name[32];
    std::snprintf(name, sizeof(name), "greedy-%02d.prompt", i);
    const std::vector<uint8_t> bytes = ReadFile(dir + name);
    if (bytes.empty()) continue;
    ++found;
    const std::string prompt(bytes.begin(), bytes.end());
    const std::vector<int32_t> ids = Encode(prompt);
    EXPECT_EQ(ids, BruteForceEncode(pieces_, scores_, prompt, true, false)) << name;
    EXPECT_EQ(Decode(ids), prompt) << name;
    const std::vector<uint8_t> expected = ReadFile(dir + std::string(name, 9) + ".expected");
    EXPECT_EQ(std::string(expected.begin(), expected.end()).compare(0, prompt.size(), prompt), 0)
        << name;
  }
  if (found == 0) TINYAI_SKIP_WITHOUT_SHARED("no golden prompts under " << dir);
}

TEST_F(Tok512Test, BosAndEosFlags) {
  EXPECT_EQ(Encode("Once upon a time", false, false), (std::vector<int32_t>{403, 407, 261, 378}));
  EXPECT_EQ(Encode("Once upon a time", true, true), (std::vector<int32_t>{1, 403, 407, 261, 378, 2}));
  EXPECT_EQ(Encode("Once upon a time", false, true), (std::vector<int32_t>{403, 407, 261, 378, 2}));
}

TEST_F(Tok512Test, EmptyTextHasNoDummyPrefix) {
  EXPECT_EQ(Encode(""), (std::vector<int32_t>{1}));
  EXPECT_EQ(Encode("", true, true), (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(Encode("", false, false), (std::vector<int32_t>{}));
}

TEST_F(Tok512Test, Utf8OutsideTheVocabularyUsesByteFallback) {
  // "é" (485) is in the vocabulary; 東, 京, 🙂 and ü are not.
  EXPECT_EQ(Encode("h\xC3\xA9llo \xE6\x9D\xB1\xE4\xBA\xAC \xF0\x9F\x99\x82"),
            (std::vector<int32_t>{1, 270, 485, 306, 414, 410, 233, 160, 180, 231, 189, 175, 410,
                                  243, 162, 156, 133}));
  EXPECT_EQ(Encode("\xC3\xBC\xC3\xA9"), (std::vector<int32_t>{1, 410, 198, 191, 485}));
}

TEST_F(Tok512Test, InvalidUtf8UsesByteFallback) {
  // A truncated sequence.
  EXPECT_EQ(Encode("\xE6\x9D"), (std::vector<int32_t>{1, 410, 233, 160}));
  EXPECT_EQ(Encode("x\xE6\x9Dy"), (std::vector<int32_t>{1, 410, 444, 233, 160, 422}));
  EXPECT_EQ(Encode("\xC3"), (std::vector<int32_t>{1, 410, 198}));
  // A stray continuation byte joins the chunk before it, as in llama2.c, so
  // "a\x80" is looked up as one chunk and falls back to bytes as a whole.
  EXPECT_EQ(Encode("a\x80" "b"), (std::vector<int32_t>{1, 410, 100, 131, 430}));
  // Runs of continuation bytes: at most 4 bytes per chunk.
  EXPECT_EQ(Encode("\x80\x80\x80\x80\x80\x80"),
            (std::vector<int32_t>{1, 410, 131, 131, 131, 131, 131, 131}));
  EXPECT_EQ(Encode("\xF0\x9F\x99\x82\x80\x80z"),
            (std::vector<int32_t>{1, 410, 243, 162, 156, 133, 131, 131, 451}));
}

uint64_t Fnv1a(const std::vector<int32_t>& ids) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (int32_t id : ids) {
    h ^= static_cast<uint32_t>(id);
    h *= 0x100000001b3ull;
  }
  return h;
}

TEST_F(Tok512Test, TenKilobyteText) {
  const std::string unit =
      "Once upon a time, Lily said \xE2\x80\x9Chello\xE2\x80\x9D to Tom \xE2\x80\x93 caf\xC3\xA9 "
      "\xF0\x9F\x99\x82!\n";
  ASSERT_EQ(unit.size(), 63u);
  std::string text;
  while (text.size() < 10240) text += unit;
  text.resize(10240);  // cuts a UTF-8 sequence: ends in a truncated “
  const std::vector<int32_t> ids = Encode(text, true, true);
  ASSERT_EQ(ids.size(), 5035u);
  EXPECT_EQ(Fnv1a(ids), 0xd77381c813b1cc12ull);
  EXPECT_EQ(std::vector<int32_t>(ids.begin(), ids.begin() + 12),
            (std::vector<int32_t>{1, 403, 407, 261, 378, 432, 317, 336, 410, 465, 260, 306}));
  EXPECT_EQ(std::vector<int32_t>(ids.end() - 10, ids.end()),
            (std::vector<int32_t>{261, 378, 432, 317, 336, 410, 465, 260, 421, 2}));
  std::vector<int32_t> withoutEos(ids.begin(), ids.end() - 1);
  EXPECT_EQ(Decode(withoutEos), text);
}

TEST_F(Tok512Test, MatchesBruteForceOnRandomText) {
  std::mt19937 rng(12345);
  const std::vector<std::string> atoms = {
      " ", "  ", "the", " the", "a", "e", "Lily", "Tom", "ing", "ed", ".", ",", "!", "\n", "\t",
      "\xC3\xA9", "\xC3\xBC", "\xE2\x80\x9C", "\xE6\x9D\xB1", "\xF0\x9F\x99\x82", "\x80", "\xC3",
      "\xE6\x9D", "\xFF", "<0x41>", "\x01", "x", "q", "Z", "0", "42"};
  for (int iteration = 0; iteration < 300; ++iteration) {
    std::string text;
    const int atomsInText = static_cast<int>(rng() % 40);
    for (int i = 0; i < atomsInText; ++i) {
      if (rng() % 4 == 0) {
        text.push_back(static_cast<char>(1 + rng() % 255));  // any byte but NUL
      } else {
        text += atoms[rng() % atoms.size()];
      }
    }
    const bool bos = rng() % 2 == 0;
    const bool eos = rng() % 2 == 0;
    EXPECT_EQ(Encode(text, bos, eos), BruteForceEncode(pieces_, scores_, text, bos, eos))
        << "text \"" << text << "\"";
  }
}

TEST_F(Tok512Test, RoundTrip) {
  const std::vector<std::string> texts = {
      "Once upon a time",
      "Tom and Lily went to the park. They played on the swings!",
      " leading space and trailing space ",
      "Line one\nLine two\n\n\ttab",
      "h\xC3\xA9llo \xE6\x9D\xB1\xE4\xBA\xAC \xF0\x9F\x99\x82 \xE2\x80\x9Cquoted\xE2\x80\x9D",
      "\x80\xFF\xC3 invalid \xE6\x9D bytes \xF0\x9F\x99\x82\x80\x80",
      "~!@#$%^&*()_+{}|:\"<>?`-=[]\\;',./",
      "\x01\x02\x1F\x7F control",
  };
  for (const std::string& text : texts) {
    EXPECT_EQ(Decode(Encode(text)), text);
  }
  std::mt19937 rng(7);
  for (int iteration = 0; iteration < 200; ++iteration) {
    std::string text;
    const int size = static_cast<int>(rng() % 64);
    for (int i = 0; i < size; ++i) text.push_back(static_cast<char>(1 + rng() % 255));
    EXPECT_EQ(Decode(Encode(text)), text);
  }
}

TEST_F(Tok512Test, DecodeStripsTheSpaceAfterBosOnly) {
  char scratch[1];
  // 403 is " Once".
  ASSERT_EQ(pieces_[403], " Once");
  StringView v = tokenizer_.Decode(1, 403, scratch);
  EXPECT_EQ(std::string(v.data, v.size), "Once");
  v = tokenizer_.Decode(378, 403, scratch);
  EXPECT_EQ(std::string(v.data, v.size), " Once");
  v = tokenizer_.Decode(2, 403, scratch);
  EXPECT_EQ(std::string(v.data, v.size), " Once");
  // The piece " " after BOS prints nothing.
  v = tokenizer_.Decode(1, 410, scratch);
  EXPECT_EQ(v.size, 0u);
  // A piece without a leading space is unchanged after BOS.
  v = tokenizer_.Decode(1, 260, scratch);
  EXPECT_EQ(std::string(v.data, v.size), "he");
}

TEST_F(Tok512Test, DecodeByteTokens) {
  char scratch[1] = {'?'};
  const int32_t newline = 3 + 0x0A;
  ASSERT_EQ(pieces_[static_cast<size_t>(newline)], "<0x0A>");
  StringView v = tokenizer_.Decode(400, newline, scratch);
  ASSERT_EQ(v.size, 1u);
  EXPECT_EQ(v.data, scratch);
  EXPECT_EQ(v.data[0], '\n');
  v = tokenizer_.Decode(1, newline, scratch);  // after BOS too
  ASSERT_EQ(v.size, 1u);
  EXPECT_EQ(v.data[0], '\n');
  for (int b = 0; b < 256; ++b) {
    v = tokenizer_.Decode(5, b + 3, scratch);
    ASSERT_EQ(v.size, 1u);
    EXPECT_EQ(static_cast<unsigned char>(v.data[0]), b);
  }
}

TEST_F(Tok512Test, DecodeOutOfRangeIsEmpty) {
  char scratch[1];
  EXPECT_EQ(tokenizer_.Decode(1, -1, scratch).size, 0u);
  EXPECT_EQ(tokenizer_.Decode(1, 512, scratch).size, 0u);
  EXPECT_EQ(tokenizer_.Decode(1, INT32_MAX, scratch).size, 0u);
}

TEST_F(Tok512Test, CapacityTooSmall) {
  int32_t ids[3] = {-1, -1, -1};
  size_t count = 0;
  tinyaiClearLastError();
  EXPECT_EQ(tokenizer_.Encode("Once upon a time", true, false, ids, 2, &count),
            TINYAI_ERR_BUFFER_TOO_SMALL);
  EXPECT_EQ(count, 5u);
  EXPECT_EQ(ids[0], 1);
  EXPECT_EQ(ids[1], 403);
  EXPECT_EQ(ids[2], -1);
  EXPECT_NE(LastMessage().find("5 tokens"), std::string::npos) << LastMessage();
}

TEST_F(Tok512Test, BadArguments) {
  int32_t ids[4];
  size_t count = 0;
  EXPECT_EQ(tokenizer_.Encode(nullptr, true, false, ids, 4, &count), TINYAI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(tokenizer_.Encode("a", true, false, ids, 4, nullptr), TINYAI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(tokenizer_.Encode("a", true, false, nullptr, 4, &count), TINYAI_ERR_INVALID_ARGUMENT);
}

// ---- Synthetic vocabularies --------------------------------------------------------

// A vocabulary with <unk>, BOS, EOS, the 256 byte tokens, then extra pieces.
struct TestVocab {
  std::vector<std::string> strings;
  std::vector<float> scores;
  std::vector<StringView> views;

  explicit TestVocab(const std::vector<Entry>& extra, bool byteTokens = true) {
    strings = {"<unk>", "\n<s>\n", "\n</s>\n"};
    scores = {0.0f, 0.0f, 0.0f};
    if (byteTokens) {
      for (int b = 0; b < 256; ++b) {
        char name[8];
        std::snprintf(name, sizeof(name), "<0x%02X>", b);
        strings.push_back(name);
        scores.push_back(0.0f);
      }
    }
    for (const Entry& e : extra) {
      strings.push_back(e.piece);
      scores.push_back(e.score);
    }
    for (const std::string& s : strings) views.push_back(StringView{s.data(), s.size()});
  }
  Span<const StringView> pieces() const { return Span<const StringView>(views.data(), views.size()); }
  Span<const float> score_span() const { return Span<const float>(scores.data(), scores.size()); }
  int32_t Id(const std::string& piece) const {
    for (size_t i = 0; i < strings.size(); ++i) {
      if (strings[i] == piece) return static_cast<int32_t>(i);
    }
    return -1;
  }
};

std::vector<int32_t> EncodeWith(const Tokenizer& tokenizer, const std::string& text) {
  std::vector<int32_t> ids(text.size() + 3);
  size_t count = 0;
  EXPECT_EQ(tokenizer.Encode(text.c_str(), false, false, ids.data(), ids.size(), &count), TINYAI_OK)
      << LastMessage();
  ids.resize(count);
  return ids;
}

TEST(TokenizerSynthetic, EqualScoresMergeTheLeftmostPairFirst) {
  // "ab" and "bc" score the same: in "abc" the leftmost pair (a,b) wins.
  TestVocab v({{-9.0f, " "}, {-9.0f, "a"}, {-9.0f, "b"}, {-9.0f, "c"}, {-1.0f, "ab"},
               {-1.0f, "bc"}, {-5.0f, " ab"}});
  Tokenizer t;
  ASSERT_EQ(t.Init(v.pieces(), v.score_span(), 1, 2, 0), TINYAI_OK) << LastMessage();
  EXPECT_EQ(EncodeWith(t, "abc"), (std::vector<int32_t>{v.Id(" ab"), v.Id("c")}));
  EXPECT_EQ(EncodeWith(t, "bc"), (std::vector<int32_t>{v.Id(" "), v.Id("bc")}));
}

TEST(TokenizerSynthetic, HigherScoreWinsOverPosition) {
  TestVocab v({{-9.0f, " "}, {-9.0f, "a"}, {-9.0f, "b"}, {-9.0f, "c"}, {-2.0f, "ab"},
               {-1.0f, "bc"}});
  Tokenizer t;
  ASSERT_EQ(t.Init(v.pieces(), v.score_span(), 1, 2, 0), TINYAI_OK);
  EXPECT_EQ(EncodeWith(t, "abc"), (std::vector<int32_t>{v.Id(" "), v.Id("a"), v.Id("bc")}));
}

TEST(TokenizerSynthetic, ScoresAtOrBelowMinusTenBillionNeverMerge) {
  // llama2.c starts its search from a best score of -1e10.
  TestVocab v({{-9.0f, " "}, {-9.0f, "a"}, {-9.0f, "b"}, {-1e10f, "ab"}, {-2e10f, " a"}});
  Tokenizer t;
  ASSERT_EQ(t.Init(v.pieces(), v.score_span(), 1, 2, 0), TINYAI_OK);
  EXPECT_EQ(EncodeWith(t, "ab"), (std::vector<int32_t>{v.Id(" "), v.Id("a"), v.Id("b")}));
}

TEST(TokenizerSynthetic, ChunksHoldAtMostFourBytes) {
  // As in llama2.c: a 4-byte chunk ends even when continuation bytes follow,
  // and the next chunk starts at the stray continuation byte.
  TestVocab v({{-9.0f, " "}, {-9.0f, "\xF0\x9F\x99\x82"}, {-9.0f, "\x80\x80"}});
  Tokenizer t;
  ASSERT_EQ(t.Init(v.pieces(), v.score_span(), 1, 2, 0), TINYAI_OK);
  EXPECT_EQ(EncodeWith(t, "\xF0\x9F\x99\x82\x80\x80"),
            (std::vector<int32_t>{v.Id(" "), v.Id("\xF0\x9F\x99\x82"), v.Id("\x80\x80")}));
  EXPECT_EQ(EncodeWith(t, "\xF0\x9F\x99\x82\x80"),
            (std::vector<int32_t>{v.Id(" "), v.Id("\xF0\x9F\x99\x82"), 0x80 + 3}));
  // A stray continuation byte joins the chunk before it.
  EXPECT_EQ(EncodeWith(t, "\xF0\x9F\x99\x80\x80"),
            (std::vector<int32_t>{v.Id(" "), 0xF0 + 3, 0x9F + 3, 0x99 + 3, 0x80 + 3, 0x80 + 3}));
}

// A vocabulary where nearly every adjacent pair merges (every string over
// {" ", a, b} of up to 5 bytes, random scores with many ties) stresses the
// merge order and the merge heap's compaction of stale entries.
TEST(TokenizerSynthetic, MatchesBruteForceOnDenseVocabulary) {
  std::mt19937 rng(99);
  std::vector<Entry> extra;
  std::vector<std::string> level = {""};
  for (int length = 1; length <= 5; ++length) {
    std::vector<std::string> next;
    for (const std::string& prefix : level) {
      for (char c : std::string(" ab")) next.push_back(prefix + c);
    }
    for (const std::string& piece : next) {
      extra.push_back({-static_cast<float>(rng() % 7), piece});
    }
    level = next;
  }
  TestVocab v(extra);
  Tokenizer t;
  ASSERT_EQ(t.Init(v.pieces(), v.score_span(), 1, 2, 0), TINYAI_OK) << LastMessage();
  for (int iteration = 0; iteration < 200; ++iteration) {
    std::string text;
    const int size = static_cast<int>(rng() % (iteration < 190 ? 40 : 600));
    // Odd iterations: runs of "a" only (every pair merges until length 5).
    for (int i = 0; i < size; ++i) {
      text.push_back(iteration % 2 == 0 ? " ab"[rng() % 3] : 'a');
    }
    EXPECT_EQ(EncodeWith(t, text), BruteForceEncode(v.strings, v.scores, text, false, false))
        << "text \"" << text << "\"";
  }
}

TEST(TokenizerSynthetic, MissingSpaceUsesTheByteToken) {
  TestVocab v({{-9.0f, "a"}});
  Tokenizer t;
  ASSERT_EQ(t.Init(v.pieces(), v.score_span(), 1, 2, 0), TINYAI_OK);
  EXPECT_EQ(EncodeWith(t, "a"), (std::vector<int32_t>{' ' + 3, v.Id("a")}));
}

TEST(TokenizerSynthetic, MissingByteTokensFail) {
  TestVocab v({{-9.0f, " "}, {-9.0f, "a"}}, /*byteTokens=*/false);
  Tokenizer t;
  ASSERT_EQ(t.Init(v.pieces(), v.score_span(), 1, 2, 0), TINYAI_OK);
  EXPECT_EQ(EncodeWith(t, "a a"), (std::vector<int32_t>{3, 4, 3, 4}));
  std::vector<int32_t> ids(8);
  size_t count = 0;
  EXPECT_EQ(t.Encode("ab", false, false, ids.data(), ids.size(), &count), TINYAI_ERR_BAD_TOKENIZER);
  EXPECT_NE(LastMessage().find("0x62"), std::string::npos) << LastMessage();
}

TEST(TokenizerSynthetic, DuplicatePiecesResolveToTheLowestId) {
  TestVocab v({{-9.0f, " "}, {-9.0f, "a"}, {-8.0f, "a"}});
  Tokenizer t;
  ASSERT_EQ(t.Init(v.pieces(), v.score_span(), 1, 2, 0), TINYAI_OK);
  EXPECT_EQ(EncodeWith(t, "a"), (std::vector<int32_t>{v.Id(" "), 260}));
}

TEST(TokenizerSynthetic, DecodeAcceptsLowercaseHex) {
  TestVocab v({{-9.0f, "<0x0a>"}, {-9.0f, "<0xzz>"}, {-9.0f, "<0x0A"}, {-9.0f, " <0x41>"}});
  Tokenizer t;
  ASSERT_EQ(t.Init(v.pieces(), v.score_span(), 1, 2, 0), TINYAI_OK);
  char scratch[1];
  StringView s = t.Decode(0, 259, scratch);
  ASSERT_EQ(s.size, 1u);
  EXPECT_EQ(s.data[0], '\n');
  s = t.Decode(0, 260, scratch);
  EXPECT_EQ(std::string(s.data, s.size), "<0xzz>");
  s = t.Decode(0, 261, scratch);
  EXPECT_EQ(std::string(s.data, s.size), "<0x0A");
  // After BOS the leading space goes first, then the byte form applies.
  s = t.Decode(1, 262, scratch);
  ASSERT_EQ(s.size, 1u);
  EXPECT_EQ(s.data[0], 'A');
  s = t.Decode(0, 262, scratch);
  EXPECT_EQ(std::string(s.data, s.size), " <0x41>");
}

TEST(TokenizerSynthetic, EncodeBeforeInitIsMisuse) {
  Tokenizer t;
  int32_t ids[4];
  size_t count = 9;
  EXPECT_EQ(t.Encode("a", true, false, ids, 4, &count), TINYAI_ERR_MISUSE);
  EXPECT_EQ(count, 0u);
  char scratch[1];
  EXPECT_EQ(t.Decode(1, 0, scratch).size, 0u);
}

void ExpectInitFails(const TestVocab& v, int32_t bos, int32_t eos, uint32_t maxLength,
                     const std::vector<std::string>& needles) {
  Tokenizer t;
  tinyaiClearLastError();
  EXPECT_EQ(t.Init(v.pieces(), v.score_span(), bos, eos, maxLength), TINYAI_ERR_BAD_TOKENIZER);
  const std::string message = LastMessage();
  for (const std::string& needle : needles) {
    EXPECT_NE(message.find(needle), std::string::npos)
        << "message \"" << message << "\" lacks \"" << needle << "\"";
  }
  size_t count = 0;
  int32_t ids[4];
  EXPECT_EQ(t.Encode("a", true, false, ids, 4, &count), TINYAI_ERR_MISUSE);
}

TEST(TokenizerSynthetic, InitValidation) {
  {
    Tokenizer t;
    EXPECT_EQ(t.Init(Span<const StringView>(), Span<const float>(), 1, 2, 0),
              TINYAI_ERR_BAD_TOKENIZER);
    EXPECT_NE(LastMessage().find("empty vocabulary"), std::string::npos);
  }
  {
    TestVocab v({{-1.0f, ""}});
    ExpectInitFails(v, 1, 2, 0, {"token 259", "empty piece"});
  }
  {
    TestVocab v({{-1.0f, "abcdefgh"}});
    ExpectInitFails(v, 1, 2, 7, {"token 259", "8 bytes", "7"});
    Tokenizer t;
    EXPECT_EQ(t.Init(v.pieces(), v.score_span(), 1, 2, 8), TINYAI_OK);
    EXPECT_EQ(t.Init(v.pieces(), v.score_span(), 1, 2, 0), TINYAI_OK);
  }
  {
    TestVocab v({{-1.0f, "a"}, {std::numeric_limits<float>::quiet_NaN(), "b"}});
    ExpectInitFails(v, 1, 2, 0, {"token 260", "non-finite score"});
    v.scores[260] = std::numeric_limits<float>::infinity();
    ExpectInitFails(v, 1, 2, 0, {"token 260", "non-finite score"});
  }
  {
    TestVocab v({{-1.0f, "a"}});
    ExpectInitFails(v, 260, 2, 0, {"BOS token 260", "260 tokens"});
    ExpectInitFails(v, -1, 2, 0, {"BOS token -1"});
    ExpectInitFails(v, 1, 260, 0, {"EOS token 260"});
    ExpectInitFails(v, 1, -5, 0, {"EOS token -5"});
  }
  {
    TestVocab v({{-1.0f, "a"}});
    Tokenizer t;
    EXPECT_EQ(t.Init(v.pieces(), Span<const float>(v.scores.data(), 259), 1, 2, 0),
              TINYAI_ERR_BAD_TOKENIZER);
    EXPECT_NE(LastMessage().find("token 259"), std::string::npos) << LastMessage();
  }
}

TEST(TokenizerSynthetic, ReinitAfterFailureIsUninitialized) {
  TestVocab good({{-9.0f, " "}, {-9.0f, "a"}});
  TestVocab bad({{-1.0f, ""}});
  Tokenizer t;
  ASSERT_EQ(t.Init(good.pieces(), good.score_span(), 1, 2, 0), TINYAI_OK);
  EXPECT_EQ(t.Init(bad.pieces(), bad.score_span(), 1, 2, 0), TINYAI_ERR_BAD_TOKENIZER);
  int32_t ids[4];
  size_t count = 0;
  EXPECT_EQ(t.Encode("a", true, false, ids, 4, &count), TINYAI_ERR_MISUSE);
}

}  // namespace
}  // namespace tinyai
