// Writing a file never destroys or corrupts another one (port::BeginOutput,
// used by every writer): for each writer - a new model (TmaiWriter), a model
// saved as it runs (tinyaiSaveMappedModel), a session, a persistent store -
// the files beside the output, a FIFO, a device, a read-only file, a file
// the process is reading, a link, two saves at once, a save killed half way
// and a save that fails half way.
#include <gtest/gtest.h>

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "format/test_models.h"
#include "format/tmai_writer.h"
#include "import/synthetic.h"
#include "port/port.h"
#include "tinyai/llm.h"
#include "tinyai/persistent.h"
#include "tinyai/tinyai.h"
#include "tinyai/utils/quantize_mixed.h"

namespace tt = tinyai::testing;

namespace {

enum class Writer { kModel, kSavedModel, kSession, kStore };

// A file size every writer's output here passes (RLIMIT_FSIZE stops it there).
constexpr rlim_t kLimit = 1024;

std::string WriterName(const ::testing::TestParamInfo<Writer>& info) {
  switch (info.param) {
    case Writer::kModel: return "NewModel";
    case Writer::kSavedModel: return "SavedModel";
    case Writer::kSession: return "Session";
    case Writer::kStore: return "Store";
  }
  return "?";
}

std::vector<std::string> Files(const std::string& dir) {
  std::vector<std::string> out;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (const struct dirent* e = ::readdir(d)) {
      if (std::string(e->d_name) != "." && std::string(e->d_name) != "..") out.push_back(e->d_name);
    }
    ::closedir(d);
  }
  std::sort(out.begin(), out.end());
  return out;
}

// A file's text, its first 64 bytes at most (a model written over a text
// file must not flood the failure's message).
std::string ReadText(const std::string& path) {
  tt::Bytes b;
  if (!tt::ReadFileBytes(path, &b)) return "<unreadable>";
  if (b.size() > 64) return std::string(b.begin(), b.begin() + 64) + "... (" + std::to_string(b.size()) + " bytes)";
  return std::string(b.begin(), b.end());
}

void WriteText(const std::string& path, const std::string& text) {
  ASSERT_TRUE(tt::WriteFileBytes(path, tt::Bytes(text.begin(), text.end()))) << path;
}

mode_t ModeOf(const std::string& path, bool follow = true) {
  struct stat st;
  if ((follow ? ::stat(path.c_str(), &st) : ::lstat(path.c_str(), &st)) != 0) return 0;
  return st.st_mode;
}

class OutputFileTest : public ::testing::TestWithParam<Writer> {
 protected:
  void SetUp() override {
    work_ = dir_.File("work");
    ASSERT_EQ(::mkdir(work_.c_str(), 0755), 0);
    source_ = dir_.File("source.tmai");
    ASSERT_EQ(tt::WriteTinyModel(source_), TINYAI_OK) << tt::LastMessage();
    model_ = tinyaiOpenMappedModel(source_.c_str(), nullptr);
    ASSERT_NE(model_, nullptr) << tt::LastMessage();
    ASSERT_EQ(tinyaiCreateLLM(model_, nullptr, &llm_), TINYAI_OK) << tt::LastMessage();
    const int32_t tokens[8] = {1, 5, 7, 9, 11, 13, 15, 17};  // a session of more than kLimit bytes
    ASSERT_EQ(tinyaiLLMEval(llm_, tokens, 8, nullptr), TINYAI_OK) << tt::LastMessage();
    TinyAIPersistentConfig cfg = tinyaiCreateDefaultPersistentConfig();
    ASSERT_EQ(tinyaiCreatePersistentStore(&cfg, &store_), TINYAI_OK) << tt::LastMessage();
    ASSERT_EQ(tinyaiDeclarePersistent(store_, "persistent {\n  step: i32 @init(0)\n  rows: f32[64, 8]\n}\n"), TINYAI_OK)
        << tt::LastMessage();
    ASSERT_EQ(tinyaiPersistentIncrement(store_, "step", 3), TINYAI_OK) << tt::LastMessage();
  }
  void TearDown() override {
    tinyaiDestroyPersistentStore(store2_);
    tinyaiDestroyLLM(llm2_);
    tinyaiCloseMappedModel(model2_);
    tinyaiDestroyPersistentStore(store_);
    tinyaiDestroyLLM(llm_);
    tinyaiCloseMappedModel(model_);
  }

