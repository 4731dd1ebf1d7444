// libFuzzer target: llama2.c tokenizer files (tokenizer.bin, tok512.bin).
// Input: a little-endian uint16 vocabulary size (what a checkpoint's header
// would say), then the file's bytes.
//
//  - tinyai::ParseLlama2cTokenizer must accept the file or refuse it with a
//    specific status and a message; what it accepts must account for every
//    byte of the file.
//  - When it parses and tinyai::Tokenizer::Init accepts the vocabulary (BOS
//    1, EOS 2), a few texts (valid and invalid UTF-8, and texts made of the
//    vocabulary's own pieces) are encoded: the ids must be inside the
//    vocabulary and equal llama2.c's encode() (a plain transcription in
//    fuzz_util.h), a short output buffer must get the first ids and
//    TINYAI_ERR_BUFFER_TOO_SMALL, every id must decode, and decoding must
//    give the text back when the vocabulary promises it
//    (tinyai_fuzz::VocabularyRoundTrips: " " and llama2.c's byte-fallback
//    pieces <0xXX> at id XX+3, no other piece Decode prints as a byte), no
//    merge made a byte-fallback id and no BOS is among the ids.
//  - The same file then goes through the llama2.c converter
//    (tinyai::ConvertLlama2c, with a tiny checkpoint of that vocabulary
//    size) and the model's runner: its tokenizer, rebuilt from the model's
//    metadata, must encode the texts to the same ids (a piece over
//    limits::kMaxPieceBytes, 65,536 bytes, is refused by the converter).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "format/limits.h"
#include "import/model_builder.h"
#include "fuzz_util.h"
#include "import/llama2c_tokenizer.h"
#include "text/tokenizer.h"
#include "tinyai/tinyai.h"

