/*
 * tinyai/persistent.h - persistent memory across steps (a "cache"): named
 * scalars, tensors, tables and auto-dim matrices whose values live between
 * inference steps, in the model of the persistent-memory document
 * (../shared/seeds/003: `persistent { ... }`, cache.read / write /
 * increment / decrement / reset). The LLaMA KV cache is one client
 * (<tinyai/llm.h>); an application can keep its own state in one too.
 *
 *     TinyAIPersistentStore* store = NULL;
 *     TinyAIPersistentConfig cfg = tinyaiCreateDefaultPersistentConfig();
 *     cfg.memoryLimit = 1 << 20;
 *     tinyaiCreatePersistentStore(&cfg, &store);
 *     tinyaiSetPersistentDim(store, "D", 64);
 *     tinyaiDeclarePersistent(store,
 *         "persistent {\n"
 *         "    step: i32 @init(0);\n"
 *         "    A(i): f32[D] @table;\n"               // grows with i
 *         "    K(l, t): f16[4, 16] @table @fixed(l=2, t=128);\n"
 *         "}\n");
 *     float row[64] = {0};
 *     tinyaiPersistentWrite(store, "A[step]", TINYAI_PTYPE_F32, row, sizeof row);
 *     tinyaiPersistentIncrement(store, "step", 1);
 *     size_t bytes = 0;
 *     tinyaiPersistentRead(store, "A[0..-1]", TINYAI_PTYPE_F32, buffer, sizeof buffer, &bytes);
 *     tinyaiSavePersistentStore(store, "state.tps");    // and tinyaiLoadPersistentStore after a reboot
 *     tinyaiDestroyPersistentStore(store);
 *
 * Declarations. One per line (or `;`-separated), optionally inside
 * `persistent { ... }`:
 *   NAME: TYPE @init(LITERAL);                   a scalar (0 unless @init)
 *   NAME: TYPE[D0, D1, ...];                     a tensor (dimensions: integers or
 *                                                names given to tinyaiSetPersistentDim)
 *   NAME(i, j, ...): TYPE[D0, ...] @table;       a table of such elements, indexed by
 *                                                its indices; each index grows as rows
 *                                                are written, or is fixed:
 *   ... @table @fixed(i=1024, j=256);            (a fixed index out of range is refused)
 *   NAME(i, j): TYPE[D0, D1] @auto_dim(i, j);    a matrix that gains rows (i) and
 *                                                columns (j): written at its edge it
 *                                                grows by one; @fixed(i=.., j=..) caps
 *                                                the growth; with more indices than the
 *                                                auto ones (`C(l, i, j): ... @table
 *                                                @auto_dim(i, j)`) a table of them.
 *   TYPE: f16 f32 f64 i8 i16 i32 i64 u8 u16 u32 u64 bool.
 * Names (entries, indices, dimensions) are letters, digits and '_', not a
 * digit first, of 1 to TINYAI_PERSISTENT_MAX_NAME bytes, and compare whole:
 * a longer one is refused by name (TINYAI_ERR_INVALID_ARGUMENT, "... is
 * longer than 63 bytes") wherever it is given - declarations, references,
 * an index naming a scalar, tinyaiSetPersistentDim, increments,
 * tinyaiGetPersistentEntry - never cut to its first 63 bytes.
 * Dimensions and @fixed extents are at most 2^40 (an auto-dim matrix's
 * may be 0: it starts empty).
 * @init literals must match the type (the document's rule): float literals
 * (5.0, -1e-3) for f16/f32/f64, integer literals for integer types and bool
 * (0 or 1); `@init(5)` on f32 is TINYAI_ERR_INVALID_ARGUMENT. The value is
 * kept as a double (TinyAIPersistentEntry.init): an integer literal the
 * double does not hold exactly (past 2^53, other than a power of two: an
 * i64's 9223372036854775807) is refused, not rounded; a float one must be
 * finite in its type (65520.0 is infinity in f16: refused).
 *
 * References (the operations' `ref`): NAME; NAME[I, J, ...] for a table's
 * row (or an auto-dim element); slices of an index: `NAME[]` (all of it),
 * `NAME[0..5]`, `NAME[2..5]`, `NAME[0..-3]` - ranges are half-open, a..b is
 * a, a+1, .., b-1, and a negative end counts back from the index's extent
 * (with 10 rows, `A[0..-3]` is rows 0..6, 7 of them). An index is an integer
 * or the name of a scalar entry (its value: `K[l, step]`). An index is
 * below 2^40: a reference past what exists when reading, past a fixed
 * extent, or past 2^40 when writing a growable table is
 * TINYAI_ERR_OUT_OF_BOUNDS whatever number it gives (up to INT64_MAX, or
 * more digits; a scalar's value that is negative, not whole or past
 * INT64_MAX too), and the message shows the index as given. An auto-dim
 * matrix's forms: `A[]` (the whole matrix), `A[r, ]` (row r), `A[, c]`
 * (column c), `A[r, c]` (one element), `A[a..b, ]` (rows a..b-1). A write
 * grows it by whole rows (all its columns) and whole columns (all its
 * rows), with no gap: an empty matrix (`f32[0, 0]`) gains its first row
 * and column with `A[0, 0]`, and `A[0..r+1, 0..c+1]` writes an r x c
 * matrix and one more row and column at once. A matrix holds at most 2^40
 * rows and 2^40 columns (its declared size plus its @fixed growth, at most
 * 2^40), declared, grown or loaded. The matrices of a table grow apart: a
 * reference over several (`C[]`, `C[0..2, 1, ]`) takes each one's own rows
 * and columns - `C[]` is every matrix whole, one after the other, for
 * read, write and reset alike - and an index one of them lacks is
 * TINYAI_ERR_OUT_OF_BOUNDS naming that matrix (`C[0]`).
 * Slices are read and written row after row in index order; data crosses
 * the API as TYPE values packed together (a conversion to or from another
 * TinyAIPersistentType is refused: TINYAI_ERR_INVALID_ARGUMENT). A value
 * is any bits of its type (a float may be NaN or infinite: written, saved
 * and loaded as given), but a bool is 0 or 1.
 *
 * Memory: growable tables grow a chunk of rows at a time
 * (TinyAIPersistentConfig.chunkRows) and auto-dim matrices a block at a
 * time; nothing stored is ever copied to grow. Everything the store holds
 * (rows, chunks, directories, and names: each entry's and each named
 * dimension's record, with a share that bounds its place in the store's
 * lists and hash tables of names) counts against memoryLimit: a write, a
 * declaration or a new dimension that would pass it is
 * TINYAI_ERR_RESOURCE_EXHAUSTED and changes nothing. Names are found in
 * constant time: declaring (or setting) n of them takes time linear in n.
 *
 * A store is used by one thread at a time. Every call given a store that is
 * not live (destroyed, or never created) changes nothing and reports
 * TINYAI_ERR_MISUSE naming the call: as its status, or (the calls that
 * return a count, a name or a size) as the last error, with -1, NULL or 0.
 */
