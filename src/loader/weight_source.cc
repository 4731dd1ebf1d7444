#include "loader/weight_source.h"

#include <cstring>

#include "common/status.h"

namespace tinyai {

TinyAIStatus WeightSource::Read(uint64_t offset, size_t size, void* dst, const char* source) const {
  if (size == 0) return TINYAI_OK;  // nothing to ask a callback (or the OS) for
  if (memory_) {
    std::memcpy(dst, memory_ + offset, size);
    return TINYAI_OK;
  }
  if (read_) {
    const int rc = read_(user_, offset, dst, size);
    if (rc != 0) {
      return SetError(TINYAI_ERR_IO, "'%s': the read callback returned %d for %zu bytes at offset %llu", source, rc,
                      size, static_cast<unsigned long long>(offset));
    }
    return TINYAI_OK;
  }
  return port::ReadAt(file_, offset, dst, size, source);
}

TinyAIStatus WeightSource::ReadAligned(uint64_t offset, size_t size, uint8_t* dst, size_t dst_bytes,
                                       const uint8_t** data, const char* source) const {
  const uint64_t align = direct_now() ? file_.direct_align : 0;
  if (align > 0 && reinterpret_cast<uintptr_t>(dst) % align == 0) {
    const uint64_t lead = offset % align;
    const uint64_t span = (lead + size + align - 1) / align * align;
    if (span <= dst_bytes) {
      TINYAI_RETURN_IF_ERROR(port::ReadDirect(file_, offset - lead, dst, static_cast<size_t>(span), source));
      *data = dst + lead;
      CountDirect(size);
      return TINYAI_OK;
    }
  }
  TINYAI_RETURN_IF_ERROR(Read(offset, size, dst, source));
  *data = dst;
  return TINYAI_OK;
}

TinyAIStatus WeightSource::Stream(uint64_t offset, uint64_t size, uint8_t* buf, size_t buf_bytes, PieceFn fn,
                                  void* ctx, const char* source) const {
  const uint64_t align = direct_now() ? file_.direct_align : 0;
  const uint64_t end = offset + size;
  if (align > 0 && reinterpret_cast<uintptr_t>(buf) % align == 0 && buf_bytes >= 2 * align) {
    const uint64_t chunk = buf_bytes / align * align;
    for (uint64_t at = offset - offset % align; at < end;) {
      const uint64_t want = end - at < chunk ? (end - at + align - 1) / align * align : chunk;
      TINYAI_RETURN_IF_ERROR(port::ReadDirect(file_, at, buf, static_cast<size_t>(want), source));
      const uint64_t from = at < offset ? offset : at, to = at + want < end ? at + want : end;
      CountDirect(to - from);
      TINYAI_RETURN_IF_ERROR(fn(ctx, buf + (from - at), static_cast<size_t>(to - from)));
      at += want;
    }
    return TINYAI_OK;
  }
  for (uint64_t at = offset; at < end;) {
    const size_t n = end - at < buf_bytes ? static_cast<size_t>(end - at) : buf_bytes;
    TINYAI_RETURN_IF_ERROR(Read(at, n, buf, source));
    TINYAI_RETURN_IF_ERROR(fn(ctx, buf, n));
    at += n;
  }
  return TINYAI_OK;
}

}  // namespace tinyai