  // Writes the parameter's kind of file to path (from the second set of
  // handles when other, which only SecondHandles() makes).
  TinyAIStatus Save(const std::string& path, bool other = false) {
    switch (GetParam()) {
      case Writer::kModel: return tt::WriteTinyModel(path);
      case Writer::kSavedModel: return tinyaiSaveMappedModel(other ? model2_ : model_, path.c_str(), nullptr);
      case Writer::kSession: return tinyaiSaveLLMSession(other ? llm2_ : llm_, path.c_str());
      case Writer::kStore: return tinyaiSavePersistentStore(other ? store2_ : store_, path.c_str());
    }
    return TINYAI_ERR_INTERNAL;
  }
  // A model, an LLM and a store of their own, with other contents, for a
  // second thread (a handle is used by one thread at a time).
  void SecondHandles() {
    model2_ = tinyaiOpenMappedModel(source_.c_str(), nullptr);
    ASSERT_NE(model2_, nullptr) << tt::LastMessage();
    ASSERT_EQ(tinyaiCreateLLM(model2_, nullptr, &llm2_), TINYAI_OK) << tt::LastMessage();
    const int32_t tokens[4] = {1, 2, 3, 4};
    ASSERT_EQ(tinyaiLLMEval(llm2_, tokens, 4, nullptr), TINYAI_OK) << tt::LastMessage();
    TinyAIPersistentConfig cfg = tinyaiCreateDefaultPersistentConfig();
    ASSERT_EQ(tinyaiCreatePersistentStore(&cfg, &store2_), TINYAI_OK) << tt::LastMessage();
    // The same declaration (a load checks it), other contents.
    ASSERT_EQ(tinyaiDeclarePersistent(store2_, "persistent {\n  step: i32 @init(0)\n  rows: f32[64, 8]\n}\n"),
              TINYAI_OK) << tt::LastMessage();
    ASSERT_EQ(tinyaiPersistentIncrement(store2_, "step", 11), TINYAI_OK) << tt::LastMessage();
  }
  // Reads path back as the parameter's kind of file.
  TinyAIStatus Load(const std::string& path) {
    switch (GetParam()) {
      case Writer::kModel:
      case Writer::kSavedModel: {
        TinyAIMappedModel* m = tinyaiOpenMappedModel(path.c_str(), nullptr);
        if (!m) return tinyaiGetLastError();
        tinyaiCloseMappedModel(m);
        return TINYAI_OK;
      }
      case Writer::kSession: return tinyaiLoadLLMSession(llm_, path.c_str());
      case Writer::kStore: return tinyaiLoadPersistentStore(store_, path.c_str());
    }
    return TINYAI_ERR_INTERNAL;
  }

  tt::TempDir dir_;
  std::string work_;    // the folder outputs go to
  std::string source_;  // the open model's file
  TinyAIMappedModel* model_ = nullptr;
  TinyAILLM* llm_ = nullptr;
  TinyAIPersistentStore* store_ = nullptr;
  TinyAIMappedModel* model2_ = nullptr;
  TinyAILLM* llm2_ = nullptr;
  TinyAIPersistentStore* store2_ = nullptr;
};

// The names earlier versions wrote beside the output (PATH.part,
// PATH.partial-PID) and a link there to a file elsewhere are other files: a
// save neither truncates, removes nor writes through them.
TEST_P(OutputFileTest, FilesAtTemporaryNamesAreLeftAlone) {
  const std::string out = work_ + "/out.bin";
  const std::string victim = dir_.File("victim.txt");
  WriteText(victim, "the victim's own text");
  WriteText(out + ".part", "an input named like a temporary");
  ASSERT_EQ(::symlink(victim.c_str(), (out + ".partial-" + std::to_string(::getpid())).c_str()), 0);
  const std::string pid_tmp = out + ".tinyai-" + std::to_string(::getpid()) + "-0.tmp";
  ASSERT_EQ(::symlink(victim.c_str(), pid_tmp.c_str()), 0);
  const std::vector<std::string> before = Files(work_);
  ASSERT_EQ(Save(out), TINYAI_OK) << tt::LastMessage();
  EXPECT_EQ(Load(out), TINYAI_OK) << tt::LastMessage();
  EXPECT_EQ(ReadText(out + ".part"), "an input named like a temporary");
  EXPECT_EQ(ReadText(victim), "the victim's own text");
  std::vector<std::string> expected = before;
  expected.push_back("out.bin");
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(Files(work_), expected);
}

