// libFuzzer target: the inputs of a Hugging Face safetensors import
// (tinyai::ConvertSafetensors, tinyai-convert --from safetensors). The first
// byte picks which file the rest of the input is, the others being those of
// a valid tiny checkpoint written once by the tests' writer
// (tests/import/hf_writer.h):
//   0: model.safetensors (also parsed by safetensors::Parse from the bytes
//      themselves, so ASan sees any read past them);
//   1: config.json (also parsed by ParseJson);
//   2: model.safetensors.index.json over two valid shards.
// Any input must give TINYAI_OK or a specific status with a message naming
// a file, never a crash, a hang, an abort (the JSON code is built without
// exceptions: nlohmann aborts where it would throw) or a sanitizer report.
// What converts must open, load, evaluate and sample.
#include <sys/stat.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "fuzz_util.h"
#include "import/hf_writer.h"
#include "import/json.h"
#include "import/llama_source.h"
#include "import/model_builder.h"
#include "import/safetensors.h"
#include "tinyai/tinyai.h"

namespace {

using tinyai_fuzz::CheckFailure;

const char* const kFiles[] = {"model.safetensors", "config.json", "model.safetensors.index.json"};

// The valid checkpoint: one folder per mode, each holding every file but
// the one the input replaces. Returns the folders.
const std::vector<std::string>& Folders() {
  static std::vector<std::string>* folders = nullptr;
  if (folders != nullptr) return *folders;
  folders = new std::vector<std::string>();
  tinyai::LlamaShape shape;
  FUZZ_CHECK(tinyai::ParseSyntheticSpec("dim=16,hidden=32,layers=1,heads=2,kv_heads=1,vocab=260,seq_len=8,seed=7",
                                        &shape) == TINYAI_OK,
             "spec");
  const tinyai_fuzz::ScratchDir& scratch = tinyai_fuzz::ScratchDir::Get();
  const std::string model = scratch.File("fixed.tmai");
  FUZZ_CHECK(tinyai::WriteSyntheticModel(shape, model.c_str()) == TINYAI_OK, "synthetic model");
  static tinyai::testing::LlamaSource* source = new tinyai::testing::LlamaSource();
  std::string error;
  FUZZ_CHECK(tinyai::testing::LoadTmai(model, source, &error), "%s", error.c_str());
  for (int mode = 0; mode < 3; ++mode) {
    // ScratchDir removes only files: the folders are flat names in it.
    const std::string folder = scratch.File(("ckpt" + std::to_string(mode)).c_str());
    ::mkdir(folder.c_str(), 0755);
    tinyai::testing::HfOptions o;
    o.shards = mode == 2 ? 2 : 1;
    FUZZ_CHECK(tinyai::testing::WriteHfCheckpoint(*source, o, folder, &error), "%s", error.c_str());
    folders->push_back(folder);
  }
  return *folders;
}

void WriteSeeds(const char* dir) {
  for (int mode = 0; mode < 3; ++mode) {
    std::vector<uint8_t> file;
    FUZZ_CHECK(tinyai_fuzz::ReadFile(Folders()[static_cast<size_t>(mode)] + "/" + kFiles[mode], &file), "seed %d", mode);
    file.insert(file.begin(), static_cast<uint8_t>(mode));
    tinyai_fuzz::WriteSeed(dir, std::string("checkpoint-") + kFiles[mode], file.data(), file.size());
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  tinyai_fuzz::WriteSeedsIfAsked(WriteSeeds);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const int mode = data[0] % 3;
  const uint8_t* body = data + 1;
  const size_t n = size - 1;
  tinyaiClearLastError();
  if (mode == 0) {
    tinyai::safetensors::File parsed;
    const TinyAIStatus s = tinyai::safetensors::Parse(body, n, n, "input", &parsed);
    if (s != TINYAI_OK) {
      CheckFailure(s, "safetensors::Parse");
    } else {
      for (const tinyai::safetensors::Tensor& t : parsed.tensors) {
        FUZZ_CHECK(t.offset >= parsed.data_offset && t.offset <= n && t.bytes <= n - t.offset,
                   "tensor '%s' outside the file", t.name.c_str());
        FUZZ_CHECK(t.bytes == t.elements() * tinyai::safetensors::DTypeBytes(t.dtype), "tensor '%s' size", t.name.c_str());
      }
    }
  } else {
    nlohmann::json j;
    const TinyAIStatus s = tinyai::ParseJson(reinterpret_cast<const char*>(body), n, 1u << 20, 1u << 14, "input", &j);
    if (s != TINYAI_OK) CheckFailure(s, "ParseJson");
  }

  const std::string& folder = Folders()[static_cast<size_t>(mode)];
  const std::string in = folder + "/" + kFiles[mode];
  std::vector<uint8_t> original;
  FUZZ_CHECK(tinyai_fuzz::ReadFile(in, &original), "cannot read %s", in.c_str());
  FUZZ_CHECK(tinyai_fuzz::WriteFile(in, body, n), "cannot write %s", in.c_str());
  const std::string out = tinyai_fuzz::ScratchDir::Get().File("out.tmai");
  tinyai::LlamaHyperParams shape;
  tinyaiClearLastError();
  const TinyAIStatus s = tinyai::ConvertSafetensors(folder.c_str(), out.c_str(), &shape);
  if (s != TINYAI_OK) {
    CheckFailure(s, "ConvertSafetensors");
    FUZZ_CHECK(std::strstr(tinyaiGetLastErrorMessage(), folder.c_str()) != nullptr ||
                   std::strstr(tinyaiGetLastErrorMessage(), out.c_str()) != nullptr ||
                   std::strstr(tinyaiGetLastErrorMessage(), "tensor '") != nullptr,
               "the message names no file or tensor");
  } else {
    tinyai_fuzz::RunConverted(out, shape);
  }
  std::remove(out.c_str());
  FUZZ_CHECK(tinyai_fuzz::WriteFile(in, original.data(), original.size()), "cannot restore %s", in.c_str());
  return 0;
}
