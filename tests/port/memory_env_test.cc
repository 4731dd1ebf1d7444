// The memory limit read from the system (tinyaiDetectMemoryLimit, the tools'
// --mem-limit auto): port::ReadMemoryBounds over directories laid out like
// /proc and /sys - cgroup v1 and v2, nested limits, a container's mount
// root, escaped mount points, memory.high, unreadable and malformed files -
// and the C call on this machine.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "capi/memory_env.h"
#include "format/test_models.h"
#include "port/port.h"
#include "tinyai/tinyai.h"

namespace tinyai {
namespace {

namespace fs = std::filesystem;
namespace tt = tinyai::testing;

constexpr uint64_t kMiB = 1 << 20;

class FakeSystem {
 public:
  void Write(const std::string& rel, const std::string& text) {
    const fs::path p = fs::path(dir_.path()) / rel;
    fs::create_directories(p.parent_path());
    std::ofstream(p) << text;
  }
  // A v1 memory cgroup directory (under the mount at sys/fs/cgroup/memory).
  void V1(const std::string& dir, const std::string& limit, uint64_t usage, uint64_t inactive) {
    const std::string d = "sys/fs/cgroup/memory" + dir;
    Write(d + "/memory.limit_in_bytes", limit + "\n");
    Write(d + "/memory.usage_in_bytes", std::to_string(usage) + "\n");
    Write(d + "/memory.stat", "cache 1\ninactive_file 7\ntotal_cache 2\ntotal_inactive_file " +
                                  std::to_string(inactive) + "\n");
  }
  void V2(const std::string& dir, const std::string& max, const std::string& high, uint64_t current,
          uint64_t inactive) {
    const std::string d = "sys/fs/cgroup" + dir;
    Write(d + "/memory.max", max + "\n");
    if (!high.empty()) Write(d + "/memory.high", high + "\n");
    Write(d + "/memory.current", std::to_string(current) + "\n");
    Write(d + "/memory.stat", "anon 5\nfile 9\ninactive_file " + std::to_string(inactive) + "\nactive_file 3\n");
  }
  void MemAvailable(uint64_t bytes) {
    Write("proc/meminfo", "MemTotal:       25165824 kB\nMemFree:  1000 kB\nMemAvailable:   " +
                              std::to_string(bytes / 1024) + " kB\n");
  }
  std::string root() const { return dir_.path(); }
  port::MemoryBounds Read(TinyAIStatus want = TINYAI_OK) const {
    port::MemoryBounds b;
    EXPECT_EQ(port::ReadMemoryBounds(root().c_str(), &b), want);
    return b;
  }