// A FIFO, a directory, a socket's kind of file are refused by name and left
// as they were; a character device is written in place, never replaced.
TEST_P(OutputFileTest, WhatIsNotARegularFileIsRefusedOrWrittenInPlace) {
  const std::string fifo = work_ + "/fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  // A reader holds the FIFO open, so that a writer that opened it would not block.
  const int reader = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK);
  ASSERT_GE(reader, 0);
  tinyaiClearLastError();
  EXPECT_EQ(Save(fifo), TINYAI_ERR_INVALID_ARGUMENT) << tt::LastMessage();
  EXPECT_TRUE(tt::Contains(tt::LastMessage(), "'" + fifo + "' is a FIFO")) << tt::LastMessage();
  EXPECT_TRUE(S_ISFIFO(ModeOf(fifo)));
  ::close(reader);

  const std::string folder = work_ + "/folder";
  ASSERT_EQ(::mkdir(folder.c_str(), 0755), 0);
  WriteText(folder + "/kept", "kept");
  EXPECT_EQ(Save(folder), TINYAI_ERR_INVALID_ARGUMENT) << tt::LastMessage();
  EXPECT_TRUE(tt::Contains(tt::LastMessage(), "is a directory")) << tt::LastMessage();
  EXPECT_EQ(ReadText(folder + "/kept"), "kept");
  EXPECT_EQ(Files(work_), (std::vector<std::string>{"fifo", "folder"}));

  // A device node of our own that works as /dev/null does (never the
  // system's: an old build replaced the path it was given).
  const std::string null_dev = work_ + "/null";
  if (::mknod(null_dev.c_str(), S_IFCHR | 0666, makedev(1, 3)) != 0) {
    GTEST_SKIP() << "cannot make a device node here (needs root): " << std::strerror(errno);
  }
  const int probe = ::open(null_dev.c_str(), O_WRONLY);
  if (probe < 0) GTEST_SKIP() << "device nodes are not usable on this file system (nodev)";
  ::close(probe);
  EXPECT_EQ(Save(null_dev), TINYAI_OK) << tt::LastMessage();
  EXPECT_TRUE(S_ISCHR(ModeOf(null_dev))) << "the device was replaced";
  EXPECT_EQ(Files(work_), (std::vector<std::string>{"fifo", "folder", "null"}));
}

// The file of the model that is open, and any file the process has open to
// read, are refused; the file stays as it was.
TEST_P(OutputFileTest, AFileThisProcessIsReadingIsRefused) {
  tt::Bytes model_before;
  ASSERT_TRUE(tt::ReadFileBytes(source_, &model_before));
  tinyaiClearLastError();
  EXPECT_EQ(Save(source_), TINYAI_ERR_INVALID_ARGUMENT) << tt::LastMessage();
  tt::Bytes model_after;
  ASSERT_TRUE(tt::ReadFileBytes(source_, &model_after));
  EXPECT_EQ(model_after, model_before);
  if (GetParam() != Writer::kSavedModel) {  // that one names the model's own file (its older check)
    EXPECT_TRUE(tt::Contains(tt::LastMessage(), "this process is reading")) << tt::LastMessage();
  }

  const std::string input = work_ + "/prompt.txt";
  WriteText(input, "a prompt being read");
  FILE* f = std::fopen(input.c_str(), "rb");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(Save(input), TINYAI_ERR_INVALID_ARGUMENT) << tt::LastMessage();
  EXPECT_TRUE(tt::Contains(tt::LastMessage(), "'" + input + "' is a file this process is reading"))
      << tt::LastMessage();
  std::fclose(f);
  EXPECT_EQ(ReadText(input), "a prompt being read");
  // Closed, it is only a file: replaced.
  EXPECT_EQ(Save(input), TINYAI_OK) << tt::LastMessage();
  EXPECT_EQ(Files(work_), std::vector<std::string>{"prompt.txt"});
}

