// TmaiWriter's output file: written beside the path and renamed over it by
// Finish, so a write that stops half way (an error, an early return, a
// crash) leaves whatever the path held and no partial file.
#include <gtest/gtest.h>

#include <dirent.h>

#include <string>
#include <vector>

#include "format/test_models.h"
#include "format/tmai_writer.h"
#include "tinyai/tinyai.h"

namespace tt = tinyai::testing;

namespace {

std::vector<std::string> Files(const std::string& dir) {
  std::vector<std::string> out;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (const struct dirent* e = ::readdir(d)) {
      if (e->d_name[0] != '.') out.push_back(e->d_name);
    }
    ::closedir(d);
  }
  return out;
}

void Declare(tinyai::TmaiWriter* w) {
  w->AddMetaString("general.architecture", "test");
  w->AddLayer(TINYAI_LAYER_EMBEDDING, -1);
  w->AddTensor("t", TINYAI_ROLE_TOKEN_EMBEDDING, TINYAI_DTYPE_F32, {4, 4});
}

TEST(TmaiWriterFile, AnUnfinishedWriteLeavesThePathAsItWas) {
  tt::TempDir dir;
  const std::string path = dir.File("model.tmai");
  ASSERT_EQ(tt::WriteTinyModel(path), TINYAI_OK) << tt::LastMessage();
  tt::Bytes before;
  ASSERT_TRUE(tt::ReadFileBytes(path, &before));
  {
    tinyai::TmaiWriter w;
    Declare(&w);
    ASSERT_EQ(w.Open(path.c_str()), TINYAI_OK) << tt::LastMessage();
    const float half[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    ASSERT_EQ(w.Write(half, sizeof half), TINYAI_OK);
    EXPECT_EQ(w.Finish(), TINYAI_ERR_MISUSE);  // 8 of the 16 values: refused, and the writer dropped
  }
  tt::Bytes after;
  ASSERT_TRUE(tt::ReadFileBytes(path, &after));
  EXPECT_EQ(after, before);
  EXPECT_EQ(Files(dir.path()), std::vector<std::string>{"model.tmai"});
  // Finished, the file is the new one; nothing else is left.
  tinyai::TmaiWriter w;
  Declare(&w);
  ASSERT_EQ(w.Open(path.c_str()), TINYAI_OK) << tt::LastMessage();
  const float all[16] = {};
  ASSERT_EQ(w.Write(all, sizeof all), TINYAI_OK);
  ASSERT_EQ(w.Finish(), TINYAI_OK) << tt::LastMessage();
  ASSERT_TRUE(tt::ReadFileBytes(path, &after));
  EXPECT_NE(after, before);
  EXPECT_EQ(Files(dir.path()), std::vector<std::string>{"model.tmai"});
  TinyAIMappedModel* m = tinyaiOpenMappedModel(path.c_str(), nullptr);
  EXPECT_NE(m, nullptr) << tt::LastMessage();
  tinyaiCloseMappedModel(m);
}

TEST(TmaiWriterFile, AFolderThatCannotBeWrittenIsNamed) {
  tinyai::TmaiWriter w;
  Declare(&w);
  tinyaiClearLastError();
  EXPECT_EQ(w.Open("/proc/no-such-folder/model.tmai"), TINYAI_ERR_FILE_NOT_FOUND);
  EXPECT_NE(std::string(tt::LastMessage()).find("'/proc/no-such-folder/model.tmai': cannot write in the directory "
                                                "'/proc/no-such-folder'"), std::string::npos)
      << tt::LastMessage();
  tinyai::TmaiWriter w2;
  Declare(&w2);
  EXPECT_EQ(w2.Open("/proc/self/model.tmai"), TINYAI_ERR_IO);  // a folder nobody may create files in
  EXPECT_NE(std::string(tt::LastMessage()).find("cannot create a file in '/proc/self'"), std::string::npos)
      << tt::LastMessage();
}

}  // namespace
