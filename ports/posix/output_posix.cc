// POSIX port: output files (port.h, "Output files"). Every file TinyAI writes
// goes through here so that a save never destroys or corrupts another file:
//
//  1. The target is resolved (a symbolic link to an existing file: the file
//     it names) and checked: a regular file or nothing is replaced; a
//     character device (/dev/null) is written in place; anything else (a
//     directory, a FIFO, a socket, a block device, a dangling link) is
//     refused, as is a read-only file and a file this process has open or
//     mapped (a model being run, a prompt being read).
//  2. The data goes to a temporary that only this save can reach: an unnamed
//     file in the target's directory (Linux's O_TMPFILE: a crash or kill -9
//     leaves nothing behind), else one created exclusively (O_EXCL, which also
//     never follows a link) under a name no other save uses,
//     NAME.tinyai-PID-N.tmp (a stale one, after a crash, is recognisable by
//     that pattern and PID).
//  3. Commit: fsync, link the temporary to such a name (O_TMPFILE), rename it
//     over the target, fsync the directory. Any failure removes the temporary
//     and leaves the target as it was.
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <new>

#include "common/status.h"
#include "port/port.h"

namespace tinyai {
namespace port {

namespace {

// Makes temporary names unique within the process (the PID across processes;
// O_EXCL settles any other collision).
unsigned g_temp_counter = 0;

unsigned NextTempNumber() { return __atomic_fetch_add(&g_temp_counter, 1u, __ATOMIC_RELAXED); }

struct OutputState {
  int dir_fd = -1;
  int fd = -1;
  bool named = false;       // the temporary has a name in the directory (temp)
  bool keep_mode = false;   // the target existed: its permission bits are kept
  mode_t mode = 0;
  char* target = nullptr;   // the path as the caller gave it (messages)
  char* base = nullptr;     // the final name inside dir_fd
  char temp[NAME_MAX + 1] = {};
};

char* CopyString(const char* s, size_t n) {
  char* out = static_cast<char*>(::malloc(n + 1));
  if (out) {
    ::memcpy(out, s, n);
    out[n] = '\0';
  }
  return out;
}

void FreeState(OutputState* s) {
  if (!s) return;
  if (s->fd >= 0) ::close(s->fd);
  if (s->named) ::unlinkat(s->dir_fd, s->temp, 0);
  if (s->dir_fd >= 0) ::close(s->dir_fd);
  ::free(s->target);
  ::free(s->base);
  s->~OutputState();
  ::free(s);
}

const char* KindOf(mode_t m) {
  if (S_ISDIR(m)) return "a directory";
  if (S_ISFIFO(m)) return "a FIFO";
  if (S_ISSOCK(m)) return "a socket";
  if (S_ISBLK(m)) return "a block device";
  return "not a regular file";
}

// True when the process has (dev, ino) open as a file descriptor or mapped:
// /proc/self/fd and /proc/self/maps. Without /proc, false (nothing known).
bool OpenInThisProcess(dev_t dev, ino_t ino, char* what, size_t what_size) {
  if (DIR* d = ::opendir("/proc/self/fd")) {
    const int self = ::dirfd(d);
    while (struct dirent* e = ::readdir(d)) {
      char* end = nullptr;
      const long fd = ::strtol(e->d_name, &end, 10);
      if (end == e->d_name || *end != '\0' || fd == self) continue;
      struct stat st;
      if (::fstat(static_cast<int>(fd), &st) == 0 && st.st_dev == dev && st.st_ino == ino) {
        ::snprintf(what, what_size, "open as file descriptor %ld", fd);
        ::closedir(d);
        return true;
      }
    }
    ::closedir(d);
  }
  if (FILE* f = ::fopen("/proc/self/maps", "re")) {
    char line[512];
    bool found = false;
    while (!found && ::fgets(line, sizeof line, f)) {
      // start-end perms offset major:minor inode [path]
      unsigned maj = 0, min = 0;
      unsigned long long inode = 0;
      if (::sscanf(line, "%*s %*s %*s %x:%x %llu", &maj, &min, &inode) == 3 && inode != 0 &&
          inode == static_cast<unsigned long long>(ino) && maj == major(dev) && min == minor(dev)) {
        ::snprintf(what, what_size, "mapped into memory");
        found = true;
      }
      // A line longer than the buffer: skip its rest.
      while (!::strchr(line, '\n') && ::fgets(line, sizeof line, f)) {
      }
    }
    ::fclose(f);
    if (found) return true;
  }
  return false;
}

TinyAIStatus Fail(OutputState* s, TinyAIStatus status) {
  FreeState(s);
  return status;
}

}  // namespace

TinyAIStatus BeginOutput(const char* path, OutputFile* out) {
  *out = OutputFile();
  if (path == nullptr || path[0] == '\0') {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "the output path is %s", path ? "empty" : "NULL");
  }
  void* mem = ::malloc(sizeof(OutputState));
  if (!mem) return SetError(TINYAI_ERR_OUT_OF_MEMORY, "'%s': no memory to start writing it", path);
  OutputState* s = new (mem) OutputState();
  s->target = CopyString(path, ::strlen(path));
  if (!s->target) return Fail(s, SetError(TINYAI_ERR_OUT_OF_MEMORY, "'%s': no memory to start writing it", path));