// A read-only file is not replaced; a writable one keeps its permissions.
TEST_P(OutputFileTest, PermissionsAreKept) {
  const std::string locked = work_ + "/locked.bin";
  WriteText(locked, "read-only");
  ASSERT_EQ(::chmod(locked.c_str(), 0444), 0);
  tinyaiClearLastError();
  EXPECT_EQ(Save(locked), TINYAI_ERR_IO) << tt::LastMessage();
  EXPECT_TRUE(tt::Contains(tt::LastMessage(), "is read-only")) << tt::LastMessage();
  EXPECT_EQ(ReadText(locked), "read-only");

  const std::string privy = work_ + "/private.bin";
  WriteText(privy, "old");
  ASSERT_EQ(::chmod(privy.c_str(), 0600), 0);
  ASSERT_EQ(Save(privy), TINYAI_OK) << tt::LastMessage();
  EXPECT_EQ(ModeOf(privy) & 07777, 0600u);
  EXPECT_EQ(Load(privy), TINYAI_OK) << tt::LastMessage();
  EXPECT_EQ(Files(work_), (std::vector<std::string>{"locked.bin", "private.bin"}));
}

// A link to a file: the file is replaced and the link stays. A link to
// nothing is refused.
TEST_P(OutputFileTest, ALinkReplacesTheFileItNames) {
  const std::string real = dir_.File("real.bin");
  WriteText(real, "old");
  const std::string link = work_ + "/link.bin";
  ASSERT_EQ(::symlink(real.c_str(), link.c_str()), 0);
  ASSERT_EQ(Save(link), TINYAI_OK) << tt::LastMessage();
  EXPECT_TRUE(S_ISLNK(ModeOf(link, false))) << "the link was replaced by a file";
  EXPECT_NE(ReadText(real), "old");
  EXPECT_EQ(Load(real), TINYAI_OK) << tt::LastMessage();
  EXPECT_EQ(Files(work_), std::vector<std::string>{"link.bin"});

  const std::string dangling = work_ + "/dangling.bin";
  ASSERT_EQ(::symlink(dir_.File("nothing").c_str(), dangling.c_str()), 0);
  EXPECT_EQ(Save(dangling), TINYAI_ERR_FILE_NOT_FOUND) << tt::LastMessage();
  EXPECT_TRUE(S_ISLNK(ModeOf(dangling, false)));
}

// Saves from two threads to one path: every one reports success and the
// file is always a whole one of them.
TEST_P(OutputFileTest, SavesToOnePathAtOnceEachWriteAWholeFile) {
  SecondHandles();
  const std::string out = work_ + "/shared.bin";
  std::vector<TinyAIStatus> status(2 * 20, TINYAI_OK);
  auto run = [&](int who) {
    for (int i = 0; i < 20; ++i) status[static_cast<size_t>(who * 20 + i)] = Save(out, who == 1);
  };
  std::thread a(run, 0), b(run, 1);
  a.join();
  b.join();
  for (TinyAIStatus s : status) EXPECT_EQ(s, TINYAI_OK);
  EXPECT_EQ(Load(out), TINYAI_OK) << tt::LastMessage();
  EXPECT_EQ(Files(work_), std::vector<std::string>{"shared.bin"});
}

