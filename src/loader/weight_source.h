// Where weight bytes come from: a file read with positional reads, an image
// already in memory (flash, a test buffer) that uncompressed tensors are used
// from in place, or the caller's read callback (external flash, an SD card).
#ifndef TINYAI_LOADER_WEIGHT_SOURCE_H_
#define TINYAI_LOADER_WEIGHT_SOURCE_H_

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "common/config.h"
#include "port/port.h"
#include "tinyai/status.h"
#include "tinyai/utils/mmap_loader.h"

namespace tinyai {

// What a model is opened from: exactly one of path, data or read.
struct ModelOrigin {
  const char* path = nullptr;
  const void* data = nullptr;  // with size
  TinyAIReadCallback read = nullptr;  // with user and size
  void* user = nullptr;
  uint64_t size = 0;
};

class WeightSource {
 public:
  WeightSource() = default;
  WeightSource(const WeightSource&) = delete;
  WeightSource& operator=(const WeightSource&) = delete;
  ~WeightSource() { port::CloseFile(&file_); }

  TinyAIStatus OpenFile(const char* path) { return port::OpenFile(path, &file_); }
  // Opens the file for direct reads too, where the port and file system
  // allow them (port::EnableDirectReads); they are used while UseDirect(true).
  bool EnableDirect(const char* path) { return port::EnableDirectReads(path, &file_); }
  // The alignment direct reads need, 0 without them (held memory sized for
  // them keeps that slack either way).
  uint32_t direct_align() const { return file_.direct >= 0 ? file_.direct_align : 0; }
  // Whether ReadAligned() reads past the OS's cache now: set by the weight
  // cache (it streams under a cap, or the configuration asks for them).
  void UseDirect(bool on) const { direct_on_.store(on && direct_align() > 0, std::memory_order_relaxed); }
  bool direct_now() const { return direct_on_.load(std::memory_order_relaxed); }
  // Bytes ReadAligned() has read directly.
  uint64_t direct_bytes() const {
#if TINYAI_WITH_THREADS
    return direct_bytes_.load(std::memory_order_relaxed);
#else
    return direct_bytes_;
#endif
  }
  void UseMemory(const uint8_t* data, uint64_t size) {
    memory_ = data;
    memory_size_ = size;
  }
  void UseCallback(TinyAIReadCallback read, void* user, uint64_t size) {
    read_ = read;
    user_ = user;
    memory_size_ = size;
  }

  // True when path names the file this source reads.
  bool IsFile(const char* path) const { return port::IsSameFile(file_, path); }
  uint64_t size() const { return memory_ || read_ ? memory_size_ : file_.size; }
  // The bytes at offset in place, or nullptr when they must be read.
  const uint8_t* InPlace(uint64_t offset) const { return memory_ ? memory_ + offset : nullptr; }
  // Copies [offset, offset+size) into dst. The caller checked the range
  // against size(); source names the model in messages.
  TinyAIStatus Read(uint64_t offset, size_t size, void* dst, const char* source) const;
  // Reads [offset, offset+size) into memory at dst, dst_bytes of it, and
  // says where the bytes landed (*data): a direct read of the aligned blocks
  // around the range when direct_now() and dst has the room and alignment
  // (then *data is dst plus offset's distance past its block), else Read()
  // into dst.
  TinyAIStatus ReadAligned(uint64_t offset, size_t size, uint8_t* dst, size_t dst_bytes, const uint8_t** data,
                           const char* source) const;
  // Streams [offset, offset+size) through buf (buf_bytes) a piece at a
  // time, calling fn(ctx, bytes, n) on each piece in order: with direct
  // reads of whole blocks when direct_now() and buf is aligned and holds two
  // blocks or more, else with Read(). Stops at fn's first error.
  using PieceFn = TinyAIStatus (*)(void* ctx, const uint8_t* bytes, size_t n);
  TinyAIStatus Stream(uint64_t offset, uint64_t size, uint8_t* buf, size_t buf_bytes, PieceFn fn, void* ctx,
                      const char* source) const;

 private:
  port::File file_;
  const uint8_t* memory_ = nullptr;
  TinyAIReadCallback read_ = nullptr;
  void* user_ = nullptr;
  uint64_t memory_size_ = 0;
  mutable std::atomic<bool> direct_on_{false};
  // Without threads a plain count (a 32-bit core may have no 64-bit atomics).
#if TINYAI_WITH_THREADS
  mutable std::atomic<uint64_t> direct_bytes_{0};
#else
  mutable uint64_t direct_bytes_ = 0;
#endif
  void CountDirect(uint64_t n) const {
#if TINYAI_WITH_THREADS
    direct_bytes_.fetch_add(n, std::memory_order_relaxed);
#else
    direct_bytes_ += n;
#endif
  }
};

}  // namespace tinyai

#endif  // TINYAI_LOADER_WEIGHT_SOURCE_H_