#ifndef TINYAI_PERSISTENT_H
#define TINYAI_PERSISTENT_H

#include <stddef.h>
#include <stdint.h>

#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct TinyAIPersistentStore TinyAIPersistentStore;

/* Element types; values are pinned (stored in saved files). */
typedef enum TinyAIPersistentType TINYAI_ENUM_BASE {
    TINYAI_PTYPE_F32 = 0,
    TINYAI_PTYPE_F16 = 1,  /* IEEE half, as uint16_t bits */
    TINYAI_PTYPE_F64 = 2,
    TINYAI_PTYPE_I8 = 3,
    TINYAI_PTYPE_I16 = 4,
    TINYAI_PTYPE_I32 = 5,
    TINYAI_PTYPE_I64 = 6,
    TINYAI_PTYPE_U8 = 7,
    TINYAI_PTYPE_U16 = 8,
    TINYAI_PTYPE_U32 = 9,
    TINYAI_PTYPE_U64 = 10,
    TINYAI_PTYPE_BOOL = 11  /* one byte, 0 or 1 */
} TinyAIPersistentType;

#define TINYAI_PERSISTENT_MAX_RANK 4     /* dimensions of an element */
#define TINYAI_PERSISTENT_MAX_INDICES 4  /* indices of a table */
#define TINYAI_PERSISTENT_MAX_NAME 63    /* bytes of a name: letters, digits and '_', not a digit first */

typedef struct TinyAIPersistentConfig {
    uint32_t structSize;  /* sizeof(TinyAIPersistentConfig); set by tinyaiCreateDefaultPersistentConfig() */
    size_t memoryLimit;   /* bytes the store may hold in all; 0 = no limit (default) */
    int32_t chunkRows;    /* rows a growable table's last index gains at a time, 1..65536; default 64 */
} TinyAIPersistentConfig;

