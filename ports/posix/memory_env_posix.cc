// POSIX port: the memory bounds Linux puts on this process (port.h,
// ReadMemoryBounds) - its memory cgroups, v1 or v2, and MemAvailable.
//
// /proc/self/cgroup names the process's cgroup in each hierarchy
// ("4:memory:/a/b" for a v1 controller, "0::/a/b" for v2);
// /proc/self/mountinfo says where each hierarchy is mounted and which of
// its directories the mount shows (a container sees its own cgroup as the
// mount's root). The cgroup's directory and every ancestor up to the mount
// are read, since a parent's limit bounds its children: v1
// memory.limit_in_bytes, memory.usage_in_bytes and memory.stat's
// total_inactive_file; v2 memory.max, memory.high, memory.current and
// memory.stat's inactive_file.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "port/port.h"

namespace tinyai {
namespace port {

namespace {

constexpr size_t kPath = 4096;
// A v1 limit at or above this is "no limit" (the kernel writes
// PAGE_COUNTER_MAX pages, 9223372036854771712 on 4 KiB pages).
constexpr uint64_t kUnlimited = uint64_t{1} << 62;

bool Join(char* out, const char* a, const char* b) {
  const int n = snprintf(out, kPath, "%s%s", a, b);
  return n >= 0 && static_cast<size_t>(n) < kPath;
}

// The first line of path (without its newline) into line; false when the
// file cannot be read.
bool ReadLine(const char* path, char* line, size_t capacity) {
  FILE* f = fopen(path, "r");
  if (f == nullptr) return false;
  const bool ok = fgets(line, static_cast<int>(capacity), f) != nullptr;
  fclose(f);
  if (ok) line[strcspn(line, "\n")] = '\0';
  return ok;
}

// A whole decimal number (trailing blanks allowed).
bool ParseU64(const char* s, uint64_t* out) {
  if (*s < '0' || *s > '9') return false;
  char* end = nullptr;
  const unsigned long long v = strtoull(s, &end, 10);
  while (*end == ' ' || *end == '\t') ++end;
  if (*end != '\0') return false;
  *out = v;
  return true;
}

// A limit file: a number, or "max" (v2) / a huge number (v1) for none.
// False when unreadable or malformed; *limit = 0 for no limit.
bool ReadLimit(const char* path, uint64_t* limit) {
  char line[64];
  if (!ReadLine(path, line, sizeof line)) return false;
  if (strcmp(line, "max") == 0) {
    *limit = 0;
    return true;
  }
  uint64_t v = 0;
  if (!ParseU64(line, &v)) return false;
  *limit = v >= kUnlimited ? 0 : v;
  return true;
}

// "KEY VALUE" lines (memory.stat) or "KEY: VALUE kB" (meminfo, scale 1024).
bool ReadKeyed(const char* path, const char* key, uint64_t scale, uint64_t* out) {
  FILE* f = fopen(path, "r");
  if (f == nullptr) return false;
  char line[256];
  const size_t n = strlen(key);
  bool found = false;
  while (!found && fgets(line, sizeof line, f) != nullptr) {
    if (strncmp(line, key, n) != 0 || (line[n] != ' ' && line[n] != ':')) continue;
    const char* p = line + n + 1;
    while (*p == ' ' || *p == '\t') ++p;
    char* end = nullptr;
    const unsigned long long v = strtoull(p, &end, 10);
    if (end != p) {
      *out = static_cast<uint64_t>(v) * scale;
      found = true;
    }
  }
  fclose(f);
  return found;
}

// Undoes mountinfo's octal escapes (\040 a space, \011, \012, \134) in place.
void Unescape(char* s) {
  char* w = s;
  for (const char* r = s; *r != '\0';) {
    if (r[0] == '\\' && r[1] >= '0' && r[1] <= '3' && r[2] >= '0' && r[2] <= '7' && r[3] >= '0' && r[3] <= '7') {
      *w++ = static_cast<char>((r[1] - '0') * 64 + (r[2] - '0') * 8 + (r[3] - '0'));
      r += 4;
    } else {
      *w++ = *r++;
    }
  }
  *w = '\0';
}

// Whether the comma-separated list has item.
bool HasItem(const char* list, const char* item) {
  const size_t n = strlen(item);
  for (const char* p = list; *p != '\0';) {
    const char* comma = strchr(p, ',');
    const size_t len = comma != nullptr ? static_cast<size_t>(comma - p) : strlen(p);
    if (len == n && strncmp(p, item, n) == 0) return true;
    if (comma == nullptr) break;
    p = comma + 1;
  }
  return false;
}

// The process's cgroup path in the hierarchy of `version` (1: the memory
// controller's, 2: the unified one's).
bool CgroupPath(const char* root, int version, char* path) {
  char file[kPath];
  if (!Join(file, root, "/proc/self/cgroup")) return false;
  FILE* f = fopen(file, "r");
  if (f == nullptr) return false;
  char line[kPath];
  bool found = false;
  while (!found && fgets(line, sizeof line, f) != nullptr) {
    line[strcspn(line, "\n")] = '\0';
    char* c1 = strchr(line, ':');
    char* c2 = c1 != nullptr ? strchr(c1 + 1, ':') : nullptr;
    if (c2 == nullptr) continue;
    *c1 = *c2 = '\0';
    const char* controllers = c1 + 1;
    const bool match = version == 1 ? HasItem(controllers, "memory") : (strcmp(line, "0") == 0 && *controllers == '\0');
    if (match && strlen(c2 + 1) < kPath) {
      strcpy(path, c2 + 1);
      found = true;
    }
  }
  fclose(f);
  return found;
}

// Where the hierarchy of `version` is mounted (mount point) and which of its
// directories the mount shows (mount root).
bool CgroupMount(const char* root, int version, char* mount_root, char* mount_point) {
  char file[kPath];
  if (!Join(file, root, "/proc/self/mountinfo")) return false;
  FILE* f = fopen(file, "r");
  if (f == nullptr) return false;
  char line[kPath];
  bool found = false;
  while (!found && fgets(line, sizeof line, f) != nullptr) {
    line[strcspn(line, "\n")] = '\0';
    // ID PARENT MAJ:MIN ROOT MOUNT-POINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPER-OPTIONS
    char* field[5];
    char* save = nullptr;
    char* tok = strtok_r(line, " ", &save);
    size_t n = 0;
    for (; tok != nullptr && n < 5; tok = strtok_r(nullptr, " ", &save)) field[n++] = tok;
    if (n < 5) continue;
    while (tok != nullptr && strcmp(tok, "-") != 0) tok = strtok_r(nullptr, " ", &save);
    const char* fstype = tok != nullptr ? strtok_r(nullptr, " ", &save) : nullptr;
    const char* source = fstype != nullptr ? strtok_r(nullptr, " ", &save) : nullptr;
    const char* options = source != nullptr ? strtok_r(nullptr, " ", &save) : nullptr;
    if (options == nullptr) continue;
    const bool match = version == 1 ? strcmp(fstype, "cgroup") == 0 && HasItem(options, "memory")
                                    : strcmp(fstype, "cgroup2") == 0;
    if (!match || strlen(field[3]) >= kPath || strlen(field[4]) >= kPath) continue;
    strcpy(mount_root, field[3]);
    strcpy(mount_point, field[4]);
    Unescape(mount_root);
    Unescape(mount_point);
    found = true;
  }
  fclose(f);
  return found;
}

// One cgroup directory's limit and room; false when it has no limit (or its
// files cannot be read).
bool ReadLevel(const char* dir, int version, uint64_t* limit, uint64_t* usage, uint64_t* reclaimable) {
  char file[kPath];
  uint64_t lim = 0;
  if (version == 1) {
    if (!Join(file, dir, "/memory.limit_in_bytes") || !ReadLimit(file, &lim)) return false;
  } else {
    if (!Join(file, dir, "/memory.max") || !ReadLimit(file, &lim)) return false;
    uint64_t high = 0;  // throttling starts there: the process would crawl above it
    if (Join(file, dir, "/memory.high") && ReadLimit(file, &high) && high != 0 && (lim == 0 || high < lim)) {
      lim = high;
    }
  }
  if (lim == 0) return false;
  char line[64];
  uint64_t use = 0;
  if (!Join(file, dir, version == 1 ? "/memory.usage_in_bytes" : "/memory.current") ||
      !ReadLine(file, line, sizeof line) || !ParseU64(line, &use)) {
    return false;
  }
  uint64_t inactive = 0;
  if (Join(file, dir, "/memory.stat") &&
      !ReadKeyed(file, version == 1 ? "total_inactive_file" : "inactive_file", 1, &inactive)) {
    ReadKeyed(file, "inactive_file", 1, &inactive);
  }
  *limit = lim;
  *usage = use;
  *reclaimable = inactive < use ? inactive : use;
  return true;
}

// src into out (capacity bytes): whole, or "..." and its end when longer.
void CopyTail(const char* src, char* out, size_t capacity) {
  const size_t n = strlen(src);
  if (n < capacity) {
    memcpy(out, src, n + 1);
    return;
  }
  memcpy(out, "...", 3);
  memcpy(out + 3, src + n - (capacity - 4), capacity - 4);
  out[capacity - 1] = '\0';
}

uint64_t Room(uint64_t limit, uint64_t usage, uint64_t reclaimable) {
  const uint64_t held = usage - reclaimable;  // reclaimable <= usage
  return held < limit ? limit - held : 0;
}

// The cgroup with the least room in the hierarchy of `version`, if any has
// a limit.
void ReadCgroups(const char* root, int version, MemoryBounds* out) {
  char path[kPath], mount_root[kPath], mount_point[kPath];
  if (!CgroupPath(root, version, path) || !CgroupMount(root, version, mount_root, mount_point)) return;
  // The path below the mount's root (a container's own cgroup is "/").
  const char* rel = path;
  const size_t mr = strlen(mount_root);
  if (strcmp(mount_root, "/") != 0) {
    if (strncmp(path, mount_root, mr) != 0 || (path[mr] != '\0' && path[mr] != '/')) return;
    rel = path + mr;
  }
  char base[kPath], dir[kPath];
  if (!Join(base, root, mount_point) || !Join(dir, base, strcmp(rel, "/") == 0 ? "" : rel)) return;
  const size_t base_len = strlen(base);
  for (;;) {
    uint64_t limit = 0, usage = 0, reclaimable = 0;
    if (ReadLevel(dir, version, &limit, &usage, &reclaimable)) {
      const bool first = out->cgroup_version == 0;
      if (first || Room(limit, usage, reclaimable) <
                       Room(out->cgroup_limit, out->cgroup_usage, out->cgroup_reclaimable)) {
        out->cgroup_version = version;
        out->cgroup_limit = limit;
        out->cgroup_usage = usage;
        out->cgroup_reclaimable = reclaimable;
        CopyTail(dir, out->cgroup_dir, sizeof out->cgroup_dir);
      }
    }
    if (strlen(dir) <= base_len) break;
    char* slash = strrchr(dir + base_len, '/');
    if (slash == nullptr) break;
    *slash = '\0';
  }
}

}  // namespace

TinyAIStatus ReadMemoryBounds(const char* root, MemoryBounds* out) {
  *out = MemoryBounds();
  ReadCgroups(root, 1, out);
  ReadCgroups(root, 2, out);
  char file[kPath];
  uint64_t available = 0;
  if (Join(file, root, "/proc/meminfo") && ReadKeyed(file, "MemAvailable", 1024, &available)) {
    out->system_available = available;
  }
  if (out->cgroup_version == 0 && out->system_available == 0) return TINYAI_ERR_UNSUPPORTED;
  return TINYAI_OK;
}

}  // namespace port
}  // namespace tinyai
