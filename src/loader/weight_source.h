// Where weight bytes come from: a file read with positional reads, an image
// already in memory (flash, a test buffer) that uncompressed tensors are used
// from in place, or the caller's read callback (external flash, an SD card).
#ifndef TINYAI_LOADER_WEIGHT_SOURCE_H_
#define TINYAI_LOADER_WEIGHT_SOURCE_H_

#include <cstddef>
#include <cstdint>

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

 private:
  port::File file_;
  const uint8_t* memory_ = nullptr;
  TinyAIReadCallback read_ = nullptr;
  void* user_ = nullptr;
  uint64_t memory_size_ = 0;
};

}  // namespace tinyai

#endif  // TINYAI_LOADER_WEIGHT_SOURCE_H_
