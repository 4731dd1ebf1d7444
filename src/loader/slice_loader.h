// Loads a weight cache entry (loader/weight_cache.h: a row slice or a whole
// layer) into the memory the cache reserved for it, or finds it in place:
// reads its stored bytes, checks each tensor's CRC-32C the first time it is
// touched, decodes zstd frames, converts the rows of a tensor whose runtime
// dtype is not the file's with the row transform's codec, and puts the
// rows the table holds in panels into the panel layout (common/panels.h).
// What the rows become is the transform's (loader/row_transform.h); this
// only applies it.
//
// Loads run outside the cache's lock, on the thread that needs the entry or
// on a prefetch worker, several at once. What they share - a staging
// buffer and a zstd context per thread that can load at once - is taken
// under the loader's own lock; a load that finds none free waits for one.
#ifndef TINYAI_LOADER_SLICE_LOADER_H_
#define TINYAI_LOADER_SLICE_LOADER_H_

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "common/array.h"
#include "common/sync.h"
#include "format/tmai_reader.h"
#include "loader/row_slices.h"
#include "loader/row_transform.h"
#include "loader/weight_source.h"
#include "tinyai/utils/mmap_loader.h"

namespace tinyai {

class ZstdDecoder;

class SliceLoader {
 public:
  SliceLoader() = default;
  SliceLoader(const SliceLoader&) = delete;
  SliceLoader& operator=(const SliceLoader&) = delete;
  ~SliceLoader() { Shutdown(); }

  // The reader, source and table must outlive the loader. Allocates the
  // staging (one per prefetch worker, at least one) when anything is
  // compressed, converted or held in panels.
  TinyAIStatus Init(const TmaiReader* reader, const WeightSource* source, const RowSliceTable* table,
                    const TinyAIMmapConfig& config, const RowTransform& transform);
  void Shutdown();

  // Where conversions find what calibration measured of a tensor's inputs
  // (none by default).
  using CalibrationFn = TensorCalibration (*)(const void* owner, int32_t tensor);
  void UseCalibration(const void* owner, CalibrationFn fn) {
    calibration_owner_ = owner;
    calibration_ = fn;
  }

  // Loads entry into dst, dst_bytes of memory (the arena's EntryBytes();
  // nullptr and 0 for an entry used in place): *data gets where its bytes
  // are, *bytes_read what was read (stored bytes, checksum passes included).
  TinyAIStatus Load(int32_t entry, uint8_t* dst, size_t dst_bytes, const uint8_t** data, uint64_t* bytes_read);

  // Bytes of the loader's bookkeeping and staging (not weights); with at
  // most `sets` staging sets (a decoding context and buffer each; 0: those
  // it keeps now).
  uint64_t overhead_bytes(size_t sets = 0) const;
  // Staging sets kept (0 when the model needs none: nothing compressed,
  // converted or packed as it loads).
  size_t staging_sets() const { return active_sets_; }
  // Keeps `sets` (>= 1) staging sets and frees the rest, waiting for any in
  // use: the prefetch workers then share them (a fallback chain's prefetch
  // step). More than kept is a no-op.
  void KeepStaging(size_t sets);

 private:
  struct Staging {
    uint8_t* buffer = nullptr;
    ZstdDecoder* decoder = nullptr;
    uint64_t recorded = 0;  // its bytes the ledger was told of (zstd's context and the buffer)
    bool busy = false;
  };

  TinyAIStatus LoadSlice(int32_t slice, uint8_t* dst, size_t dst_bytes, const uint8_t** data, uint64_t* bytes_read);
  TinyAIStatus LoadSliceRows(int32_t slice, uint8_t* dst, size_t dst_bytes, const uint8_t** data,
                             uint64_t* bytes_read);
  // Puts the rows of dst (slice's bytes, loaded) that lie in panels into
  // the panel layout (common/panels.h), in place.
  TinyAIStatus PackPanels(int32_t slice, uint8_t* dst);
  TinyAIStatus LoadLayer(int32_t layer, uint8_t* dst, const uint8_t** data, uint64_t* bytes_read);
  // Reads a source's bytes (ZstdReadFn).
  static TinyAIStatus ReadSource(void* self, uint64_t offset, size_t size, uint8_t* dst);
  // Reads rows [first_row, first_row + rows) of tensor as the file stores
  // them and writes them to dst in its runtime dtype (RowSlice::transform).
  TinyAIStatus ConvertRows(int32_t tensor, uint64_t first_row, uint64_t rows, uint8_t* dst, uint64_t* bytes_read);
  // Reads and decodes a zstd frame of tensor t into dst.
  TinyAIStatus DecodeFrame(int32_t tensor, int32_t frame, uint8_t* dst, uint64_t* bytes_read);
  // Checks tensor t's CRC (once per tensor), reading its stored bytes through
  // bounce (bounce_size bytes) unless they are in place.
  TinyAIStatus VerifyStreaming(int32_t tensor, uint8_t* bounce, size_t bounce_size, uint64_t* bytes_read);
  TinyAIStatus VerifyInMemory(int32_t tensor, const uint8_t* stored);
  bool NeedsVerify(int32_t tensor) const;
  // A free staging buffer (waits for one), and giving it back.
  TinyAIStatus GrabStaging(Staging** out);
  void ReleaseStaging(Staging* st);

  const TmaiReader* reader_ = nullptr;
  const WeightSource* source_ = nullptr;
  const RowSliceTable* table_ = nullptr;
  RowTransform transform_;
  const void* calibration_owner_ = nullptr;
  CalibrationFn calibration_ = nullptr;
  bool has_zstd_ = false;
  Array<std::atomic<uint8_t>> verified_;  // per tensor: CRC checked
  mutable Mutex mutex_;  // staging_'s busy flags
  CondVar released_;     // a staging buffer was released
  Array<Staging> staging_;
  size_t active_sets_ = 0;  // the first active_sets_ of staging_ are in use; the rest freed
  size_t staging_bytes_ = 0;
};

}  // namespace tinyai

#endif  // TINYAI_LOADER_SLICE_LOADER_H_
