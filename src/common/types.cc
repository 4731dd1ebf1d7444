#include "tinyai/types.h"

extern "C" {

uint32_t tinyaiDTypeSize(TinyAIDType dtype) {
  switch (dtype) {
    case TINYAI_DTYPE_F32: return 4;
    case TINYAI_DTYPE_F16: return 2;
    default: return 0;
  }
}

const char* tinyaiDTypeName(TinyAIDType dtype) {
  switch (dtype) {
    case TINYAI_DTYPE_F32: return "f32";
    case TINYAI_DTYPE_F16: return "f16";
    case TINYAI_DTYPE_Q8_G32: return "q8_g32";
    case TINYAI_DTYPE_Q4_G32: return "q4_g32";
    case TINYAI_DTYPE_Q4NL_G32: return "q4nl_g32";
    case TINYAI_DTYPE_Q4_K: return "q4_k";
    case TINYAI_DTYPE_Q5_K: return "q5_k";
    case TINYAI_DTYPE_Q6_K: return "q6_k";
    case TINYAI_DTYPE_Q5_G32: return "q5_g32";
    case TINYAI_DTYPE_Q5M_G32: return "q5m_g32";
  }
  return "?";
}

const char* tinyaiCodecName(TinyAICodec codec) {
  switch (codec) {
    case TINYAI_CODEC_NONE: return "none";
    case TINYAI_CODEC_ZSTD: return "zstd";
    case TINYAI_CODEC_TILE_SPARSE: return "tile_sparse";
  }
  return "?";
}

const char* tinyaiTensorRoleName(TinyAITensorRole role) {
  switch (role) {
    case TINYAI_ROLE_OTHER: return "other";
    case TINYAI_ROLE_TOKEN_EMBEDDING: return "token_embedding";
    case TINYAI_ROLE_ATTN_NORM: return "attn_norm";
    case TINYAI_ROLE_ATTN_Q: return "attn_q";
    case TINYAI_ROLE_ATTN_K: return "attn_k";
    case TINYAI_ROLE_ATTN_V: return "attn_v";
    case TINYAI_ROLE_ATTN_OUT: return "attn_out";
    case TINYAI_ROLE_FFN_NORM: return "ffn_norm";
    case TINYAI_ROLE_FFN_GATE: return "ffn_gate";
    case TINYAI_ROLE_FFN_DOWN: return "ffn_down";
    case TINYAI_ROLE_FFN_UP: return "ffn_up";
    case TINYAI_ROLE_OUTPUT_NORM: return "output_norm";
    case TINYAI_ROLE_CLASSIFIER: return "classifier";
    case TINYAI_ROLE_DENSE_WEIGHT: return "dense_weight";
    case TINYAI_ROLE_DENSE_BIAS: return "dense_bias";
    case TINYAI_ROLE_ATTN_Q_BIAS: return "attn_q_bias";
    case TINYAI_ROLE_ATTN_K_BIAS: return "attn_k_bias";
    case TINYAI_ROLE_ATTN_V_BIAS: return "attn_v_bias";
  }
  return "?";
}

const char* tinyaiLayerKindName(TinyAILayerKind kind) {
  switch (kind) {
    case TINYAI_LAYER_EMBEDDING: return "embedding";
    case TINYAI_LAYER_TRANSFORMER: return "transformer";
    case TINYAI_LAYER_OUTPUT: return "output";
    case TINYAI_LAYER_DENSE: return "dense";
  }
  return "?";
}

}  // extern "C"