 private:
  tt::TempDir dir_;
};

const char kV1Mounts[] =
    "30 22 0:27 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
    "31 30 0:28 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n"
    "34 30 0:31 / /sys/fs/cgroup/memory rw,relatime shared:9 - cgroup cgroup rw,memory\n"
    "40 30 0:37 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";

// A v1 limit on the process's cgroup; the parent's "no limit" (the kernel's
// huge number) bounds nothing; page cache the kernel can take back is room.
TEST(MemoryBounds, CgroupV1) {
  FakeSystem sys;
  sys.Write("proc/self/mountinfo", kV1Mounts);
  sys.Write("proc/self/cgroup", "9:name=systemd:/\n4:memory:/jobs/run.7\n1:cpu:/\n0::/\n");
  sys.V1("", "9223372036854771712", 900 * kMiB, 10 * kMiB);
  sys.V1("/jobs", "9223372036854771712", 800 * kMiB, 10 * kMiB);
  sys.V1("/jobs/run.7", std::to_string(64 * kMiB), 10 * kMiB, 4 * kMiB);
  sys.MemAvailable(20000 * kMiB);
  const port::MemoryBounds b = sys.Read();
  EXPECT_EQ(b.cgroup_version, 1);
  EXPECT_EQ(b.cgroup_limit, 64 * kMiB);
  EXPECT_EQ(b.cgroup_usage, 10 * kMiB);
  EXPECT_EQ(b.cgroup_reclaimable, 4 * kMiB);  // total_inactive_file, not the cgroup's own inactive_file
  EXPECT_EQ(std::string(b.cgroup_dir), sys.root() + "/sys/fs/cgroup/memory/jobs/run.7");
  EXPECT_EQ(b.system_available, 20000 * kMiB);

  TinyAIMemoryEnvironment env;
  ASSERT_EQ(DetectMemoryLimit(sys.root().c_str(), &env), TINYAI_OK) << tinyaiGetLastErrorMessage();
  EXPECT_EQ(env.source, TINYAI_MEMORY_SOURCE_CGROUP_V1);
  EXPECT_EQ(env.roomBytes, (64 - 10 + 4) * kMiB);
  EXPECT_EQ(env.overheadBytes, TINYAI_PROCESS_OVERHEAD_BYTES);
  EXPECT_EQ(env.limitBytes, env.roomBytes - TINYAI_PROCESS_OVERHEAD_BYTES);
}

// A parent with less room than the child bounds it.
TEST(MemoryBounds, AnAncestorWithLessRoomBounds) {
  FakeSystem sys;
  sys.Write("proc/self/mountinfo", kV1Mounts);
  sys.Write("proc/self/cgroup", "4:memory:/a/b\n");
  sys.V1("/a", std::to_string(100 * kMiB), 90 * kMiB, 0);
  sys.V1("/a/b", std::to_string(64 * kMiB), 1 * kMiB, 0);
  const port::MemoryBounds b = sys.Read();
  EXPECT_EQ(b.cgroup_limit, 100 * kMiB);
  EXPECT_EQ(std::string(b.cgroup_dir), sys.root() + "/sys/fs/cgroup/memory/a");
  EXPECT_EQ(b.system_available, 0u);  // no meminfo: the cgroup alone
  TinyAIMemoryEnvironment env;
  ASSERT_EQ(DetectMemoryLimit(sys.root().c_str(), &env), TINYAI_ERR_RESOURCE_EXHAUSTED);  // 10 MiB of room
  EXPECT_EQ(env.roomBytes, 10 * kMiB);
  EXPECT_EQ(env.limitBytes, 0u);
  const std::string msg = tinyaiGetLastErrorMessage();
  EXPECT_NE(msg.find("sys/fs/cgroup/memory/a allows 100.0 MiB and holds 90.0 MiB"), std::string::npos) << msg;
  EXPECT_NE(msg.find("raise the cgroup's limit by 7.0 MiB"), std::string::npos) << msg;
  TinyAIErrorInfo info;
  info.structSize = sizeof info;
  ASSERT_EQ(tinyaiGetLastErrorInfo(&info), TINYAI_OK);
  EXPECT_EQ(info.resource, TINYAI_RESOURCE_SYSTEM);
  EXPECT_EQ(info.stage, TINYAI_STAGE_ENVIRONMENT);
  EXPECT_EQ(info.bytesLimit, 10 * kMiB);
  EXPECT_EQ(info.bytesNeeded, 16 * kMiB + 1);
  EXPECT_EQ(info.remedy, TINYAI_REMEDY_FREE_MEMORY);
  EXPECT_EQ(info.remedyValue, 6 * kMiB + 1);
}

// cgroup v2: memory.max up the tree, memory.high when lower, "max" for none.
TEST(MemoryBounds, CgroupV2) {
  FakeSystem sys;
  sys.Write("proc/self/mountinfo", "25 1 0:23 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n");
  sys.Write("proc/self/cgroup", "0::/user.slice/app.scope\n");
  sys.V2("/user.slice", std::to_string(512 * kMiB), "max", 100 * kMiB, 20 * kMiB);
  sys.V2("/user.slice/app.scope", "max", "", 50 * kMiB, 0);
  sys.MemAvailable(4096 * kMiB);
  port::MemoryBounds b = sys.Read();
  EXPECT_EQ(b.cgroup_version, 2);
  EXPECT_EQ(b.cgroup_limit, 512 * kMiB);
  EXPECT_EQ(b.cgroup_usage, 100 * kMiB);
  EXPECT_EQ(b.cgroup_reclaimable, 20 * kMiB);
  TinyAIMemoryEnvironment env;
  ASSERT_EQ(DetectMemoryLimit(sys.root().c_str(), &env), TINYAI_OK);
  EXPECT_EQ(env.source, TINYAI_MEMORY_SOURCE_CGROUP_V2);
  EXPECT_EQ(env.roomBytes, (512 - 100 + 20) * kMiB);

  // memory.high below memory.max: the process would be throttled above it.
  sys.V2("/user.slice/app.scope", std::to_string(300 * kMiB), std::to_string(200 * kMiB), 50 * kMiB, 0);
  b = sys.Read();
  EXPECT_EQ(b.cgroup_limit, 200 * kMiB);
  EXPECT_EQ(std::string(b.cgroup_dir), sys.root() + "/sys/fs/cgroup/user.slice/app.scope");
}

// A container sees its own cgroup as the mount's root, and mount points
// with a space come escaped.
TEST(MemoryBounds, AContainersMountRootAndEscapedPaths) {
  FakeSystem sys;
  sys.Write("proc/self/mountinfo",
            "34 30 0:31 /docker/abc /sys/fs/cgroup/mem\\040ory rw - cgroup cgroup rw,nosuid,memory\n");
  sys.Write("proc/self/cgroup", "4:memory:/docker/abc\n");
  sys.Write("sys/fs/cgroup/mem ory/memory.limit_in_bytes", std::to_string(256 * kMiB));
  sys.Write("sys/fs/cgroup/mem ory/memory.usage_in_bytes", std::to_string(6 * kMiB));
  const port::MemoryBounds b = sys.Read();
  EXPECT_EQ(b.cgroup_version, 1);
  EXPECT_EQ(b.cgroup_limit, 256 * kMiB);
  EXPECT_EQ(b.cgroup_reclaimable, 0u);  // no memory.stat: nothing counted as reclaimable
  EXPECT_EQ(std::string(b.cgroup_dir), sys.root() + "/sys/fs/cgroup/mem ory");

  // A cgroup path outside the mount's root is not this mount's: no cgroup.
  sys.Write("proc/self/cgroup", "4:memory:/other\n");
  sys.MemAvailable(64 * kMiB);
  EXPECT_EQ(sys.Read().cgroup_version, 0);
}

// No cgroup limit: MemAvailable bounds; a tighter MemAvailable beats a cgroup.
TEST(MemoryBounds, TheSystemsAvailableMemory) {
  FakeSystem sys;
  sys.Write("proc/self/mountinfo", kV1Mounts);
  sys.Write("proc/self/cgroup", "4:memory:/\n");
  sys.V1("", "9223372036854771712", 900 * kMiB, 10 * kMiB);
  sys.MemAvailable(1000 * kMiB);
  TinyAIMemoryEnvironment env;
  ASSERT_EQ(DetectMemoryLimit(sys.root().c_str(), &env), TINYAI_OK);
  EXPECT_EQ(env.source, TINYAI_MEMORY_SOURCE_SYSTEM);
  EXPECT_EQ(env.cgroupLimitBytes, 0u);
  EXPECT_STREQ(env.cgroupPath, "");
  EXPECT_EQ(env.roomBytes, 1000 * kMiB);

  sys.V1("", std::to_string(2000 * kMiB), 10 * kMiB, 0);
  ASSERT_EQ(DetectMemoryLimit(sys.root().c_str(), &env), TINYAI_OK);
  EXPECT_EQ(env.source, TINYAI_MEMORY_SOURCE_SYSTEM);  // 1000 MiB available < 1990 MiB of the cgroup's room
  EXPECT_EQ(env.cgroupLimitBytes, 2000 * kMiB);       // still reported
  EXPECT_EQ(env.roomBytes, 1000 * kMiB);

  sys.MemAvailable(10 * kMiB);
  ASSERT_EQ(DetectMemoryLimit(sys.root().c_str(), &env), TINYAI_ERR_RESOURCE_EXHAUSTED);
  EXPECT_NE(std::string(tinyaiGetLastErrorMessage()).find("10.0 MiB available (MemAvailable)"), std::string::npos);
}

// Malformed and missing files are skipped, not misread; nothing at all is
// TINYAI_ERR_UNSUPPORTED with the fix named.
TEST(MemoryBounds, MalformedAndMissingFiles) {
  FakeSystem sys;
  sys.Read(TINYAI_ERR_UNSUPPORTED);
  TinyAIMemoryEnvironment env;
  EXPECT_EQ(DetectMemoryLimit(sys.root().c_str(), &env), TINYAI_ERR_UNSUPPORTED);
  EXPECT_NE(std::string(tinyaiGetLastErrorMessage()).find("--mem-limit SIZE"), std::string::npos);

  sys.Write("proc/self/mountinfo", std::string(kV1Mounts) + "garbage\n\n1 2 3\n");
  sys.Write("proc/self/cgroup", "nonsense\n4:memory:/x\n");
  for (const char* bad : {"", "-5", "12abc", "0x100", "lots"}) {
    SCOPED_TRACE(bad);
    sys.V1("/x", bad, kMiB, 0);
    EXPECT_EQ(sys.Read(TINYAI_ERR_UNSUPPORTED).cgroup_version, 0);
  }
  sys.V1("/x", std::to_string(64 * kMiB), kMiB, 0);
  sys.Write("sys/fs/cgroup/memory/x/memory.usage_in_bytes", "many\n");  // a limit without a usage: skipped
  EXPECT_EQ(sys.Read(TINYAI_ERR_UNSUPPORTED).cgroup_version, 0);
  sys.Write("sys/fs/cgroup/memory/x/memory.usage_in_bytes", std::to_string(kMiB) + "\n");
  EXPECT_EQ(sys.Read().cgroup_limit, 64 * kMiB);
  // Reclaimable page cache never counts for more than the usage.
  sys.V1("/x", std::to_string(64 * kMiB), kMiB, 5 * kMiB);
  EXPECT_EQ(sys.Read().cgroup_reclaimable, kMiB);
}

// The C call on this machine: a limit below what the system has, and the
// bad arguments.
TEST(MemoryBounds, TheCCall) {
  EXPECT_EQ(tinyaiDetectMemoryLimit(nullptr), TINYAI_ERR_INVALID_ARGUMENT);
  TinyAIMemoryEnvironment env;
  env.structSize = 8;
  EXPECT_EQ(tinyaiDetectMemoryLimit(&env), TINYAI_ERR_INVALID_ARGUMENT);
  env.structSize = sizeof env;
  const TinyAIStatus s = tinyaiDetectMemoryLimit(&env);
  if (s == TINYAI_ERR_UNSUPPORTED) GTEST_SKIP() << "no /proc here: " << tinyaiGetLastErrorMessage();
  ASSERT_EQ(s, TINYAI_OK) << tinyaiGetLastErrorMessage();
  EXPECT_EQ(env.structSize, sizeof env);
  EXPECT_NE(env.source, TINYAI_MEMORY_SOURCE_NONE);
  EXPECT_GT(env.limitBytes, 0u);
  EXPECT_EQ(env.limitBytes + env.overheadBytes, env.roomBytes);
  if (env.systemAvailableBytes != 0) EXPECT_LE(env.roomBytes, env.systemAvailableBytes);
}

}  // namespace
}  // namespace tinyai