  // What is at the path now.
  struct stat st;
  bool exists = false;
  char resolved[PATH_MAX];
  const char* final_path = path;
  if (::lstat(path, &st) == 0) {
    exists = true;
    if (S_ISLNK(st.st_mode)) {
      if (!::realpath(path, resolved) || ::stat(resolved, &st) != 0) {
        return Fail(s, SetError(TINYAI_ERR_FILE_NOT_FOUND, "'%s' is a symbolic link to a file that does not exist; "
                                "remove the link or save to another path", path));
      }
      final_path = resolved;  // the file the link names is replaced; the link stays
    }
  } else if (errno != ENOENT) {
    const int err = errno;
    return Fail(s, SetError(err == ENOTDIR ? TINYAI_ERR_FILE_NOT_FOUND : TINYAI_ERR_IO, "'%s': cannot write there: %s",
                            path, ::strerror(err)));
  }
  if (exists && S_ISCHR(st.st_mode)) {
    // A device (/dev/null, /dev/full): there is nothing to replace, so it is
    // written in place, as a shell redirection would.
    s->fd = ::open(final_path, O_RDWR | O_CLOEXEC);
    if (s->fd < 0) s->fd = ::open(final_path, O_WRONLY | O_CLOEXEC);
    if (s->fd < 0) {
      const int err = errno;
      return Fail(s, SetError(TINYAI_ERR_IO, "'%s': cannot open the device for writing: %s", path, ::strerror(err)));
    }
    out->file.handle = s->fd;
    out->in_place = true;
    out->state = s;
    return TINYAI_OK;
  }
  if (exists && !S_ISREG(st.st_mode)) {
    return Fail(s, SetError(TINYAI_ERR_INVALID_ARGUMENT, "'%s' is %s; TinyAI writes its files whole and replaces "
                            "only regular files: give the path of a file", path, KindOf(st.st_mode)));
  }
  if (exists) {
    char what[64];
    // A match must still be the file at the path: another thread's save may
    // have replaced it since the stat, and its inode number gone to a file
    // this process is writing now (seen once in 20 x 2 saves to one path
    // from two threads under qemu). Then look again.
    bool open_here = OpenInThisProcess(st.st_dev, st.st_ino, what, sizeof what);
    for (int look = 0; open_here && look < 16; ++look) {
      struct stat now;
      if (::stat(final_path, &now) != 0) {
        open_here = false;  // gone: nothing of this process's is replaced
      } else if (now.st_dev == st.st_dev && now.st_ino == st.st_ino) {
        break;  // the same file: really open here
      } else {
        st = now;
        open_here = OpenInThisProcess(st.st_dev, st.st_ino, what, sizeof what);
      }
    }
    if (open_here) {
      return Fail(s, SetError(TINYAI_ERR_INVALID_ARGUMENT, "'%s' is a file this process is reading (%s: a model being "
                              "run, an input being read); replacing it would destroy it: save to another path",
                              path, what));
    }
    // Root may write anything: the file's own bits say whether it was meant
    // to be replaced.
    if ((st.st_mode & (S_IWUSR | S_IWGRP | S_IWOTH)) == 0) {
      return Fail(s, SetError(TINYAI_ERR_IO, "'%s' is read-only (mode %04o); TinyAI does not replace it: make it "
                              "writable (chmod u+w) or save to another path", path,
                              static_cast<unsigned>(st.st_mode & 07777)));
    }
    if (::access(final_path, W_OK) != 0) {
      return Fail(s, SetError(TINYAI_ERR_IO, "'%s' is not writable by this process (mode %04o, owner %ld): save to "
                              "another path", path, static_cast<unsigned>(st.st_mode & 07777),
                              static_cast<long>(st.st_uid)));
    }
    s->keep_mode = true;
    s->mode = st.st_mode & 07777;
  }