// A save killed half way (the file-size limit's signal, as a crash or kill -9
// would) leaves the path as it was and no temporary behind.
TEST_P(OutputFileTest, ASaveKilledHalfWayLeavesNothingBehind) {
  const std::string out = work_ + "/out.bin";
  WriteText(out, "what the path held");
  std::fflush(nullptr);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    struct rlimit limit = {kLimit, RLIM_INFINITY};  // past the first write, before the end
    ::setrlimit(RLIMIT_FSIZE, &limit);
    ::signal(SIGXFSZ, SIG_DFL);
    Save(out);
    ::_exit(0);  // not reached when the limit killed the save
  }
  int wstatus = 0;
  ASSERT_EQ(::waitpid(child, &wstatus, 0), child);
  ASSERT_TRUE(WIFSIGNALED(wstatus)) << "the save was expected to be killed (it is larger than kLimit)";
  EXPECT_EQ(WTERMSIG(wstatus), SIGXFSZ);
  EXPECT_EQ(ReadText(out), "what the path held");
  EXPECT_EQ(Files(work_), std::vector<std::string>{"out.bin"}) << "a temporary was left behind";
}

// A save that fails half way (the disk is full, a file-size limit) reports
// the cause and leaves the path as it was and no temporary behind.
TEST_P(OutputFileTest, ASaveThatFailsHalfWayLeavesThePathAsItWas) {
  const std::string out = work_ + "/out.bin";
  WriteText(out, "what the path held");
  struct rlimit old_limit;
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old_limit), 0);
  void (*old_handler)(int) = ::signal(SIGXFSZ, SIG_IGN);
  struct rlimit limit = {kLimit, old_limit.rlim_max};
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &limit), 0);
  tinyaiClearLastError();
  const TinyAIStatus s = Save(out);
  const std::string message = tt::LastMessage();
  ::setrlimit(RLIMIT_FSIZE, &old_limit);
  ::signal(SIGXFSZ, old_handler);
  EXPECT_EQ(s, TINYAI_ERR_IO) << message;
  EXPECT_TRUE(tt::Contains(message, "File too large")) << message;
  EXPECT_EQ(ReadText(out), "what the path held");
  EXPECT_EQ(Files(work_), std::vector<std::string>{"out.bin"}) << "a temporary was left behind";
}

INSTANTIATE_TEST_SUITE_P(EveryWriter, OutputFileTest,
                         ::testing::Values(Writer::kModel, Writer::kSavedModel, Writer::kSession, Writer::kStore),
                         WriterName);

// Two writers of one path, interleaved in one thread: each writes its own
// file (an older build shared one temporary, and the first to finish left a
// file the second then wrote into).
TEST(OutputFile, TwoOpenWritersOfOnePathDoNotMeet) {
  tt::TempDir dir;
  const std::string out = dir.File("model.tmai");
  auto declare = [](tinyai::TmaiWriter* w, float value) {
    w->AddMetaString("general.architecture", "test");
    w->AddLayer(TINYAI_LAYER_EMBEDDING, -1);
    w->AddTensor("t", TINYAI_ROLE_TOKEN_EMBEDDING, TINYAI_DTYPE_F32, {4, 4});
    return std::vector<float>(16, value);
  };
  tinyai::TmaiWriter a, b;
  const std::vector<float> va = declare(&a, 1.0f), vb = declare(&b, 2.0f);
  ASSERT_EQ(a.Open(out.c_str()), TINYAI_OK) << tt::LastMessage();
  ASSERT_EQ(b.Open(out.c_str()), TINYAI_OK) << tt::LastMessage();
  ASSERT_EQ(a.WriteValues(va.data(), va.size()), TINYAI_OK) << tt::LastMessage();
  ASSERT_EQ(a.Finish(), TINYAI_OK) << tt::LastMessage();
  tt::Bytes first;
  ASSERT_TRUE(tt::ReadFileBytes(out, &first));
  ASSERT_EQ(b.WriteValues(vb.data(), vb.size()), TINYAI_OK) << tt::LastMessage();
  ASSERT_EQ(b.Finish(), TINYAI_OK) << tt::LastMessage();
  tt::Bytes second;
  ASSERT_TRUE(tt::ReadFileBytes(out, &second));
  EXPECT_NE(first, second);
  TinyAIMappedModel* m = tinyaiOpenMappedModel(out.c_str(), nullptr);
  ASSERT_NE(m, nullptr) << tt::LastMessage();
  tinyaiCloseMappedModel(m);
}

}  // namespace