/* An entry: what tinyaiDeclarePersistentEntry declares, and what
 * tinyaiGetPersistentEntry reports of one. */
typedef struct TinyAIPersistentEntry {
    uint32_t structSize;      /* sizeof(TinyAIPersistentEntry) */
    const char* name;
    TinyAIPersistentType dtype;
    int32_t rank;             /* the element's dimensions: 0 for a scalar */
    int64_t shape[TINYAI_PERSISTENT_MAX_RANK];   /* the element's (an auto-dim one's initial) shape */
    int32_t indexCount;       /* 0: a scalar or a tensor */
    const char* indexNames[TINYAI_PERSISTENT_MAX_INDICES];
    int64_t fixedExtent[TINYAI_PERSISTENT_MAX_INDICES]; /* 0: grows; N: fixed (a table index) or the
                                                           most it grows (an auto-dim index) */
    int32_t autoDimCount;     /* the last autoDimCount indices are auto dims: index k of them
                                 grows element dimension k (0: a plain table) */
    int32_t hasInit;          /* a scalar with @init */
    double init;              /* its value (integer types: a whole number, exact up to 2^53) */
    /* Reported (tinyaiGetPersistentEntry); ignored when declaring: */
    int64_t extent[TINYAI_PERSISTENT_MAX_INDICES]; /* each index's extent now: rows written so far
                                                      (the highest + 1), or the fixed extent */
    int64_t currentShape[TINYAI_PERSISTENT_MAX_RANK]; /* an auto-dim element's shape now */
    uint64_t bytes;           /* memory it holds (its record and its share of the name tables
                                 included): the entries' add up to tinyaiGetPersistentMemoryUsage
                                 less what the named dimensions hold */
} TinyAIPersistentEntry;

TINYAI_API TinyAIPersistentConfig tinyaiCreateDefaultPersistentConfig(void);
TINYAI_API TinyAIStatus tinyaiCreatePersistentStore(const TinyAIPersistentConfig* config, TinyAIPersistentStore** out);
TINYAI_API void tinyaiDestroyPersistentStore(TinyAIPersistentStore* store);

/* A named dimension for declarations (`D` in `f32[D]`), 0..2^40. Setting
 * a name again changes its value for declarations made after. A new name
 * counts against memoryLimit (TINYAI_ERR_RESOURCE_EXHAUSTED past it). */
TINYAI_API TinyAIStatus tinyaiSetPersistentDim(TinyAIPersistentStore* store, const char* name, int64_t value);
/* Declarations in the document's syntax (above). All or nothing: an error
 * (TINYAI_ERR_INVALID_ARGUMENT with "line N:" and what is wrong; a name
 * declared twice; TINYAI_ERR_RESOURCE_EXHAUSTED for a fixed table past
 * memoryLimit) declares none of them. */
TINYAI_API TinyAIStatus tinyaiDeclarePersistent(TinyAIPersistentStore* store, const char* text);
TINYAI_API TinyAIStatus tinyaiDeclarePersistentEntry(TinyAIPersistentStore* store, const TinyAIPersistentEntry* entry);

/* Reads what ref names into out as its type's values packed (bytes of it:
 * *bytes; TINYAI_ERR_BUFFER_TOO_SMALL with *bytes the size needed when
 * capacity is short). A table row never written reads as zeros;
 * TINYAI_ERR_OUT_OF_BOUNDS for an index past a fixed extent or past the
 * rows written of a growable one. */
TINYAI_API TinyAIStatus tinyaiPersistentRead(const TinyAIPersistentStore* store, const char* ref,
                                             TinyAIPersistentType dtype, void* out, size_t capacity, size_t* bytes);
/* Writes data (exactly the bytes ref's slice holds) into what ref names; a
 * growable index grows to take it. TINYAI_ERR_INVALID_ARGUMENT for another
 * dtype or size (naming both) and for a bool byte other than 0 or 1;
 * TINYAI_ERR_OUT_OF_BOUNDS past a fixed extent (or 2^40);
 * TINYAI_ERR_RESOURCE_EXHAUSTED past memoryLimit. A write of no values
 * changes nothing. */
TINYAI_API TinyAIStatus tinyaiPersistentWrite(TinyAIPersistentStore* store, const char* ref,
                                              TinyAIPersistentType dtype, const void* data, size_t bytes);