  // The directory and the final name in it.
  const char* slash = ::strrchr(final_path, '/');
  const char* base = slash ? slash + 1 : final_path;
  if (base[0] == '\0' || ::strcmp(base, ".") == 0 || ::strcmp(base, "..") == 0) {
    return Fail(s, SetError(TINYAI_ERR_INVALID_ARGUMENT, "'%s' names a directory; give a file name", path));
  }
  char dir[PATH_MAX];
  if (!slash) {
    ::strcpy(dir, ".");
  } else if (slash == final_path) {
    ::strcpy(dir, "/");
  } else {
    const size_t n = static_cast<size_t>(slash - final_path);
    if (n >= sizeof dir) return Fail(s, SetError(TINYAI_ERR_INVALID_ARGUMENT, "'%s': the path is too long", path));
    ::memcpy(dir, final_path, n);
    dir[n] = '\0';
  }
  if (::strlen(base) + 32 > NAME_MAX) {
    return Fail(s, SetError(TINYAI_ERR_INVALID_ARGUMENT, "'%s': the file name is too long to write beside (at most "
                            "%d bytes)", path, NAME_MAX - 32));
  }
  s->base = CopyString(base, ::strlen(base));
  if (!s->base) return Fail(s, SetError(TINYAI_ERR_OUT_OF_MEMORY, "'%s': no memory to start writing it", path));
  s->dir_fd = ::open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (s->dir_fd < 0) {
    const int err = errno;
    return Fail(s, SetError(err == ENOENT || err == ENOTDIR ? TINYAI_ERR_FILE_NOT_FOUND : TINYAI_ERR_IO,
                            "'%s': cannot write in the directory '%s': %s", path, dir, ::strerror(err)));
  }

