#include "model/session.h"

#include <cstring>

#include "common/crc32c.h"
#include "common/status.h"
#include "kv/kv_cache.h"
#include "kv/store.h"
#include "loader/mapped_model.h"
#include "port/port.h"

namespace tinyai {

namespace {

constexpr char kMagic[4] = {'T', 'S', 'N', '1'};
constexpr uint32_t kVersion = 1;
constexpr int kLayoutFields = 8;
// magic, version, fingerprint, layout, position, store bytes
constexpr size_t kHeader = 4 + 4 + 8 + kLayoutFields * 4 + 8 + 8;

const char* const kLayoutNames[kLayoutFields] = {"KV type",  "KV window",  "KV sinks",  "KV slots",
                                                 "layers",   "KV heads",   "head size", "KV row bytes"};

void Layout(const KvCache& kv, int32_t out[kLayoutFields]) {
  const KvShape& s = kv.shape();
  out[0] = s.type;
  out[1] = s.window;
  out[2] = s.sinks;
  out[3] = kv.slots();
  out[4] = s.layers;
  out[5] = s.kv_heads;
  out[6] = s.head_size;
  out[7] = static_cast<int32_t>(kv.row_bytes());
}

struct Header {
  uint8_t bytes[kHeader];
};

Header MakeHeader(uint64_t fingerprint, const KvCache& kv, int64_t position, uint64_t payload) {
  Header h;
  uint8_t* p = h.bytes;
  std::memcpy(p, kMagic, 4);
  std::memcpy(p + 4, &kVersion, 4);
  std::memcpy(p + 8, &fingerprint, 8);
  int32_t layout[kLayoutFields];
  Layout(kv, layout);
  std::memcpy(p + 16, layout, sizeof layout);
  std::memcpy(p + 16 + sizeof layout, &position, 8);
  std::memcpy(p + 24 + sizeof layout, &payload, 8);
  return h;
}

struct CrcSink {
  PersistentStore::Sink next = nullptr;
  void* user = nullptr;
  uint32_t crc = 0;
};

TinyAIStatus CrcWrite(void* user, const void* data, size_t size) {
  CrcSink* s = static_cast<CrcSink*>(user);
  s->crc = Crc32c(s->crc, data, size);
  return s->next(s->user, data, size);
}

// The rows and tokens of the slots in use, in the file's order.
uint64_t PayloadBytes(const KvCache& kv, int64_t position) {
  const KvShape& s = kv.shape();
  const uint64_t used = static_cast<uint64_t>(kv.SlotsUsed(position));
  return 2u * static_cast<uint64_t>(s.layers) * static_cast<uint64_t>(s.kv_heads) * used * kv.row_bytes() +
         used * sizeof(int32_t);
}

TinyAIStatus FillSession(PersistentStore::Sink sink, void* user, const void* what) {
  const LlamaModel& m = *static_cast<const LlamaModel*>(what);
  const KvCache& kv = m.kv_cache();
  const Header h = MakeHeader(ModelFingerprint(*m.mapped_model()), kv, m.position(), PayloadBytes(kv, m.position()));
  CrcSink crc;
  crc.next = sink;
  crc.user = user;
  TINYAI_RETURN_IF_ERROR(CrcWrite(&crc, h.bytes, kHeader));
  const int32_t used = kv.SlotsUsed(m.position());
  int32_t run = 0;
  for (int values = 0; values < 2; ++values) {
    for (int32_t l = 0; l < kv.shape().layers; ++l) {
      for (int32_t hd = 0; hd < kv.shape().kv_heads; ++hd) {
        for (int32_t slot = 0; slot < used; slot += run) {  // in runs: a growable cache's chunks
          const uint8_t* rows = kv.Rows(values != 0, l, hd, slot, &run);
          if (!rows) return SetError(TINYAI_ERR_INTERNAL, "KV cache: slot %d of %d is not held", slot, used);
          run = run < used - slot ? run : used - slot;
          TINYAI_RETURN_IF_ERROR(CrcWrite(&crc, rows, static_cast<size_t>(run) * kv.row_bytes()));
        }
      }
    }
  }
  for (int32_t slot = 0; slot < used; slot += run) {
    const int32_t* tokens = kv.Tokens(slot, &run);
    if (!tokens) return SetError(TINYAI_ERR_INTERNAL, "KV cache: slot %d of %d is not held", slot, used);
    run = run < used - slot ? run : used - slot;
    TINYAI_RETURN_IF_ERROR(CrcWrite(&crc, tokens, static_cast<size_t>(run) * sizeof(int32_t)));
  }
  const uint32_t sum = crc.crc;
  return sink(user, &sum, 4);
}

// The ids of `count` tokens at offset of the file: every one inside the
// vocabulary (0 .. vocab - 1), or TINYAI_ERR_BAD_FORMAT naming the first
// that is not.
TinyAIStatus CheckTokens(FileSource* file, uint64_t offset, int32_t count, int32_t vocab, const char* path) {
  int32_t ids[256];
  for (int32_t done = 0; done < count;) {
    const int32_t n = count - done < 256 ? count - done : 256;
    TINYAI_RETURN_IF_ERROR(
        ReadFileSource(file, offset + static_cast<uint64_t>(done) * sizeof(int32_t), ids, n * sizeof(int32_t)));
    for (int32_t i = 0; i < n; ++i) {
      if (ids[i] < 0 || ids[i] >= vocab) {
        return SetError(TINYAI_ERR_BAD_FORMAT, "%s: token %d of the %d the session holds is %d, outside this model's "
                        "vocabulary (0..%d): not a session tinyaiSaveLLMSession wrote (its checksum matches what "
                        "it holds)", path,
                        static_cast<int>(done + i), static_cast<int>(count), static_cast<int>(ids[i]),
                        static_cast<int>(vocab - 1));
      }
    }
    done += n;
  }
  return TINYAI_OK;
}

}  // namespace

uint64_t ModelFingerprint(const TinyAIMappedModel& model) {
  const tmai::Header& h = model.reader().header();
  uint32_t a = Crc32c(0, &h.index_crc, sizeof h.index_crc);
  a = Crc32c(a, &h.file_size, sizeof h.file_size);
  uint32_t b = Crc32c(0x5eed, &h.file_size, sizeof h.file_size);
  for (const tmai::TensorEntry& t : model.reader().tensors()) {  // the dtypes the tensors run at
    a = Crc32c(a, &t.dtype, 1);
    b = Crc32c(b, &t.dtype, 1);
    b = Crc32c(b, &t.checksum, 4);
  }
  return (static_cast<uint64_t>(b) << 32) | a;
}

TinyAIStatus SaveSession(const LlamaModel& model, const char* path) {
  if (!model.kv_cache().allocated()) {
    return SetError(TINYAI_ERR_MISUSE, "tinyaiSaveLLMSession: the LLM has no KV cache yet (evaluate a token first)");
  }
  return WriteFileAtomically(path, &FillSession, &model, "tinyaiSaveLLMSession");
}

TinyAIStatus LoadSession(LlamaModel* model, const char* path, MakeRoom make_room, void* user) {
  if (path == nullptr || path[0] == '\0') {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "tinyaiLoadLLMSession: path is %s", path ? "empty" : "NULL");
  }
  KvCache& kv = *model->mutable_kv_cache();
  TINYAI_RETURN_IF_ERROR(kv.Allocate());
  FileSource file;
  file.name = path;
  TINYAI_RETURN_IF_ERROR(port::OpenFile(path, &file.file));
  struct Closer {
    port::File* f;
    ~Closer() { port::CloseFile(f); }
  } closer{&file.file};
  const uint64_t size = file.file.size;
  Header h;
  if (size >= 4) {
    TINYAI_RETURN_IF_ERROR(ReadFileSource(&file, 0, h.bytes, 4));
    if (std::memcmp(h.bytes, kMagic, 4) != 0) {
      return SetError(TINYAI_ERR_BAD_MAGIC, "%s is not a TinyAI session (no TSN1 magic)", path);
    }
  }
  if (size < kHeader + 4) {
    return SetError(TINYAI_ERR_TRUNCATED, "%s: %llu bytes, fewer than a session's header", path,
                    static_cast<unsigned long long>(size));
  }
  TINYAI_RETURN_IF_ERROR(ReadFileSource(&file, 0, h.bytes, kHeader));
  uint32_t version = 0;
  uint64_t fingerprint = 0, payload = 0;
  int32_t layout[kLayoutFields];
  int64_t position = 0;
  std::memcpy(&version, h.bytes + 4, 4);
  std::memcpy(&fingerprint, h.bytes + 8, 8);
  std::memcpy(layout, h.bytes + 16, sizeof layout);
  std::memcpy(&position, h.bytes + 16 + sizeof layout, 8);
  std::memcpy(&payload, h.bytes + 24 + sizeof layout, 8);
  if (version != kVersion) {
    return SetError(TINYAI_ERR_UNSUPPORTED_VERSION, "%s: session version %u; this build reads version %u", path,
                    static_cast<unsigned>(version), static_cast<unsigned>(kVersion));
  }
  if (payload > size - kHeader - 4) {
    return SetError(TINYAI_ERR_TRUNCATED, "%s: the session says %llu bytes of KV cache; %llu are there", path,
                    static_cast<unsigned long long>(payload),
                    static_cast<unsigned long long>(size - kHeader - 4));
  }
  if (payload != size - kHeader - 4) {
    return SetError(TINYAI_ERR_BAD_FORMAT, "%s: %llu bytes after the session's end", path,
                    static_cast<unsigned long long>(size - kHeader - 4 - payload));
  }
  // The whole file's checksum before anything is believed: the header as
  // read above (whose fields are believed), then the rest.
  uint8_t buffer[1024];
  uint32_t crc = Crc32c(0, h.bytes, kHeader);
  for (uint64_t at = kHeader; at < kHeader + payload;) {
    const size_t n = static_cast<size_t>(kHeader + payload - at < sizeof buffer ? kHeader + payload - at
                                                                                   : sizeof buffer);
    TINYAI_RETURN_IF_ERROR(ReadFileSource(&file, at, buffer, n));
    crc = Crc32c(crc, buffer, n);
    at += n;
  }
  uint32_t stored = 0;
  TINYAI_RETURN_IF_ERROR(ReadFileSource(&file, kHeader + payload, &stored, 4));
  if (stored != crc) {
    return SetError(TINYAI_ERR_CHECKSUM, "%s: the session's checksum is %08x; its contents hash to %08x", path,
                    static_cast<unsigned>(stored), static_cast<unsigned>(crc));
  }
  const uint64_t mine = ModelFingerprint(*model->mapped_model());
  if (fingerprint != mine) {
    return SetError(TINYAI_ERR_MISMATCH, "%s belongs to another model (fingerprint %016llx; this LLM's model is "
                    "%016llx: other weights, shapes or precisions)", path, static_cast<unsigned long long>(fingerprint),
                    static_cast<unsigned long long>(mine));
  }
  int32_t want[kLayoutFields];
  Layout(kv, want);
  for (int i = 0; i < kLayoutFields; ++i) {
    if (layout[i] == want[i]) continue;
    if (i == 0) {
      return SetError(TINYAI_ERR_MISMATCH, "%s holds a %s KV cache; this LLM's is %s", path,
                      KvCache::TypeName(layout[0]), KvCache::TypeName(want[0]));
    }
    return SetError(TINYAI_ERR_MISMATCH, "%s: its %s is %d; this LLM's is %d", path, kLayoutNames[i],
                    static_cast<int>(layout[i]), static_cast<int>(want[i]));
  }
  const int64_t most = kv.windowed() ? INT32_MAX : kv.slots();
  if (position < 0 || position > most) {
    return SetError(TINYAI_ERR_BAD_FORMAT, "%s: position %lld is outside 0..%lld", path,
                    static_cast<long long>(position), static_cast<long long>(most));
  }
  if (payload != PayloadBytes(kv, position)) {
    return SetError(TINYAI_ERR_BAD_FORMAT, "%s: %llu bytes of KV cache for position %lld; that takes %llu", path,
                    static_cast<unsigned long long>(payload), static_cast<long long>(position),
                    static_cast<unsigned long long>(PayloadBytes(kv, position)));
  }
  // What the file says, not only that it arrived intact (a checksum is
  // easy to make right): the model, layout, position and sizes above, and
  // every token id inside the vocabulary (the LLM refuses any other, and
  // tinyaiGetLLMTokens hands them on). The rows' values are data: any bits
  // evaluate (a NaN or an infinity ends in TINYAI_ERR_NOT_FINITE).
  const int32_t used = kv.SlotsUsed(position);
  TINYAI_RETURN_IF_ERROR(CheckTokens(&file, kHeader + payload - static_cast<uint64_t>(used) * sizeof(int32_t), used,
                                     model->params().vocab_size, path));
  // A growable cache takes the chunks the positions need (the runner is
  // still as it was if that fails: its cache only holds more room).
  if (make_room) TINYAI_RETURN_IF_ERROR(make_room(user, kv.HeldAfter(used)));
  TINYAI_RETURN_IF_ERROR(kv.Reserve(used));
  // Checked whole: read in place, the checksum again over what lands in
  // the cache (a file changed since it was checked is caught; only that or
  // a failing disk fails now).
  uint64_t at = kHeader;
  TinyAIStatus status = TINYAI_OK;
  int32_t run = 0;
  uint32_t again = Crc32c(0, h.bytes, kHeader);
  auto read = [&](void* dst, size_t bytes) {
    if (status != TINYAI_OK) return;
    status = dst ? ReadFileSource(&file, at, dst, bytes)
                 : SetError(TINYAI_ERR_INTERNAL, "KV cache: a slot below %d is not held", used);
    if (status == TINYAI_OK) again = Crc32c(again, dst, bytes);
    at += bytes;
  };
  for (int values = 0; values < 2; ++values) {
    for (int32_t l = 0; l < kv.shape().layers; ++l) {
      for (int32_t hd = 0; hd < kv.shape().kv_heads; ++hd) {
        for (int32_t slot = 0; slot < used && status == TINYAI_OK; slot += run) {
          uint8_t* rows = kv.MutableRows(values != 0, l, hd, slot, &run);
          run = run < used - slot ? run : used - slot;
          read(rows, static_cast<size_t>(run) * kv.row_bytes());
        }
      }
    }
  }
  for (int32_t slot = 0; slot < used && status == TINYAI_OK; slot += run) {
    int32_t* tokens = kv.MutableTokens(slot, &run);
    run = run < used - slot ? run : used - slot;
    read(tokens, static_cast<size_t>(run) * sizeof(int32_t));
  }
  if (status == TINYAI_OK && again != crc) {
    status = SetError(TINYAI_ERR_CHECKSUM, "%s changed while it was read (its contents hashed to %08x, then to %08x)",
                      path, static_cast<unsigned>(crc), static_cast<unsigned>(again));
  }
  if (status != TINYAI_OK) {
    model->set_position(0);  // part read: the cache is emptied rather than left half one session's
    return AddErrorContext(status, "tinyaiLoadLLMSession: ");
  }
  model->set_position(static_cast<int32_t>(position));
  return TINYAI_OK;
}

}  // namespace tinyai