namespace {

using tinyai_fuzz::CheckFailure;

// A llama2.c checkpoint of the smallest shape (dim 2, one layer, one head,
// seq_len 2) with a shared classifier of vocab rows; weights are small
// numbers.
std::vector<uint8_t> TinyCheckpoint(int32_t vocab) {
  const int32_t header[7] = {2, 2, 1, 1, 1, vocab, 2};
  // embedding, rms_att, wq, wk, wv, wo, rms_ffn, w1, w2, w3, rms_final, freq_cis (seq_len * head_size)
  const size_t floats = static_cast<size_t>(vocab) * 2 + 2 + 4 * 4 + 2 + 3 * 4 + 2 + 2 * 2;
  std::vector<uint8_t> out(sizeof header + floats * 4);
  std::memcpy(out.data(), header, sizeof header);
  for (size_t i = 0; i < floats; ++i) {
    const float f = static_cast<float>(static_cast<int>(i % 7) - 3) * 0.25f;
    std::memcpy(out.data() + sizeof header + i * 4, &f, 4);
  }
  return out;
}

// Texts to encode: fixed ones, and ones made of the vocabulary's pieces.
std::vector<std::string> Texts(const std::vector<std::string>& pieces) {
  std::vector<std::string> texts = {"Once upon a time", "a", " ", "  x  ", "\xc3\xa9t\xc3\xa9 \xe2\x82\xac\xf0\x9f\x98\x80",
                                    "\xff\xfe\x80\x80\x80\x80\x80 \xc3", "<0x41>\n<s>\n"};
  std::string joined, spaced;
  for (size_t i = 0; i < pieces.size() && joined.size() < 96; i += 1 + i / 3) joined += pieces[i];
  for (size_t i = pieces.size(); i-- > 0 && spaced.size() < 96;) spaced += pieces[i] + " ";
  for (std::string t : {joined, spaced}) {
    // Encode reads a NUL-terminated text.
    t = t.substr(0, t.find('\0'));
    texts.push_back(t);
  }
  return texts;
}

void CheckText(const tinyai::Tokenizer& tok, const tinyai_fuzz::ReferenceTokenizer& ref,
               const std::vector<std::string>& pieces, bool round_trips, const std::string& text,
               std::vector<int32_t>* ids) {
  const int32_t vocab = static_cast<int32_t>(pieces.size());
  std::vector<int32_t> expected;
  bool merged_bytes = false;
  const bool encodable = ref.Encode(text, &expected, &merged_bytes);
  ids->assign(text.size() + 2, -1);
  size_t count = 0;
  tinyai::EncodeScratch scratch;
  TinyAIStatus s = tok.Encode(text.c_str(), true, false, ids->data(), ids->size(), &count, &scratch);
  if (!encodable) {
    FUZZ_CHECK(s == TINYAI_ERR_BAD_TOKENIZER, "a text with a byte outside the vocabulary encodes: %s",
               tinyaiStatusString(s));
    CheckFailure(s, "Tokenizer::Encode");
    ids->clear();
    return;
  }
  FUZZ_CHECK(s == TINYAI_OK, "Encode fails: %s", tinyaiStatusString(s));
  ids->resize(count);
  FUZZ_CHECK(count == expected.size() + 1 && (*ids)[0] == tok.bos_id(), "%zu ids, llama2.c's encode gives %zu + BOS",
             count, expected.size());
  for (size_t i = 1; i < count; ++i) {
    FUZZ_CHECK((*ids)[i] >= 0 && (*ids)[i] < vocab, "id %d outside the vocabulary of %d", (*ids)[i], vocab);
    FUZZ_CHECK((*ids)[i] == expected[i - 1], "id %zu is %d, llama2.c's encode gives %d", i, (*ids)[i],
               expected[i - 1]);
  }
  // A short buffer: the first ids and BUFFER_TOO_SMALL; with EOS one more.
  if (count > 1) {
    std::vector<int32_t> part(count / 2);
    size_t needed = 0;
    s = tok.Encode(text.c_str(), true, true, part.data(), part.size(), &needed, &scratch);
    FUZZ_CHECK(s == TINYAI_ERR_BUFFER_TOO_SMALL && needed == count + 1, "a short buffer: %s, %zu needed",
               tinyaiStatusString(s), needed);
    CheckFailure(s, "Tokenizer::Encode");
    FUZZ_CHECK(std::equal(part.begin(), part.end(), ids->begin()), "a short buffer gets other ids");
  }
  std::string decoded;
  bool after_bos = false;
  for (size_t i = 1; i < count; ++i) {
    char byte[1];
    const tinyai::StringView piece = tok.Decode((*ids)[i - 1], (*ids)[i], byte);
    FUZZ_CHECK(piece.size <= pieces[static_cast<size_t>((*ids)[i])].size() && (piece.size == 0 || piece.data),
               "Decode of id %d gives %zu bytes", (*ids)[i], piece.size);
    decoded.append(piece.data ? piece.data : "", piece.size);
    after_bos = after_bos || (i > 1 && (*ids)[i - 1] == tok.bos_id());
  }
  if (round_trips && !merged_bytes && !after_bos) {
    FUZZ_CHECK(decoded == text, "decoding gives '%s' for '%s'", decoded.c_str(), text.c_str());
  }
}

// A vocabulary size (2 bytes, little-endian) and its tokenizer file.
void WriteSeed(const char* dir, const std::string& name, const std::vector<std::string>& pieces,
               const std::vector<float>& scores) {
  std::vector<uint8_t> bytes = {static_cast<uint8_t>(pieces.size() & 0xFF), static_cast<uint8_t>(pieces.size() >> 8)};
  const std::vector<uint8_t> file = tinyai_fuzz::TokenizerFile(pieces, scores);
  bytes.insert(bytes.end(), file.begin(), file.end());
  tinyai_fuzz::WriteSeed(dir, name, bytes.data(), bytes.size());
}

// The tokenizers of a synthetic model (tinyai::WriteSyntheticModel) and of
// the default model (SentencePiece BPE, when present), fuzz_util.h's
// MakeVocabulary, and a vocabulary of the three special pieces.
void WriteSeeds(const char* dir) {
  std::vector<std::string> pieces;
  std::vector<float> scores;
  tinyai_fuzz::MakeVocabulary(300, &pieces, &scores);
  WriteSeed(dir, "tokenizer-made", pieces, scores);
  tinyai_fuzz::MakeVocabulary(3, &pieces, &scores);
  WriteSeed(dir, "tokenizer-special", pieces, scores);
  tinyai::LlamaShape shape;
  const std::string path = tinyai_fuzz::ScratchDir::Get().File("model.tmai");
  FUZZ_CHECK(tinyai::ParseSyntheticSpec("dim=4,hidden=4,layers=1,heads=1,vocab=512,seq_len=2", &shape) == TINYAI_OK &&
                 tinyai::WriteSyntheticModel(shape, path.c_str()) == TINYAI_OK &&
                 tinyai_fuzz::ModelVocabulary(path, &pieces, &scores),
             "the synthetic model's tokenizer");
  WriteSeed(dir, "tokenizer-synthetic", pieces, scores);
  std::remove(path.c_str());
  const char* env = std::getenv("TINYAI_DEFAULT_MODEL");
  const std::string fortunes = env ? env : TINYAI_FUZZ_DEFAULT_MODEL;
  if (tinyai_fuzz::ModelVocabulary(fortunes, &pieces, &scores)) WriteSeed(dir, "tokenizer-default-model", pieces, scores);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  tinyai_fuzz::WriteSeedsIfAsked(WriteSeeds);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const int32_t vocab = static_cast<int32_t>(data[0] | (data[1] << 8));
  const uint8_t* file = data + 2;
  const size_t file_size = size - 2;
  tinyai::Llama2cVocab v;
  tinyaiClearLastError();
  TinyAIStatus s = tinyai::ParseLlama2cTokenizer(file, file_size, vocab, &v);
  if (s != TINYAI_OK) {
    CheckFailure(s, "ParseLlama2cTokenizer");
    FUZZ_CHECK(s == TINYAI_ERR_BAD_TOKENIZER || (vocab == 0 && s == TINYAI_ERR_INVALID_ARGUMENT),
               "ParseLlama2cTokenizer: %s", tinyaiStatusString(s));
    return 0;
  }
  FUZZ_CHECK(v.pieces.size() == static_cast<size_t>(vocab) && v.scores.size() == static_cast<size_t>(vocab),
             "%zu pieces for a vocabulary of %d", v.pieces.size(), vocab);
  size_t accounted = 4;
  std::vector<std::string> pieces;
  std::vector<float> scores;
  for (int32_t i = 0; i < vocab; ++i) {
    const tinyai::StringView p = v.pieces[static_cast<size_t>(i)];
    FUZZ_CHECK(p.data != nullptr && p.size <= v.max_token_length, "piece %d: %zu bytes", i, p.size);
    FUZZ_CHECK(std::isfinite(v.scores[static_cast<size_t>(i)]), "score %d is not finite", i);
    accounted += 8 + p.size;
    pieces.emplace_back(p.data, p.size);
    scores.push_back(v.scores[static_cast<size_t>(i)]);
  }
  FUZZ_CHECK(accounted == file_size, "the pieces account for %zu bytes of %zu", accounted, file_size);

  tinyai::Tokenizer tok;
  s = tok.Init(tinyai::Span<const tinyai::StringView>(v.pieces.data(), v.pieces.size()),
               tinyai::Span<const float>(v.scores.data(), v.scores.size()), 1, 2, v.max_token_length);
  if (s != TINYAI_OK) {
    CheckFailure(s, "Tokenizer::Init");
    FUZZ_CHECK(s == TINYAI_ERR_BAD_TOKENIZER, "Tokenizer::Init: %s", tinyaiStatusString(s));
    return 0;
  }
  const tinyai_fuzz::ReferenceTokenizer ref(pieces, scores);
  const bool round_trips = tinyai_fuzz::VocabularyRoundTrips(pieces);
  const std::vector<std::string> texts = Texts(pieces);
  std::vector<std::vector<int32_t>> all_ids(texts.size());
  for (size_t t = 0; t < texts.size(); ++t) CheckText(tok, ref, pieces, round_trips, texts[t], &all_ids[t]);

  // Through the converter and the runner's tokenizer.
  const tinyai_fuzz::ScratchDir& dir = tinyai_fuzz::ScratchDir::Get();
  const std::string ckpt = dir.File("in.bin"), tok_path = dir.File("tok.bin"), out = dir.File("out.tmai");
  const std::vector<uint8_t> checkpoint = TinyCheckpoint(vocab);
  FUZZ_CHECK(tinyai_fuzz::WriteFile(ckpt, checkpoint.data(), checkpoint.size()), "cannot write %s", ckpt.c_str());
  FUZZ_CHECK(tinyai_fuzz::WriteFile(tok_path, file, file_size), "cannot write %s", tok_path.c_str());
  s = tinyai::ConvertLlama2c(ckpt.c_str(), tok_path.c_str(), out.c_str(), nullptr);
  size_t longest = 0;
  for (const std::string& p : pieces) longest = p.size() > longest ? p.size() : longest;
  if (longest > tinyai::limits::kMaxPieceBytes) {
    // The converter keeps the runtime's limit on pieces (format/limits.h).
    FUZZ_CHECK(s == TINYAI_ERR_BAD_TOKENIZER, "a piece of %zu bytes converts: %s", longest, tinyaiStatusString(s));
    CheckFailure(s, "ConvertLlama2c");
    return 0;
  }
  FUZZ_CHECK(s == TINYAI_OK, "a tokenizer that parses does not convert: %s", tinyaiStatusString(s));
  TinyAIMmapConfig config = tinyaiCreateDefaultMmapConfig();
  config.prefetchThreads = 0;
  TinyAIMappedModel* model = tinyaiOpenMappedModel(out.c_str(), &config);
  FUZZ_CHECK(model != nullptr, "the converted model does not open");
  TinyAILLMConfig cfg = tinyaiCreateDefaultLLMConfig();
  TinyAILLM* llm = nullptr;
  s = tinyaiCreateLLM(model, &cfg, &llm);
  FUZZ_CHECK(s == TINYAI_OK, "the runner refuses a tokenizer Tokenizer::Init accepts: %s", tinyaiStatusString(s));
  for (size_t t = 0; t < texts.size(); ++t) {
    std::vector<int32_t> ids(texts[t].size() + 2);
    int32_t count = 0;
    s = tinyaiLLMTokenize(llm, texts[t].c_str(), 1, ids.data(), static_cast<int32_t>(ids.size()), &count);
    if (all_ids[t].empty()) {
      FUZZ_CHECK(s == TINYAI_ERR_BAD_TOKENIZER, "tinyaiLLMTokenize: %s", tinyaiStatusString(s));
      continue;
    }
    FUZZ_CHECK(s == TINYAI_OK && count == static_cast<int32_t>(all_ids[t].size()) &&
                   std::equal(all_ids[t].begin(), all_ids[t].end(), ids.begin()),
               "the runner's tokenizer encodes '%s' differently (%s, %d ids)", texts[t].c_str(), tinyaiStatusString(s),
               count);
  }
  tinyaiDestroyLLM(llm);
  tinyaiCloseMappedModel(model);
  std::remove(out.c_str());
  return 0;
}