  // The temporary: unnamed where the file system can, else a unique name.
  // (An unnamed file is named at the end through /proc/self/fd: without
  // /proc, a named one from the start.)
  if (::access("/proc/self/fd", X_OK) == 0) s->fd = ::openat(s->dir_fd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0666);
  else errno = EOPNOTSUPP;
  if (s->fd < 0 && (errno == EOPNOTSUPP || errno == EISDIR || errno == EINVAL || errno == ENOENT)) {
    for (int attempt = 0; attempt < 100 && s->fd < 0; ++attempt) {
      const unsigned n = NextTempNumber();
      ::snprintf(s->temp, sizeof s->temp, "%s.tinyai-%ld-%u.tmp", s->base, static_cast<long>(::getpid()), n);
      s->fd = ::openat(s->dir_fd, s->temp, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
      if (s->fd < 0 && errno != EEXIST) break;
    }
    s->named = s->fd >= 0;
  }
  if (s->fd < 0) {
    const int err = errno;
    return Fail(s, SetError(err == ENOENT ? TINYAI_ERR_FILE_NOT_FOUND : TINYAI_ERR_IO,
                            "'%s': cannot create a file in '%s': %s", path, dir, ::strerror(err)));
  }
  if (s->keep_mode) ::fchmod(s->fd, s->mode);
  out->file.handle = s->fd;
  out->state = s;
  return TINYAI_OK;
}

TinyAIStatus SetOutputSize(const OutputFile& out, uint64_t size) {
  const OutputState* s = static_cast<const OutputState*>(out.state);
  if (!s) return SetError(TINYAI_ERR_MISUSE, "SetOutputSize on an output that is not open");
  if (out.in_place) return TINYAI_OK;  // a device has no size to set
  if (::ftruncate(s->fd, static_cast<off_t>(size)) != 0) {
    const int err = errno;
    return SetError(TINYAI_ERR_IO, "'%s': cannot set its size to %llu bytes: %s", s->target,
                    static_cast<unsigned long long>(size), ::strerror(err));
  }
  return TINYAI_OK;
}

TinyAIStatus CommitOutput(OutputFile* out) {
  OutputState* s = static_cast<OutputState*>(out->state);
  *out = OutputFile();
  if (!s) return SetError(TINYAI_ERR_MISUSE, "CommitOutput on an output that is not open");
  // A device need not support fsync (EINVAL): it was written in place.
  if (::fsync(s->fd) != 0 && !(s->dir_fd < 0 && (errno == EINVAL || errno == EROFS || errno == ENOTSUP))) {
    const int err = errno;
    const TinyAIStatus st = SetError(TINYAI_ERR_IO, "'%s': cannot write: %s", s->target, ::strerror(err));
    FreeState(s);
    return st;
  }
  if (s->dir_fd < 0) {  // in place: nothing to rename
    const int fd = s->fd;
    s->fd = -1;
    const TinyAIStatus st = ::close(fd) == 0 ? TINYAI_OK
                                             : SetError(TINYAI_ERR_IO, "'%s': cannot write: %s", s->target,
                                                        ::strerror(errno));
    FreeState(s);
    return st;
  }
  for (int attempt = 0; !s->named && attempt < 100; ++attempt) {
    const unsigned n = NextTempNumber();
    ::snprintf(s->temp, sizeof s->temp, "%s.tinyai-%ld-%u.tmp", s->base, static_cast<long>(::getpid()), n);
    char proc[64];
    ::snprintf(proc, sizeof proc, "/proc/self/fd/%d", s->fd);
    if (::linkat(AT_FDCWD, proc, s->dir_fd, s->temp, AT_SYMLINK_FOLLOW) == 0) {
      s->named = true;
    } else if (errno != EEXIST) {
      const int err = errno;
      const TinyAIStatus st = SetError(TINYAI_ERR_IO, "'%s': cannot give the written file a name: %s", s->target,
                                       ::strerror(err));
      FreeState(s);
      return st;
    }
  }
  if (!s->named) {
    const TinyAIStatus st = SetError(TINYAI_ERR_IO, "'%s': no free temporary name beside it", s->target);
    FreeState(s);
    return st;
  }
  if (::close(s->fd) != 0) {
    s->fd = -1;
    const int err = errno;
    const TinyAIStatus st = SetError(TINYAI_ERR_IO, "'%s': cannot write: %s", s->target, ::strerror(err));
    FreeState(s);
    return st;
  }
  s->fd = -1;
  if (::renameat(s->dir_fd, s->temp, s->dir_fd, s->base) != 0) {
    const int err = errno;
    const TinyAIStatus st = SetError(TINYAI_ERR_IO, "'%s': cannot put the written file in place: %s", s->target,
                                     ::strerror(err));
    FreeState(s);
    return st;
  }
  s->named = false;  // it is the target now
  ::fsync(s->dir_fd);  // the rename itself reaches the disk (best effort)
  FreeState(s);
  return TINYAI_OK;
}

void AbortOutput(OutputFile* out) {
  OutputState* s = static_cast<OutputState*>(out->state);
  *out = OutputFile();
  FreeState(s);
}

}  // namespace port
}  // namespace tinyai