/* A scalar's value += n or -= n (n >= 0), exactly in its type: integers
 * over their whole range (u64 up to 2^64 - 1), floats rounded once. An
 * unsigned type (or bool) taken below 0, or any past its range, is
 * TINYAI_ERR_OUT_OF_BOUNDS and leaves it; for f16/f32/f64 that is a result
 * that is not finite (f16 past 65504), and an increment lost to rounding
 * (the value unchanged: f16 counts by 1 up to 2048, f32 up to 2^24, f64 up
 * to 2^53), and a value that is not finite to begin with. */
TINYAI_API TinyAIStatus tinyaiPersistentIncrement(TinyAIPersistentStore* store, const char* name, int64_t n);
TINYAI_API TinyAIStatus tinyaiPersistentDecrement(TinyAIPersistentStore* store, const char* name, int64_t n);
/* Resets what ref names: a scalar to its @init, a tensor or a table row (or
 * slice) to zeros, a whole table to no rows (a growable one frees its
 * chunks); NULL or "" resets every entry. A slice takes time in the rows
 * held, not in its extent (a slice over 2^40 rows never written is quick). */
TINYAI_API TinyAIStatus tinyaiPersistentReset(TinyAIPersistentStore* store, const char* ref);

TINYAI_API TinyAIStatus tinyaiGetPersistentEntry(const TinyAIPersistentStore* store, const char* name,
                                                 TinyAIPersistentEntry* out);
/* Entries in declaration order (-1 for a NULL store), and one's name. */
TINYAI_API int32_t tinyaiGetPersistentEntryCount(const TinyAIPersistentStore* store);
TINYAI_API const char* tinyaiGetPersistentEntryName(const TinyAIPersistentStore* store, int32_t index);
/* Bytes the store holds now (what counts against memoryLimit). */
TINYAI_API uint64_t tinyaiGetPersistentMemoryUsage(const TinyAIPersistentStore* store);

/* Saves every entry's declaration and contents to path (CRC-32C
 * checksummed; written beside it and renamed, so a failed save leaves what
 * path held). A save writes what the store holds, not every place it could
 * hold: the chunks and blocks written, each with its place (a table of 2^40
 * rows with one written saves one chunk), so a file takes at most 24 bytes
 * plus 4 times tinyaiGetPersistentMemoryUsage(store). The format (TPS1,
 * version 2; a load reads version 1 too) is described in
 * src/kv/store_io.cc.
 * A store loads a file back only into the same declarations (names, types,
 * shapes, indices, auto dims): TINYAI_ERR_MISMATCH for another store's
 * file (naming the first difference), TINYAI_ERR_BAD_MAGIC for no store
 * file, TINYAI_ERR_CHECKSUM for a corrupt one, TINYAI_ERR_TRUNCATED, and
 * TINYAI_ERR_BAD_FORMAT for one whose checksum is right but which says what
 * no store writes or the API refuses (a checksum is easy to make right): a
 * declaration tinyaiDeclarePersistentEntry would refuse, a bool other than
 * 0 or 1, a growable index's extent other than one past the highest row it
 * holds, a place outside the extents or out of order, a matrix past its
 * bounds, bytes after the checksum.
 * Memory: the file's growable tables and matrices are built beside the
 * store's (the store keeps its own until the file's are whole), and both
 * count against memoryLimit while both are held, so a load never holds
 * more than memoryLimit: when the file's contents do not fit beside what
 * the store holds, TINYAI_ERR_RESOURCE_EXHAUSTED names the bytes (in use,
 * left, and what a reset frees) and the fix - reset the store first
 * (tinyaiPersistentReset(store, NULL)) or raise memoryLimit. Scalars,
 * tensors and fixed tables are read into place (no second copy).
 * Every check runs before anything changes, and on those errors the store
 * is left as it was. If the file cannot be read part way through the
 * entries read in place, after every check (a failing disk, a file changed
 * meanwhile), the error says the store is partly loaded. */
TINYAI_API TinyAIStatus tinyaiSavePersistentStore(const TinyAIPersistentStore* store, const char* path);
TINYAI_API TinyAIStatus tinyaiLoadPersistentStore(TinyAIPersistentStore* store, const char* path);

/* Static names: "f32", "f16", ..., "bool"; "?" otherwise. */
TINYAI_API const char* tinyaiPersistentTypeName(TinyAIPersistentType type);

#ifdef __cplusplus
}
#endif

#endif /* TINYAI_PERSISTENT_H */
