// Sessions that survive a restart: a LLaMA runner's KV cache (its
// persistent store: keys, values, the token at each slot), its position,
// and what they belong to, saved to a file and loaded back into a runner
// of the same model and KV layout (tinyaiSaveLLMSession /
// tinyaiLoadLLMSession).
//
// The file (little-endian):
//   "TSN1"  u32 version (1)
//   u64     the model's fingerprint: CRC-32C over its index checksum (which
//           covers every tensor's name, shape, dtype and the CRC of its
//           stored bytes), its size, and the dtype each tensor runs at
//           (precisions applied to the open model count)
//   i32 x 8 the KV cache: type, window, sinks, slots, layers, KV heads,
//           head size, row bytes
//   i64     the position (tokens evaluated)
//   u64     the payload's bytes, then the payload: the slots in use
//           (KvCache::SlotsUsed(position)) of the keys, as rows of row
//           bytes by [layer][KV head][slot], the values likewise, then their
//           tokens (i32 each)
//   u32     CRC-32C of everything before it
// A load checks, before it changes anything: the magic (TINYAI_ERR_BAD_MAGIC),
// the length (TINYAI_ERR_TRUNCATED), the checksum (TINYAI_ERR_CHECKSUM),
// then what the file says, since a checksum is easy to make right: the
// model and the KV layout (TINYAI_ERR_MISMATCH naming what differs: the
// fields must be this LLM's own, so each is one the code knows), the
// position (0 .. the slots, or any int32 with a window) and the payload's
// size for it, and every token id inside the vocabulary
// (TINYAI_ERR_BAD_FORMAT naming the first that is not). The rows' values
// are data (any bits evaluate; a NaN or infinity gives
// TINYAI_ERR_NOT_FINITE). The cache's rows are then read in place (no
// second copy of the cache is ever held) with the checksum computed again
// over them: a file changed meanwhile empties the cache with
// TINYAI_ERR_CHECKSUM, as a failing read empties it.
#ifndef TINYAI_MODEL_SESSION_H_
#define TINYAI_MODEL_SESSION_H_

#include <cstdint>

#include "model/llama.h"
#include "tinyai/status.h"

namespace tinyai {

// The model's fingerprint (above).
uint64_t ModelFingerprint(const TinyAIMappedModel& model);

TinyAIStatus SaveSession(const LlamaModel& model, const char* path);
// On any error the runner is as it was. A growable cache takes the chunks
// the session's positions need; before it does, make_room (when given) is
// told the most the cache will hold (the scheduler shrinks the weight
// cache first), and a failure there refuses the load.
using MakeRoom = TinyAIStatus (*)(void* user, uint64_t kv_bytes);
TinyAIStatus LoadSession(LlamaModel* model, const char* path, MakeRoom make_room = nullptr, void* user = nullptr);

}  // namespace tinyai

#endif  // TINYAI_MODEL_SESSION_H_
