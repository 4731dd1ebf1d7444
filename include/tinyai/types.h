/*
 * tinyai/types.h - element types, codecs and tensor roles shared by the
 * .tmai format (docs/format.md) and the C API. Values are stored in files and
 * are pinned forever; new values are only appended.
 */
#ifndef TINYAI_TYPES_H
#define TINYAI_TYPES_H

#include <stdint.h>

#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Element type of a tensor as stored (after its codec is undone). */
typedef enum TinyAIDType TINYAI_ENUM_BASE {
    TINYAI_DTYPE_F32 = 0,
    TINYAI_DTYPE_F16 = 1,     /* IEEE half (binary16) */
    TINYAI_DTYPE_Q8_G32 = 2,  /* int8 in groups of 32 with an f16 scale (GGUF Q8_0) */
    TINYAI_DTYPE_Q4_G32 = 3,  /* int4 in groups of 32 with an f16 scale (GGUF Q4_0) */
    TINYAI_DTYPE_Q4NL_G32 = 4,/* 4-bit codes of a non-uniform grid, groups of 32 with an
                                 f16 scale (GGUF IQ4_NL) */
    TINYAI_DTYPE_Q4_K = 5,    /* GGUF Q4_K: blocks of 256, eight sub-blocks of 32 with 6-bit
                                 scales and minimums (4.5 bits a value) */
    TINYAI_DTYPE_Q5_K = 6,    /* GGUF Q5_K: as Q4_K with 5-bit codes (5.5 bits a value) */
    TINYAI_DTYPE_Q6_K = 7,    /* GGUF Q6_K: blocks of 256, 6-bit codes, an int8 scale a
                                 16 values (6.5625 bits a value) */
    TINYAI_DTYPE_Q5_G32 = 8,  /* GGUF Q5_0: 5-bit codes in groups of 32 with an f16 scale */
    TINYAI_DTYPE_Q5M_G32 = 9  /* GGUF Q5_1: as Q5_0 with an f16 minimum */
} TinyAIDType;

/* How a tensor's bytes are stored in the file. */
typedef enum TinyAICodec TINYAI_ENUM_BASE {
    TINYAI_CODEC_NONE = 0,
    TINYAI_CODEC_ZSTD = 1,         /* zstd frames of row slices (docs/format.md) */
    TINYAI_CODEC_TILE_SPARSE = 2   /* reserved: tile mask + non-zero tiles (pruning) */
} TinyAICodec;

/* What a tensor is for. */
typedef enum TinyAITensorRole TINYAI_ENUM_BASE {
    TINYAI_ROLE_OTHER = 0,
    TINYAI_ROLE_TOKEN_EMBEDDING = 1, /* [vocab, dim] */
    TINYAI_ROLE_ATTN_NORM = 2,       /* [dim] */
    TINYAI_ROLE_ATTN_Q = 3,          /* [dim, dim] */
    TINYAI_ROLE_ATTN_K = 4,          /* [kv_dim, dim] */
    TINYAI_ROLE_ATTN_V = 5,          /* [kv_dim, dim] */
    TINYAI_ROLE_ATTN_OUT = 6,        /* [dim, dim] */
    TINYAI_ROLE_FFN_NORM = 7,        /* [dim] */
    TINYAI_ROLE_FFN_GATE = 8,        /* w1 [hidden, dim] */
    TINYAI_ROLE_FFN_DOWN = 9,        /* w2 [dim, hidden] */
    TINYAI_ROLE_FFN_UP = 10,         /* w3 [hidden, dim] */
    TINYAI_ROLE_OUTPUT_NORM = 11,    /* [dim] */
    TINYAI_ROLE_CLASSIFIER = 12,     /* [vocab, dim]; absent when tied to the embedding */
    TINYAI_ROLE_DENSE_WEIGHT = 13,   /* reserved for dense networks */
    TINYAI_ROLE_DENSE_BIAS = 14,
    TINYAI_ROLE_ATTN_Q_BIAS = 15,    /* [dim]: added to the queries (Qwen2) */
    TINYAI_ROLE_ATTN_K_BIAS = 16,    /* [kv_dim] */
    TINYAI_ROLE_ATTN_V_BIAS = 17     /* [kv_dim] */
} TinyAITensorRole;

/* What a layer (a page-aligned group of tensors in the file) holds. */
typedef enum TinyAILayerKind TINYAI_ENUM_BASE {
    TINYAI_LAYER_EMBEDDING = 0,  /* the token embedding table */
    TINYAI_LAYER_TRANSFORMER = 1,/* one attention + feed-forward block */
    TINYAI_LAYER_OUTPUT = 2,     /* final norm and (untied) classifier */
    TINYAI_LAYER_DENSE = 3       /* reserved for dense networks */
} TinyAILayerKind;

/* Bytes one element takes for dtypes with a whole number of bytes per
 * element, 0 for grouped types (see docs/format.md) and unknown values. */
TINYAI_API uint32_t tinyaiDTypeSize(TinyAIDType dtype);

/* Static names, e.g. "f32", "zstd", "attn_q", "transformer"; "?" if unknown. */
TINYAI_API const char* tinyaiDTypeName(TinyAIDType dtype);
TINYAI_API const char* tinyaiCodecName(TinyAICodec codec);
TINYAI_API const char* tinyaiTensorRoleName(TinyAITensorRole role);
TINYAI_API const char* tinyaiLayerKindName(TinyAILayerKind kind);

#ifdef __cplusplus
}
#endif

#endif /* TINYAI_TYPES_H */
