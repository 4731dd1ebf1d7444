/*
 * c_api_test.c - a pure C99 program that drives the whole public C API
 * (every function of the headers in include/tinyai/), built with -Wall -Wextra -Werror
 * -pedantic.
 *
 *   c_api_test MODEL.tmai TEMP_DIR [GOLDEN.expected]
 *
 * MODEL is stories260K converted to .tmai; exit code 77 (skip) when it does
 * not exist, or 1 when the environment sets TINYAI_REQUIRE_SHARED (to
 * anything but 0: the shared data is required). TEMP_DIR is a writable
 * folder for scratch files. GOLDEN, when given, is compared in full with the
 * greedy text of "Once upon a time"; otherwise its known first sentence is
 * checked.
 *
 * Prints "N passed, M failed" and returns non-zero on any failure.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <tinyai/tinyai.h>
#include <tinyai/utils/forward_scheduler.h>
#include <tinyai/utils/prune.h>

static int g_passed = 0;
static int g_failed = 0;

static void check(int ok, const char* what, const char* file, int line) {
    if (ok) {
        ++g_passed;
    } else {
        ++g_failed;
        fprintf(stderr, "%s:%d: FAILED: %s\n", file, line, what);
        fprintf(stderr, "    last error: %s: %s\n", tinyaiStatusString(tinyaiGetLastError()),
                tinyaiGetLastErrorMessage());
    }
}

#define CHECK(cond) check((cond) ? 1 : 0, #cond, __FILE__, __LINE__)

/* status == code, and for an error the last error is code with a message
 * (positive statuses such as TINYAI_STOPPED are not failures: they record
 * nothing). */
static void check_status(TinyAIStatus got, TinyAIStatus want, const char* expr, const char* file, int line) {
    if (got != want) {
        char what[512];
        snprintf(what, sizeof what, "%s returned %s, expected %s", expr, tinyaiStatusString(got),
                 tinyaiStatusString(want));
        check(0, what, file, line);
        return;
    }
    ++g_passed;
    if (want < 0) {
        check(tinyaiGetLastError() == want, "tinyaiGetLastError() matches the returned status", file, line);
        check(tinyaiGetLastErrorMessage()[0] != '\0', "the failure has a message", file, line);
    }
}

#define CHECK_STATUS(expr, want) check_status((expr), (want), #expr, __FILE__, __LINE__)

/* A sentinel return (NULL, -1, 0) must come with the last error set. */
static void check_last_error(TinyAIStatus want, const char* expr, const char* file, int line) {
    char what[512];
    snprintf(what, sizeof what, "after %s: last error is %s (expected %s)", expr,
             tinyaiStatusString(tinyaiGetLastError()), tinyaiStatusString(want));
    check(tinyaiGetLastError() == want, what, file, line);
    snprintf(what, sizeof what, "after %s: the last error has a message", expr);
    check(tinyaiGetLastErrorMessage()[0] != '\0', what, file, line);
}

#define CHECK_SENTINEL(expr, sentinel, want)                          \
    do {                                                              \
        tinyaiClearLastError();                                       \
        CHECK((expr) == (sentinel));                                  \
        check_last_error((want), #expr, __FILE__, __LINE__);          \
    } while (0)

/* A NULL-argument status call: returns want, last error set, message names needle. */
static void check_null_arg(TinyAIStatus got, const char* needle, const char* expr, const char* file, int line) {
    char what[512];
    check_status(got, TINYAI_ERR_INVALID_ARGUMENT, expr, file, line);
    snprintf(what, sizeof what, "message of %s names '%s' (got \"%s\")", expr, needle, tinyaiGetLastErrorMessage());
    check(strstr(tinyaiGetLastErrorMessage(), needle) != NULL, what, file, line);
}

#define CHECK_NULL_ARG(expr, needle)                                  \
    do {                                                              \
        tinyaiClearLastError();                                       \
        check_null_arg((expr), (needle), #expr, __FILE__, __LINE__);  \
    } while (0)

static int file_exists(const char* path) {
    FILE* f = fopen(path, "rb");
    if (!f) return 0;
    fclose(f);
    return 1;
}

/* Reads a whole file into malloc'd memory (64-byte aligned copy in *aligned). */
static unsigned char* read_file(const char* path, size_t* size, unsigned char** aligned) {
    FILE* f = fopen(path, "rb");
    long n;
    unsigned char* raw;
    if (!f) return NULL;
    if (fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0) {
        fclose(f);
        return NULL;
    }
    raw = (unsigned char*)malloc((size_t)n + 64);
    if (!raw) {
        fclose(f);
        return NULL;
    }
    *aligned = raw + (64 - (size_t)((uintptr_t)raw % 64)) % 64;
    if (fread(*aligned, 1, (size_t)n, f) != (size_t)n) {
        free(raw);
        fclose(f);
        return NULL;
    }
    fclose(f);
    *size = (size_t)n;
    return raw;
}

static int write_file(const char* path, const void* data, size_t size) {
    FILE* f = fopen(path, "wb");
    int ok;
    if (!f) return 0;
    ok = size == 0 || fwrite(data, 1, size, f) == size;
    return fclose(f) == 0 && ok;
}

/* ---- status.h, types.h, tinyai.h ---------------------------------------------- */

static void test_status_and_types(void) {
    static const TinyAIStatus codes[] = {
        TINYAI_OK, TINYAI_ERR_INVALID_ARGUMENT, TINYAI_ERR_OUT_OF_MEMORY, TINYAI_ERR_RESOURCE_EXHAUSTED,
        TINYAI_ERR_FILE_NOT_FOUND, TINYAI_ERR_IO, TINYAI_ERR_BAD_MAGIC, TINYAI_ERR_UNSUPPORTED_VERSION,
        TINYAI_ERR_TRUNCATED, TINYAI_ERR_OUT_OF_BOUNDS, TINYAI_ERR_OVERFLOW, TINYAI_ERR_CHECKSUM,
        TINYAI_ERR_BAD_FORMAT, TINYAI_ERR_BAD_TOKENIZER, TINYAI_ERR_CONTEXT_OVERFLOW, TINYAI_ERR_UNSUPPORTED,
        TINYAI_ERR_MISUSE, TINYAI_ERR_NOT_FOUND, TINYAI_ERR_INTERNAL, TINYAI_ERR_GRAPH_CYCLE,
        TINYAI_ERR_MISSING_DEPENDENCY, TINYAI_ERR_NOT_FINITE, TINYAI_ERR_BUFFER_TOO_SMALL, TINYAI_ERR_MISMATCH};
    static const char* names[] = {
        "TINYAI_OK", "TINYAI_ERR_INVALID_ARGUMENT", "TINYAI_ERR_OUT_OF_MEMORY", "TINYAI_ERR_RESOURCE_EXHAUSTED",
        "TINYAI_ERR_FILE_NOT_FOUND", "TINYAI_ERR_IO", "TINYAI_ERR_BAD_MAGIC", "TINYAI_ERR_UNSUPPORTED_VERSION",
        "TINYAI_ERR_TRUNCATED", "TINYAI_ERR_OUT_OF_BOUNDS", "TINYAI_ERR_OVERFLOW", "TINYAI_ERR_CHECKSUM",
        "TINYAI_ERR_BAD_FORMAT", "TINYAI_ERR_BAD_TOKENIZER", "TINYAI_ERR_CONTEXT_OVERFLOW", "TINYAI_ERR_UNSUPPORTED",
        "TINYAI_ERR_MISUSE", "TINYAI_ERR_NOT_FOUND", "TINYAI_ERR_INTERNAL", "TINYAI_ERR_GRAPH_CYCLE",
        "TINYAI_ERR_MISSING_DEPENDENCY", "TINYAI_ERR_NOT_FINITE", "TINYAI_ERR_BUFFER_TOO_SMALL", "TINYAI_ERR_MISMATCH"};
    size_t i;
    int role;
    /* Values are pinned: 0, then -1 .. -23 in order. */
    for (i = 0; i < sizeof codes / sizeof codes[0]; ++i) {
        const char* s = tinyaiStatusString(codes[i]);
        CHECK((int)codes[i] == -(int)i);
        CHECK(s != NULL);
        if (s) CHECK(strcmp(s, names[i]) == 0);
    }
    CHECK(tinyaiStatusString((TinyAIStatus)-999) != NULL);
    CHECK(tinyaiStatusString((TinyAIStatus)7) != NULL);
    CHECK(strcmp(tinyaiStatusString((TinyAIStatus)-999), "TINYAI_OK") != 0);

    tinyaiClearLastError();
    CHECK(tinyaiGetLastError() == TINYAI_OK);
    CHECK(tinyaiGetLastErrorMessage() != NULL);
    CHECK(strcmp(tinyaiGetLastErrorMessage(), "") == 0);

    CHECK(tinyaiDTypeSize(TINYAI_DTYPE_F32) == 4);
    CHECK(tinyaiDTypeSize(TINYAI_DTYPE_F16) == 2);
    CHECK(tinyaiDTypeSize(TINYAI_DTYPE_Q8_G32) == 0);
    CHECK(tinyaiDTypeSize(TINYAI_DTYPE_Q4_G32) == 0);
    CHECK(tinyaiDTypeSize((TinyAIDType)77) == 0);
    CHECK(strcmp(tinyaiDTypeName(TINYAI_DTYPE_F32), "f32") == 0);
    CHECK(strcmp(tinyaiDTypeName(TINYAI_DTYPE_F16), "f16") == 0);
    CHECK(strcmp(tinyaiDTypeName(TINYAI_DTYPE_Q8_G32), "q8_g32") == 0);
    CHECK(strcmp(tinyaiDTypeName(TINYAI_DTYPE_Q4_G32), "q4_g32") == 0);
    CHECK(strcmp(tinyaiDTypeName((TinyAIDType)77), "?") == 0);
    CHECK(strcmp(tinyaiCodecName(TINYAI_CODEC_NONE), "none") == 0);
    CHECK(strcmp(tinyaiCodecName(TINYAI_CODEC_ZSTD), "zstd") == 0);
    CHECK(strcmp(tinyaiCodecName(TINYAI_CODEC_TILE_SPARSE), "tile_sparse") == 0);
    CHECK(strcmp(tinyaiCodecName((TinyAICodec)9), "?") == 0);
    for (role = TINYAI_ROLE_OTHER; role <= TINYAI_ROLE_ATTN_V_BIAS; ++role) {
        const char* n = tinyaiTensorRoleName((TinyAITensorRole)role);
        CHECK(n != NULL && strcmp(n, "?") != 0 && n[0] != '\0');
    }
    CHECK(strcmp(tinyaiTensorRoleName(TINYAI_ROLE_ATTN_Q), "attn_q") == 0);
    CHECK(strcmp(tinyaiTensorRoleName((TinyAITensorRole)99), "?") == 0);
    CHECK(strcmp(tinyaiLayerKindName(TINYAI_LAYER_EMBEDDING), "embedding") == 0);
    CHECK(strcmp(tinyaiLayerKindName(TINYAI_LAYER_TRANSFORMER), "transformer") == 0);
    CHECK(strcmp(tinyaiLayerKindName(TINYAI_LAYER_OUTPUT), "output") == 0);
    CHECK(strcmp(tinyaiLayerKindName(TINYAI_LAYER_DENSE), "dense") == 0);
    CHECK(strcmp(tinyaiLayerKindName((TinyAILayerKind)42), "?") == 0);

    CHECK(strcmp(tinyaiVersionString(), TINYAI_VERSION_STRING) == 0);
    CHECK(TINYAI_VERSION_MAJOR == 0 && TINYAI_VERSION_MINOR == 1);
    CHECK(tinyaiFormatVersion() == 1);
    {
        /* The current size read first: the peak read after it can only be larger. */
        uint64_t current = tinyaiGetProcessCurrentRss();
        uint64_t peak = tinyaiGetProcessPeakRss();
        CHECK(current > 0);
        CHECK(peak >= current);
    }
}

/* ---- NULL arguments everywhere ------------------------------------------------- */

static void test_null_arguments(void) {
    TinyAITensorInfo info;
    memset(&info, 0, sizeof info);
    info.structSize = sizeof info;
    TinyAIModelInfo minfo;
    memset(&minfo, 0, sizeof minfo);
    minfo.structSize = sizeof minfo;
    TinyAISamplerConfig sc = tinyaiCreateDefaultSamplerConfig();
    TinyAIGenerateParams gp = tinyaiCreateDefaultGenerateParams();
    TinyAILLM* llm = (TinyAILLM*)&sc; /* overwritten with NULL on failure */
    int index = 0;
    int64_t i64 = 0;
    float f = 0.0f;
    const char* str = NULL;
    size_t len = 0;
    int32_t ids[4] = {1, 2, 3, 4};
    int32_t count = 0;
    char buf[16];
    float logits[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    uint64_t state = 0;
    int32_t token = 0;

    /* mmap_loader.h */
    CHECK_SENTINEL(tinyaiOpenMappedModel(NULL, NULL), NULL, TINYAI_ERR_INVALID_ARGUMENT);
    CHECK(strstr(tinyaiGetLastErrorMessage(), "path") != NULL);
    CHECK_SENTINEL(tinyaiOpenMappedModelFromMemory(NULL, 128, NULL), NULL, TINYAI_ERR_INVALID_ARGUMENT);
    CHECK(strstr(tinyaiGetLastErrorMessage(), "data") != NULL);
    tinyaiCloseMappedModel(NULL);
    CHECK_SENTINEL(tinyaiGetMappedLayerCount(NULL), -1, TINYAI_ERR_INVALID_ARGUMENT);
    CHECK_SENTINEL(tinyaiGetLayerDescriptor(NULL, 0), NULL, TINYAI_ERR_INVALID_ARGUMENT);
    CHECK_SENTINEL(tinyaiGetLayerWeights(NULL, 0), NULL, TINYAI_ERR_INVALID_ARGUMENT);
    CHECK_NULL_ARG(tinyaiPrefetchLayerWeights(NULL, 0), "model");
    CHECK_NULL_ARG(tinyaiReleaseLayerWeights(NULL, 0), "model");
    CHECK_SENTINEL(tinyaiGetMappedModelMemoryUsage(NULL), 0, TINYAI_ERR_INVALID_ARGUMENT);
    CHECK_NULL_ARG(tinyaiSetLayerPriority(NULL, 0, 1.0f), "model");
    CHECK_SENTINEL(tinyaiGetMappedTensorCount(NULL), -1, TINYAI_ERR_INVALID_ARGUMENT);
    CHECK_NULL_ARG(tinyaiGetMappedTensorInfo(NULL, 0, &info), "model");
    CHECK_NULL_ARG(tinyaiFindMappedTensor(NULL, "token_embd", &index), "model");
    CHECK_NULL_ARG(tinyaiGetMetadataInt(NULL, "llama.dim", &i64), "model");
    CHECK_NULL_ARG(tinyaiGetMetadataFloat(NULL, "llama.norm_eps", &f), "model");
    CHECK_NULL_ARG(tinyaiGetMetadataString(NULL, "general.name", &str, &len), "model");
    /* "0 for NULL", with the cause recorded like every other count. */
    CHECK_SENTINEL(tinyaiGetMappedModelFileSize(NULL), 0, TINYAI_ERR_INVALID_ARGUMENT);

    /* llm.h */
    CHECK_NULL_ARG(tinyaiCreateLLM(NULL, NULL, &llm), "model");
    CHECK(llm == NULL);
    CHECK_NULL_ARG(tinyaiCreateLLM(NULL, NULL, NULL), "out");
    tinyaiDestroyLLM(NULL);
    CHECK_NULL_ARG(tinyaiGetLLMModelInfo(NULL, &minfo), "llm");
    CHECK_NULL_ARG(tinyaiLLMTokenize(NULL, "a", 1, ids, 4, &count), "llm");
    CHECK_NULL_ARG(tinyaiLLMDecodeToken(NULL, 1, 2, buf, sizeof buf, &len), "llm");
    CHECK_NULL_ARG(tinyaiLLMChatPrompt(NULL, NULL, "a", buf, sizeof buf, &len), "llm");
    CHECK_NULL_ARG(tinyaiLLMChatNextTurn(NULL, "a", buf, sizeof buf, &len), "llm");
    CHECK_SENTINEL(tinyaiLLMChatTemplateName(NULL), NULL, TINYAI_ERR_INVALID_ARGUMENT);
    CHECK_NULL_ARG(tinyaiLLMEval(NULL, ids, 1, NULL), "llm");
    CHECK_SENTINEL(tinyaiGetLLMPosition(NULL), -1, TINYAI_ERR_INVALID_ARGUMENT);
    CHECK_NULL_ARG(tinyaiResetLLM(NULL), "llm");
    CHECK_NULL_ARG(tinyaiLLMSample(NULL, logits, &sc, &state, &token), "llm");
    CHECK_NULL_ARG(tinyaiLLMGenerate(NULL, "a", &gp, buf, sizeof buf, &len, NULL), "llm");
}

static void test_null_arguments_with_handles(TinyAIMappedModel* model, TinyAILLM* llm) {
    TinyAIModelInfo minfo;
    memset(&minfo, 0, sizeof minfo);
    minfo.structSize = sizeof minfo;
    TinyAISamplerConfig sc = tinyaiCreateDefaultSamplerConfig();
    TinyAIGenerateParams gp = tinyaiCreateDefaultGenerateParams();
    int index = 0;
    int64_t i64 = 0;
    float f = 0.0f;
    const char* str = NULL;
    size_t len = 0;
    int32_t ids[4] = {1, 2, 3, 4};
    int32_t count = 0;
    char buf[16];
    float logits[512];
    uint64_t state = 0;
    int32_t token = 0;
    memset(logits, 0, sizeof logits);

    CHECK_NULL_ARG(tinyaiGetMappedTensorInfo(model, 0, NULL), "out");
    CHECK_NULL_ARG(tinyaiFindMappedTensor(model, NULL, &index), "name");
    CHECK_NULL_ARG(tinyaiFindMappedTensor(model, "token_embd", NULL), "tensorIndex");
    CHECK_NULL_ARG(tinyaiGetMetadataInt(model, NULL, &i64), "key");
    CHECK_NULL_ARG(tinyaiGetMetadataInt(model, "llama.dim", NULL), "out");
    CHECK_NULL_ARG(tinyaiGetMetadataFloat(model, NULL, &f), "key");
    CHECK_NULL_ARG(tinyaiGetMetadataFloat(model, "llama.norm_eps", NULL), "out");
    CHECK_NULL_ARG(tinyaiGetMetadataString(model, NULL, &str, &len), "key");
    CHECK_NULL_ARG(tinyaiGetMetadataString(model, "general.name", NULL, &len), "str");
    CHECK_NULL_ARG(tinyaiGetMetadataString(model, "general.name", &str, NULL), "len");

    CHECK_NULL_ARG(tinyaiGetLLMModelInfo(llm, NULL), "out");
    CHECK_NULL_ARG(tinyaiLLMTokenize(llm, NULL, 1, ids, 4, &count), "text");
    CHECK_NULL_ARG(tinyaiLLMTokenize(llm, "a", 1, ids, 4, NULL), "count");
    CHECK_STATUS(tinyaiLLMTokenize(llm, "a", 1, NULL, 4, &count), TINYAI_ERR_INVALID_ARGUMENT);
    CHECK_NULL_ARG(tinyaiLLMDecodeToken(llm, 1, 2, buf, sizeof buf, NULL), "len");
    CHECK_NULL_ARG(tinyaiLLMDecodeToken(llm, 1, 2, NULL, 4, &len), "out");
    CHECK_NULL_ARG(tinyaiLLMChatPrompt(llm, NULL, NULL, buf, sizeof buf, &len), "user message");
    CHECK_NULL_ARG(tinyaiLLMChatPrompt(llm, NULL, "a", buf, sizeof buf, NULL), "len");
    CHECK_NULL_ARG(tinyaiLLMChatPrompt(llm, NULL, "a", NULL, 4, &len), "out");
    CHECK_NULL_ARG(tinyaiLLMChatNextTurn(llm, NULL, buf, sizeof buf, &len), "user message");
    CHECK_NULL_ARG(tinyaiLLMChatNextTurn(llm, "a", buf, sizeof buf, NULL), "len");
    /* The test model (llama2.c's) has no chat template. */
    CHECK(strcmp(tinyaiLLMChatTemplateName(llm), "none") == 0);
    CHECK_STATUS(tinyaiLLMChatPrompt(llm, NULL, "a", buf, sizeof buf, &len), TINYAI_ERR_UNSUPPORTED);
    CHECK_STATUS(tinyaiLLMChatNextTurn(llm, "a", buf, sizeof buf, &len), TINYAI_ERR_UNSUPPORTED);
    CHECK_NULL_ARG(tinyaiLLMEval(llm, NULL, 1, NULL), "tokens");
    CHECK_NULL_ARG(tinyaiLLMSample(llm, NULL, &sc, &state, &token), "logits");
    CHECK_NULL_ARG(tinyaiLLMSample(llm, logits, NULL, &state, &token), "sampler");
    CHECK_NULL_ARG(tinyaiLLMSample(llm, logits, &sc, NULL, &token), "rngState");
    CHECK_NULL_ARG(tinyaiLLMSample(llm, logits, &sc, &state, NULL), "token");
    CHECK_NULL_ARG(tinyaiLLMGenerate(llm, NULL, &gp, buf, sizeof buf, &len, NULL), "prompt");
    CHECK_NULL_ARG(tinyaiLLMGenerate(llm, "a", &gp, NULL, 10, &len, NULL), "out");
    (void)minfo;
}

/* ---- Struct-size versioning ----------------------------------------------------- */

static void test_struct_sizes(const char* model_path, TinyAIMappedModel* model, TinyAILLM* llm) {
    TinyAIMmapConfig mc = tinyaiCreateDefaultMmapConfig();
    TinyAILLMConfig lc = tinyaiCreateDefaultLLMConfig();
    TinyAISamplerConfig sc = tinyaiCreateDefaultSamplerConfig();
    TinyAIGenerateParams gp = tinyaiCreateDefaultGenerateParams();
    TinyAILLM* other = NULL;
    float logits[512];
    uint64_t state = 1;
    int32_t token = 0;
    memset(logits, 0, sizeof logits);

    CHECK(mc.structSize == sizeof(TinyAIMmapConfig));
    CHECK(mc.maxCacheSize == (size_t)256 * 1024 * 1024);
    CHECK(mc.minLayerCacheSize == 4096);
    CHECK(mc.prefetchThreads == TINYAI_PREFETCH_THREADS_AUTO);
    CHECK(mc.prefetchEnabled && mc.adaptiveCaching && mc.verifyChecksums);
    CHECK(lc.structSize == sizeof(TinyAILLMConfig));
    CHECK(lc.contextLength == 0 && lc.threads == 1);
    CHECK(sc.structSize == sizeof(TinyAISamplerConfig));
    CHECK(sc.temperature == 0.0f);
    CHECK(sc.topP > 0.89f && sc.topP < 0.91f);
    CHECK(gp.structSize == sizeof(TinyAIGenerateParams));
    CHECK(gp.steps == 0 && gp.maxNewTokens == 256);
    CHECK(gp.onText == NULL && gp.user == NULL);
    CHECK(gp.sampler.structSize == sizeof(TinyAISamplerConfig));

    mc.structSize = 0;
    CHECK_SENTINEL(tinyaiOpenMappedModel(model_path, &mc), NULL, TINYAI_ERR_INVALID_ARGUMENT);
    CHECK(strstr(tinyaiGetLastErrorMessage(), "structSize") != NULL);
    lc.structSize = 0;
    tinyaiClearLastError();
    CHECK_STATUS(tinyaiCreateLLM(model, &lc, &other), TINYAI_ERR_INVALID_ARGUMENT);
    CHECK(other == NULL);
    CHECK(strstr(tinyaiGetLastErrorMessage(), "structSize") != NULL);
    gp.structSize = 0;
    CHECK_STATUS(tinyaiLLMGenerate(llm, "a", &gp, NULL, 0, NULL, NULL), TINYAI_ERR_INVALID_ARGUMENT);
    CHECK(strstr(tinyaiGetLastErrorMessage(), "structSize") != NULL);
    sc.structSize = 0;
    CHECK_STATUS(tinyaiLLMSample(llm, logits, &sc, &state, &token), TINYAI_ERR_INVALID_ARGUMENT);
    CHECK(strstr(tinyaiGetLastErrorMessage(), "structSize") != NULL);
    /* A struct from a newer library (larger) is refused too. */
    lc = tinyaiCreateDefaultLLMConfig();
    lc.structSize = (uint32_t)sizeof(TinyAILLMConfig) + 16;
    CHECK_STATUS(tinyaiCreateLLM(model, &lc, &other), TINYAI_ERR_INVALID_ARGUMENT);
    /* Enum fields hold whatever int a C caller stores: checked, never loaded
     * as an out-of-range enum by the library (UndefinedBehaviorSanitizer's
     * enum check runs this in CI). */
    lc = tinyaiCreateDefaultLLMConfig();
    lc.mode = (TinyAIExecutionMode)7;
    CHECK_STATUS(tinyaiCreateLLM(model, &lc, &other), TINYAI_ERR_INVALID_ARGUMENT);
    CHECK(strstr(tinyaiGetLastErrorMessage(), "mode 7") != NULL);
    lc.mode = (TinyAIExecutionMode)-1;
    CHECK_STATUS(tinyaiCreateLLM(model, &lc, &other), TINYAI_ERR_INVALID_ARGUMENT);
    {
        int big = 0x7fffffff;
        memcpy(&lc.mode, &big, sizeof big);
        CHECK_STATUS(tinyaiCreateLLM(model, &lc, &other), TINYAI_ERR_INVALID_ARGUMENT);
    }
    CHECK(strcmp(tinyaiStatusString((TinyAIStatus)-99), "TINYAI_ERR_UNKNOWN") == 0);
    CHECK(strcmp(tinyaiStopReasonName((TinyAIStopReason)1000), "?") == 0);
    CHECK(strcmp(tinyaiDTypeName((TinyAIDType)77), "?") == 0 || tinyaiDTypeName((TinyAIDType)77)[0] != '\0');
    /* NULL configs are the defaults. */
    CHECK_STATUS(tinyaiCreateLLM(model, NULL, &other), TINYAI_OK);
    CHECK(other != NULL);
    tinyaiDestroyLLM(other);
}

/* ---- Files that are not models --------------------------------------------------- */

static void test_bad_files(const char* tmp, const unsigned char* image, size_t size) {
    char path[1024];
    unsigned char* copy;
    TinyAIMappedModel* m;

    snprintf(path, sizeof path, "%s/c_api_test_missing.tmai", tmp);
    remove(path);
    CHECK_SENTINEL(tinyaiOpenMappedModel(path, NULL), NULL, TINYAI_ERR_FILE_NOT_FOUND);
    CHECK(strstr(tinyaiGetLastErrorMessage(), "c_api_test_missing.tmai") != NULL);

    snprintf(path, sizeof path, "%s/c_api_test_empty.tmai", tmp);
    CHECK(write_file(path, "", 0));
    CHECK_SENTINEL(tinyaiOpenMappedModel(path, NULL), NULL, TINYAI_ERR_TRUNCATED);
    remove(path);

    copy = (unsigned char*)malloc(size);
    CHECK(copy != NULL);
    if (!copy) return;
    memcpy(copy, image, size);
    copy[0] = 'X';
    snprintf(path, sizeof path, "%s/c_api_test_magic.tmai", tmp);
    CHECK(write_file(path, copy, size));
    CHECK_SENTINEL(tinyaiOpenMappedModel(path, NULL), NULL, TINYAI_ERR_BAD_MAGIC);
    CHECK(strstr(tinyaiGetLastErrorMessage(), "c_api_test_magic.tmai") != NULL);
    remove(path);

    snprintf(path, sizeof path, "%s/c_api_test_cut.tmai", tmp);
    CHECK(write_file(path, image, size - 100));
    CHECK_SENTINEL(tinyaiOpenMappedModel(path, NULL), NULL, TINYAI_ERR_TRUNCATED);
    remove(path);

    /* A flipped data byte in the last layer: opens, the layer fails its checksum. */
    memcpy(copy, image, size);
    copy[size - 5] ^= 0x40;
    snprintf(path, sizeof path, "%s/c_api_test_crc.tmai", tmp);
    CHECK(write_file(path, copy, size));
    m = tinyaiOpenMappedModel(path, NULL);
    CHECK(m != NULL);
    if (m) {
        int last = tinyaiGetMappedLayerCount(m) - 1;
        CHECK_SENTINEL(tinyaiGetLayerWeights(m, last), NULL, TINYAI_ERR_CHECKSUM);
        tinyaiCloseMappedModel(m);
    }
    remove(path);
    free(copy);
}

/* ---- The loader on stories260K --------------------------------------------------- */

static void test_loader(TinyAIMappedModel* model, const unsigned char* image, size_t size) {
    int layers = tinyaiGetMappedLayerCount(model);
    int tensors = tinyaiGetMappedTensorCount(model);
    int i, index = -1, next = 0;
    int64_t i64 = 0;
    float f = 0.0f;
    const char* str = NULL;
    size_t len = 0;
    size_t usage = 0;
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    TinyAITensorInfo info;
    memset(&info, 0, sizeof info);
    info.structSize = sizeof info;
    void* w;

    CHECK(layers == 7); /* embedding, 5 blocks, output */
    CHECK(tensors == 1 + 5 * 9 + 1);
    CHECK(tinyaiGetMappedModelFileSize(model) == (uint64_t)size);
    CHECK(tinyaiGetMappedModelMemoryUsage(model) == 0);
    for (i = 0; i < layers; ++i) {
        const TinyAILayerDescriptor* d = tinyaiGetLayerDescriptor(model, i);
        CHECK(d != NULL);
        if (!d) continue;
        CHECK(d->index == i);
        CHECK(d->fileOffset % 4096 == 0);
        CHECK(d->firstTensor == next);
        next += d->tensorCount;
        CHECK(d->name != NULL);
        CHECK(d->kind == (i == 0 ? TINYAI_LAYER_EMBEDDING
                                 : i == layers - 1 ? TINYAI_LAYER_OUTPUT : TINYAI_LAYER_TRANSFORMER));
        CHECK(d->blockIndex == (d->kind == TINYAI_LAYER_TRANSFORMER ? i - 1 : -1));
        CHECK_STATUS(tinyaiPrefetchLayerWeights(model, i), TINYAI_OK);
        CHECK_STATUS(tinyaiSetLayerPriority(model, i, (float)i), TINYAI_OK);
        w = tinyaiGetLayerWeights(model, i);
        CHECK(w != NULL);
        CHECK(w == NULL || memcmp(w, image + d->fileOffset, (size_t)d->storedSize) == 0);
        /* the cache holds a loaded layer in whole pages */
        usage += ((size_t)d->decodedSize + page - 1) / page * page;
        CHECK(tinyaiGetMappedModelMemoryUsage(model) == usage);
        CHECK_STATUS(tinyaiReleaseLayerWeights(model, i), TINYAI_OK);
    }
    CHECK(next == tensors);
    CHECK_STATUS(tinyaiReleaseLayerWeights(model, 0), TINYAI_ERR_MISUSE);
    CHECK_SENTINEL(tinyaiGetLayerDescriptor(model, layers), NULL, TINYAI_ERR_INVALID_ARGUMENT);
    CHECK_SENTINEL(tinyaiGetLayerWeights(model, -1), NULL, TINYAI_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(tinyaiSetLayerPriority(model, 0, -1.0f), TINYAI_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(tinyaiSetLayerPriority(model, 0, (float)NAN), TINYAI_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(tinyaiPrefetchLayerWeights(model, layers), TINYAI_ERR_INVALID_ARGUMENT);

    for (i = 0; i < tensors; ++i) {
        CHECK_STATUS(tinyaiGetMappedTensorInfo(model, i, &info), TINYAI_OK);
        CHECK(info.name != NULL && info.dtype == TINYAI_DTYPE_F32 && info.codec == TINYAI_CODEC_NONE);
        CHECK(info.decodedSize == info.elementCount * 4);
        CHECK_STATUS(tinyaiFindMappedTensor(model, info.name, &index), TINYAI_OK);
        CHECK(index == i);
    }
    CHECK_STATUS(tinyaiGetMappedTensorInfo(model, tensors, &info), TINYAI_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(tinyaiFindMappedTensor(model, "blk.4.attn_q", &index), TINYAI_OK);
    CHECK_STATUS(tinyaiGetMappedTensorInfo(model, index, &info), TINYAI_OK);
    CHECK(strcmp(info.name, "blk.4.attn_q") == 0);
    CHECK(info.role == TINYAI_ROLE_ATTN_Q && info.blockIndex == 4 && info.nDims == 2);
    CHECK(info.shape[0] == 64 && info.shape[1] == 64);
    CHECK_STATUS(tinyaiFindMappedTensor(model, "blk.5.attn_q", &index), TINYAI_ERR_NOT_FOUND);

    CHECK_STATUS(tinyaiGetMetadataInt(model, "llama.dim", &i64), TINYAI_OK);
    CHECK(i64 == 64);
    CHECK_STATUS(tinyaiGetMetadataInt(model, "llama.vocab_size", &i64), TINYAI_OK);
    CHECK(i64 == 512);
    CHECK_STATUS(tinyaiGetMetadataFloat(model, "llama.norm_eps", &f), TINYAI_OK);
    CHECK(f > 0.0f && f < 1e-4f);
    CHECK_STATUS(tinyaiGetMetadataString(model, "general.architecture", &str, &len), TINYAI_OK);
    CHECK(len == 5 && str != NULL && memcmp(str, "llama", 5) == 0);
    CHECK_STATUS(tinyaiGetMetadataInt(model, "no.such.key", &i64), TINYAI_ERR_NOT_FOUND);
    CHECK_STATUS(tinyaiGetMetadataFloat(model, "llama.dim", &f), TINYAI_ERR_BAD_FORMAT);
    CHECK_STATUS(tinyaiGetMetadataString(model, "llama.dim", &str, &len), TINYAI_ERR_BAD_FORMAT);
    CHECK_STATUS(tinyaiGetMetadataInt(model, "general.architecture", &i64), TINYAI_ERR_BAD_FORMAT);
}

/* ---- Text generation ------------------------------------------------------------ */

struct Stopper {
    int calls;
    int stop_at;
    size_t bytes;
};

/* The structured last error (tinyaiGetLastErrorInfo): a limit below the
 * model's minimum says by how much, which tensor's row slice, and that a
 * smaller KV type fits (then the limit that runs as configured); NORMAL
 * over its limit names a mode that fits; each remedy, applied, runs. */
static void test_error_info(TinyAIMappedModel* model, const char* model_path) {
    TinyAIErrorInfo info;
    TinyAIMemoryReport est;
    TinyAILLMConfig lc = tinyaiCreateDefaultLLMConfig();
    TinyAILLM* llm = NULL;
    uint64_t minimum;

    memset(&info, 0, sizeof info);
    info.structSize = sizeof info;
    tinyaiClearLastError();
    CHECK_STATUS(tinyaiGetLastErrorInfo(&info), TINYAI_OK);
    CHECK(info.status == TINYAI_OK && info.resource == TINYAI_RESOURCE_NONE && info.message[0] == '\0');
    CHECK(info.structSize == sizeof info);

    /* A failure without detail: status and message, resource NONE. */
    CHECK_STATUS(tinyaiCreateLLM(NULL, NULL, &llm), TINYAI_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(tinyaiGetLastErrorInfo(&info), TINYAI_OK);
    CHECK(info.status == TINYAI_ERR_INVALID_ARGUMENT && info.resource == TINYAI_RESOURCE_NONE);
    CHECK(strcmp(info.message, tinyaiGetLastErrorMessage()) == 0 && info.layer == -1 && info.tensor[0] == '\0');
    /* Bad arguments are not recorded: the failure asked about stays. */
    CHECK(tinyaiGetLastErrorInfo(NULL) == TINYAI_ERR_INVALID_ARGUMENT);
    info.structSize = 4;
    CHECK(tinyaiGetLastErrorInfo(&info) == TINYAI_ERR_INVALID_ARGUMENT);
    CHECK(tinyaiGetLastError() == TINYAI_ERR_INVALID_ARGUMENT);
    info.structSize = sizeof info;

    memset(&est, 0, sizeof est);
    est.structSize = sizeof est;
    lc.threads = 1;
    lc.kvType = TINYAI_KV_F32;
    CHECK_STATUS(tinyaiEstimateLLMMemory(model, &lc, &est), TINYAI_OK);
    minimum = est.minimumMemoryLimit;
    CHECK(minimum > est.kvCacheBytes / 2);

    /* One byte below the minimum with an f32 KV cache: f16 fits. */
    lc.memoryLimit = (size_t)(minimum - 1);
    CHECK_STATUS(tinyaiCreateLLM(model, &lc, &llm), TINYAI_ERR_RESOURCE_EXHAUSTED);
    CHECK_STATUS(tinyaiGetLastErrorInfo(&info), TINYAI_OK);
    CHECK(info.status == TINYAI_ERR_RESOURCE_EXHAUSTED && info.resource == TINYAI_RESOURCE_MEMORY_LIMIT);
    CHECK(info.stage == TINYAI_STAGE_PLAN && info.bytesNeeded == minimum && info.bytesLimit == minimum - 1);
    CHECK(info.remedy == TINYAI_REMEDY_KV_TYPE && info.remedyValue == TINYAI_KV_F16);
    CHECK(info.remedy2 == TINYAI_REMEDY_RAISE_LIMIT && info.remedy2Value == minimum);
    CHECK(info.tensor[0] != '\0' && strstr(info.message, info.tensor) != NULL);
    CHECK(strstr(info.message, "(kvType f16)") != NULL);
    lc.kvType = (TinyAIKVType)info.remedyValue;
    CHECK_STATUS(tinyaiCreateLLM(model, &lc, &llm), TINYAI_OK);
    tinyaiDestroyLLM(llm);
    llm = NULL;
    lc.kvType = TINYAI_KV_F32;
    lc.memoryLimit = (size_t)info.remedy2Value;
    CHECK_STATUS(tinyaiCreateLLM(model, &lc, &llm), TINYAI_OK);
    tinyaiDestroyLLM(llm);
    llm = NULL;

    /* Below what even an int8 KV cache needs: only a higher limit. */
    lc.memoryLimit = (size_t)(minimum - est.kvCacheBytes);
    CHECK_STATUS(tinyaiCreateLLM(model, &lc, &llm), TINYAI_ERR_RESOURCE_EXHAUSTED);
    CHECK_STATUS(tinyaiGetLastErrorInfo(&info), TINYAI_OK);
    CHECK(info.remedy == TINYAI_REMEDY_RAISE_LIMIT && info.remedyValue == minimum);
    CHECK(info.remedy2 == TINYAI_REMEDY_NONE);

    /* NORMAL asked for, at the minimum: a mode that fits. */
    lc.memoryLimit = (size_t)minimum;
    lc.mode = TINYAI_EXEC_NORMAL;
    CHECK_STATUS(tinyaiCreateLLM(model, &lc, &llm), TINYAI_ERR_RESOURCE_EXHAUSTED);
    CHECK_STATUS(tinyaiGetLastErrorInfo(&info), TINYAI_OK);
    CHECK(info.resource == TINYAI_RESOURCE_MEMORY_LIMIT && info.remedy == TINYAI_REMEDY_MODE);
    CHECK(info.remedyValue == TINYAI_EXEC_MEMORY_OPT || info.remedyValue == TINYAI_EXEC_STREAMING);
    CHECK(info.remedy2 == TINYAI_REMEDY_RAISE_LIMIT && info.remedy2Value > minimum);
    CHECK(info.bytesNeeded == info.remedy2Value && info.bytesLimit == minimum);
    lc.mode = (TinyAIExecutionMode)info.remedyValue;
    CHECK_STATUS(tinyaiCreateLLM(model, &lc, &llm), TINYAI_OK);
    tinyaiDestroyLLM(llm);
    llm = NULL;

    tinyaiClearLastError();
    CHECK_STATUS(tinyaiGetLastErrorInfo(&info), TINYAI_OK);
    CHECK(info.status == TINYAI_OK && info.resource == TINYAI_RESOURCE_NONE && info.remedy == TINYAI_REMEDY_NONE);

    /* A run much slower than it could be, in the same record: no warning with
     * the weights resident; a cache capped below them warns, and its remedy
     * (the cap it names) takes the warning away. */
    lc = tinyaiCreateDefaultLLMConfig();
    lc.threads = 1;
    CHECK_STATUS(tinyaiCreateLLM(model, &lc, &llm), TINYAI_OK);
    if (llm) {
        CHECK_STATUS(tinyaiGetLLMWarning(llm, &info), TINYAI_OK);
        CHECK(info.status == TINYAI_OK && info.resource == TINYAI_RESOURCE_NONE && info.message[0] == '\0');
        tinyaiDestroyLLM(llm);
        llm = NULL;
    }
    CHECK_STATUS(tinyaiGetLLMWarning(NULL, &info), TINYAI_ERR_INVALID_ARGUMENT);
    {
        TinyAIMmapConfig mc = tinyaiCreateDefaultMmapConfig();
        TinyAIMappedModel* capped;
        uint64_t weights = 0;
        mc.maxCacheSize = (size_t)est.largestSliceBytes;
        capped = tinyaiOpenMappedModel(model_path, &mc);
        CHECK(capped != NULL);
        if (!capped) return;
        CHECK_STATUS(tinyaiCreateLLM(capped, &lc, &llm), TINYAI_OK);
        if (llm) {
            CHECK_STATUS(tinyaiGetLLMWarning(llm, &info), TINYAI_OK);
            CHECK(info.status == TINYAI_OK && info.resource == TINYAI_RESOURCE_WEIGHT_CACHE);
            CHECK(info.bytesLimit == est.largestSliceBytes && info.bytesNeeded > info.bytesLimit);
            CHECK(info.remedy == TINYAI_REMEDY_RAISE_CACHE && info.remedyValue == info.bytesNeeded);
            CHECK(strstr(info.message, "every token reads them from storage again") != NULL);
            weights = info.remedyValue;
            tinyaiDestroyLLM(llm);
            llm = NULL;
        }
        tinyaiCloseMappedModel(capped);
        mc.maxCacheSize = (size_t)weights;
        capped = tinyaiOpenMappedModel(model_path, &mc);
        CHECK(capped != NULL);
        if (!capped) return;
        CHECK_STATUS(tinyaiCreateLLM(capped, &lc, &llm), TINYAI_OK);
        if (llm) {
            CHECK_STATUS(tinyaiGetLLMWarning(llm, &info), TINYAI_OK);
            CHECK(info.resource == TINYAI_RESOURCE_NONE);
            tinyaiDestroyLLM(llm);
        }
        tinyaiCloseMappedModel(capped);
    }
    /* A fallback chain from C: nothing fits 1 byte; the levels tried are
     * the thread's last chain's. */
    {
        TinyAIFallbackReport fr;
        memset(&fr, 0, sizeof fr);
        fr.structSize = sizeof fr;
        lc = tinyaiCreateDefaultLLMConfig();
        lc.memoryLimit = 1;
        lc.fallback[0] = TINYAI_FALLBACK_KV_F16;
        lc.fallback[1] = TINYAI_FALLBACK_END;
        llm = NULL;
        CHECK_STATUS(tinyaiCreateLLM(model, &lc, &llm), TINYAI_ERR_RESOURCE_EXHAUSTED);
        CHECK(llm == NULL);
        CHECK(strstr(tinyaiGetLastErrorMessage(), "the fallback chain (kv-f16) was tried to its end") != NULL);
        CHECK_STATUS(tinyaiGetLLMFallback(NULL, &fr), TINYAI_OK);
        CHECK(fr.level == 1 && fr.kvType == TINYAI_KV_F16);
        CHECK(strstr(fr.log, "1. kv-f16: KV cache f32 -> f16: needs") != NULL);
        CHECK(strcmp(tinyaiFallbackName(TINYAI_FALLBACK_STREAMING), "streaming") == 0);
    }
}

static int on_text(const char* piece, size_t len, void* user) {
    struct Stopper* s = (struct Stopper*)user;
    (void)piece;
    ++s->calls;
    s->bytes += len;
    return s->stop_at > 0 && s->calls >= s->stop_at;
}

static void test_llm(TinyAIMappedModel* model, const char* golden_path) {
    static const char kPrefix[] = "Once upon a time, there was a little girl named Lily.";
    TinyAILLMConfig lc = tinyaiCreateDefaultLLMConfig();
    TinyAILLM* llm = NULL;
    TinyAIModelInfo info;
    memset(&info, 0, sizeof info);
    info.structSize = sizeof info;
    TinyAIGenerateParams gp = tinyaiCreateDefaultGenerateParams();
    TinyAIGenerateStats stats;
    TinyAISamplerConfig sc = tinyaiCreateDefaultSamplerConfig();
    struct Stopper stopper;
    int32_t ids[64];
    int32_t count = 0, needed = 0, token = -1, i;
    float* logits = NULL;
    uint64_t state = 42;
    char piece[64];
    char text[8192];
    char small[8];
    size_t len = 0, full_len = 0;

    lc.threads = 2;
    CHECK_STATUS(tinyaiCreateLLM(model, &lc, &llm), TINYAI_OK);
    if (!llm) return;
    test_null_arguments_with_handles(model, llm);

    CHECK_STATUS(tinyaiGetLLMModelInfo(llm, &info), TINYAI_OK);
    CHECK(info.dim == 64 && info.layers == 5 && info.vocabSize == 512 && info.seqLen == 512);
    CHECK(info.heads == 8 && info.kvHeads == 4 && info.contextLength == 512);
    CHECK(info.bosId == 1 && info.eosId == 2 && info.sharedClassifier == 1);
    CHECK(info.weightBytes > 0 && info.kvCacheBytes > 0 && info.activationBytes > 0);

    /* Tokenize: the sizing protocol. */
    CHECK_STATUS(tinyaiLLMTokenize(llm, "Once upon a time", 1, NULL, 0, &needed), TINYAI_ERR_BUFFER_TOO_SMALL);
    CHECK(needed > 1 && needed < 64);
    CHECK_STATUS(tinyaiLLMTokenize(llm, "Once upon a time", 1, ids, 64, &count), TINYAI_OK);
    CHECK(count == needed);
    CHECK(ids[0] == 1);
    /* Decode the prompt back. */
    text[0] = '\0';
    len = 0;
    for (i = 1; i < count && i < 64; ++i) {
        size_t n = 0;
        CHECK_STATUS(tinyaiLLMDecodeToken(llm, ids[i - 1], ids[i], piece, sizeof piece, &n), TINYAI_OK);
        if (len + n < sizeof text) {
            memcpy(text + len, piece, n);
            len += n;
            text[len] = '\0';
        }
    }
    CHECK(strcmp(text, "Once upon a time") == 0);
    CHECK_STATUS(tinyaiLLMDecodeToken(llm, 1, 512, piece, sizeof piece, &len), TINYAI_ERR_INVALID_ARGUMENT);

    /* Eval, position, sample, reset. */
    logits = (float*)malloc(sizeof(float) * (size_t)info.vocabSize);
    CHECK(logits != NULL);
    if (logits) {
        CHECK_STATUS(tinyaiLLMEval(llm, ids, count, logits), TINYAI_OK);
        CHECK(tinyaiGetLLMPosition(llm) == count);
        CHECK_STATUS(tinyaiLLMSample(llm, logits, &sc, &state, &token), TINYAI_OK);
        CHECK(token >= 0 && token < info.vocabSize);
        CHECK_STATUS(tinyaiLLMDecodeToken(llm, ids[count - 1], token, piece, sizeof piece, &len), TINYAI_OK);
        CHECK(len == 1 && piece[0] == ','); /* "Once upon a time" -> "," */
        CHECK_STATUS(tinyaiLLMEval(llm, &token, 1, NULL), TINYAI_OK);
        CHECK(tinyaiGetLLMPosition(llm) == count + 1);
        ids[0] = 600;
        CHECK_STATUS(tinyaiLLMEval(llm, ids, 1, logits), TINYAI_ERR_INVALID_ARGUMENT);
        ids[0] = 1;
        sc.temperature = -1.0f;
        CHECK_STATUS(tinyaiLLMSample(llm, logits, &sc, &state, &token), TINYAI_ERR_INVALID_ARGUMENT);
        sc.temperature = 0.0f;
        CHECK_STATUS(tinyaiResetLLM(llm), TINYAI_OK);
        CHECK(tinyaiGetLLMPosition(llm) == 0);
        free(logits);
    }

    /* Greedy generation: the golden story. */
    gp.steps = 256;
    memset(&stats, 0, sizeof stats);
    stats.structSize = sizeof stats;
    CHECK_STATUS(tinyaiLLMGenerate(llm, "Once upon a time", &gp, text, sizeof text, &full_len, &stats), TINYAI_OK);
    CHECK(strlen(text) == full_len);
    CHECK(strncmp(text, kPrefix, sizeof kPrefix - 1) == 0);
    if (strncmp(text, kPrefix, sizeof kPrefix - 1) != 0) fprintf(stderr, "    generated: %.200s\n", text);
    CHECK(stats.promptTokens == count);
    CHECK(stats.generatedTokens > 0 && stats.promptTokens + stats.generatedTokens <= 257);
    CHECK(stats.totalSeconds >= 0.0);
    if (golden_path) {
        size_t gsize = 0;
        unsigned char* aligned = NULL;
        unsigned char* golden = read_file(golden_path, &gsize, &aligned);
        CHECK(golden != NULL);
        if (golden) {
            /* The reference prints a final newline; tinyaiLLMGenerate does not. */
            CHECK(gsize > 0 && aligned[gsize - 1] == '\n');
            CHECK(gsize - 1 == full_len && memcmp(aligned, text, full_len) == 0);
            free(golden);
        }
    }

    /* A too-small buffer: truncated, terminated, full length reported. */
    memset(small, '#', sizeof small);
    CHECK_STATUS(tinyaiLLMGenerate(llm, "Once upon a time", &gp, small, sizeof small, &len, NULL),
                 TINYAI_ERR_BUFFER_TOO_SMALL);
    CHECK(len == full_len);
    CHECK(small[sizeof small - 1] == '\0');
    CHECK(strncmp(small, text, sizeof small - 1) == 0);

    /* The callback stops generation. */
    memset(&stopper, 0, sizeof stopper);
    stopper.stop_at = 5;
    gp.onText = on_text;
    gp.user = &stopper;
    {
        TinyAIGenerateStats st;
        memset(&st, 0, sizeof st);
        st.structSize = sizeof st;
        CHECK_STATUS(tinyaiLLMGenerate(llm, "Once upon a time", &gp, text, sizeof text, &len, &st), TINYAI_STOPPED);
        CHECK(st.stopReason == TINYAI_STOP_CALLBACK);
        CHECK(strcmp(tinyaiStopReasonName(st.stopReason), "callback") == 0);
        CHECK(strcmp(tinyaiStatusString(TINYAI_STOPPED), "TINYAI_STOPPED") == 0);
    }
    CHECK(stopper.calls == 5);
    CHECK(stopper.bytes == len);
    gp.onText = NULL;
    gp.user = NULL;

    /* Sampling: reproducible for a seed. */
    {
        char a[4096], b[4096];
        gp.sampler.temperature = 0.8f;
        gp.sampler.seed = 7;
        CHECK_STATUS(tinyaiLLMGenerate(llm, "Once upon a time", &gp, a, sizeof a, NULL, NULL), TINYAI_OK);
        CHECK_STATUS(tinyaiLLMGenerate(llm, "Once upon a time", &gp, b, sizeof b, NULL, NULL), TINYAI_OK);
        CHECK(strcmp(a, b) == 0);
        gp.sampler.topP = 1.5f;
        CHECK_STATUS(tinyaiLLMGenerate(llm, "Once upon a time", &gp, a, sizeof a, NULL, NULL),
                     TINYAI_ERR_INVALID_ARGUMENT);
        gp.sampler.topP = 0.9f;
        gp.sampler.temperature = 0.0f;
    }
    tinyaiDestroyLLM(llm);

    /* A 16-token context. */
    lc.contextLength = 16;
    lc.threads = 1;
    CHECK_STATUS(tinyaiCreateLLM(model, &lc, &llm), TINYAI_OK);
    if (llm) {
        CHECK_STATUS(tinyaiLLMGenerate(llm, "Once upon a time there was a big dog and a small cat who were friends",
                                    &gp, text, sizeof text, &len, NULL),
                     TINYAI_ERR_CONTEXT_OVERFLOW);
        for (i = 0; i < 16; ++i) ids[i] = 1 + i;
        CHECK_STATUS(tinyaiLLMEval(llm, ids, 16, NULL), TINYAI_OK);
        CHECK_STATUS(tinyaiLLMEval(llm, ids, 1, NULL), TINYAI_ERR_CONTEXT_OVERFLOW);
        tinyaiDestroyLLM(llm);
    }
}

/* ---- forward_scheduler.h ------------------------------------------------------ */

static void test_scheduler(TinyAIMappedModel* model) {
    TinyAISchedulerConfig cfg = tinyaiCreateDefaultSchedulerConfig();
    TinyAISchedulerReport rep;
    TinyAIForwardScheduler* plan_only;
    TinyAIForwardScheduler* s;
    char text[1024];
    char small[8];
    size_t needed = 0;
    int layer = -7, layers = 0, last = -1, n, i;

    /* NULL handles: statuses, sentinels, no crash. */
    CHECK_NULL_ARG(tinyaiAddLayerToSchedule(NULL, 0, -1, TINYAI_DEP_NONE, 4), "scheduler");
    CHECK_NULL_ARG(tinyaiAddModelLayersToSchedule(NULL), "scheduler");
    CHECK_NULL_ARG(tinyaiPrepareForwardPass(NULL), "scheduler");
    CHECK_NULL_ARG(tinyaiPlanForwardPass(NULL), "scheduler");
    CHECK_NULL_ARG(tinyaiGetSchedulerStatus(NULL), "scheduler");
    CHECK_NULL_ARG(tinyaiSetScheduleBatchSize(NULL, 1), "scheduler");
    CHECK_NULL_ARG(tinyaiGetSchedulerReport(NULL, &rep), "scheduler");
    CHECK_NULL_ARG(tinyaiDumpActivationDag(NULL, NULL, 0, &needed), "scheduler");
    CHECK_NULL_ARG(tinyaiSetSchedulerGenerateParams(NULL, NULL), "scheduler");
    CHECK_SENTINEL(tinyaiExecuteNextLayer(NULL, "x", text, &layer), false, TINYAI_ERR_INVALID_ARGUMENT);
    CHECK_SENTINEL(tinyaiCalculateOptimalBatchSize(NULL, 4, 4, 8), -1, TINYAI_ERR_INVALID_ARGUMENT);
    CHECK_SENTINEL(tinyaiGetLayerOutputSize(NULL, 0), 0, TINYAI_ERR_INVALID_ARGUMENT);
    CHECK(tinyaiGetSchedulerMemoryUsage(NULL) == 0 && tinyaiGetSchedulerPeakMemoryUsage(NULL) == 0);
    tinyaiDestroyForwardScheduler(NULL);
    CHECK_SENTINEL(tinyaiCreateForwardScheduler(model, (TinyAIExecutionMode)9, 0), NULL, TINYAI_ERR_INVALID_ARGUMENT);
    cfg.structSize = 3;
    CHECK_SENTINEL(tinyaiCreateForwardSchedulerWithConfig(model, TINYAI_EXEC_ADAPTIVE, 0, &cfg), NULL,
                   TINYAI_ERR_INVALID_ARGUMENT);
    CHECK(strcmp(tinyaiExecutionModeName(TINYAI_EXEC_STREAMING), "STREAMING") == 0);
    CHECK(strcmp(tinyaiExecutionModeName((TinyAIExecutionMode)42), "?") == 0);

    /* A planning-only schedule: the guide's residual example, then a cycle. */
    plan_only = tinyaiCreateForwardScheduler(NULL, TINYAI_EXEC_ADAPTIVE, 0);
    CHECK(plan_only != NULL);
    if (plan_only) {
        CHECK_STATUS(tinyaiAddLayerToSchedule(plan_only, 0, -1, TINYAI_DEP_NONE, 256), TINYAI_OK);
        CHECK_STATUS(tinyaiAddLayerToSchedule(plan_only, 1, 0, TINYAI_DEP_SEQUENTIAL, 256), TINYAI_OK);
        CHECK_STATUS(tinyaiAddLayerToSchedule(plan_only, 2, 0, TINYAI_DEP_RESIDUAL, 256), TINYAI_OK);
        CHECK_STATUS(tinyaiAddLayerToSchedule(plan_only, 3, 1, TINYAI_DEP_SEQUENTIAL, 128), TINYAI_OK);
        CHECK_STATUS(tinyaiAddLayerToSchedule(plan_only, 3, 2, TINYAI_DEP_SEQUENTIAL, 128), TINYAI_OK);
        CHECK_STATUS(tinyaiAddLayerToSchedule(plan_only, 4, 4, TINYAI_DEP_SEQUENTIAL, 128), TINYAI_ERR_GRAPH_CYCLE);
        CHECK_STATUS(tinyaiAddLayerToSchedule(plan_only, 5, 0, TINYAI_DEP_SEQUENTIAL, 0), TINYAI_ERR_INVALID_ARGUMENT);
        rep.structSize = sizeof rep;
        CHECK_STATUS(tinyaiGetSchedulerReport(plan_only, &rep), TINYAI_ERR_MISUSE);
        CHECK_STATUS(tinyaiPrepareForwardPass(plan_only), TINYAI_OK);
        CHECK_STATUS(tinyaiAddLayerToSchedule(plan_only, 9, 3, TINYAI_DEP_SEQUENTIAL, 4), TINYAI_ERR_MISUSE);
        CHECK_STATUS(tinyaiGetSchedulerReport(plan_only, &rep), TINYAI_OK);
        CHECK(rep.layerCount == 4 && rep.arenaBytes >= rep.lowerBoundBytes && rep.naiveBytes > rep.arenaBytes);
        CHECK(rep.mode == TINYAI_EXEC_NORMAL && rep.reason != NULL && rep.reason[0] != '\0');
        CHECK_SENTINEL(tinyaiExecuteNextLayer(plan_only, text, text, &layer), false, TINYAI_ERR_UNSUPPORTED);
        CHECK(tinyaiGetSchedulerStatus(plan_only) == TINYAI_ERR_UNSUPPORTED);
        CHECK_STATUS(tinyaiDumpActivationDag(plan_only, small, sizeof small, &needed), TINYAI_ERR_BUFFER_TOO_SMALL);
        CHECK(needed > sizeof small && small[sizeof small - 1] == '\0');
        tinyaiDestroyForwardScheduler(plan_only);
    }
    plan_only = tinyaiCreateForwardScheduler(NULL, TINYAI_EXEC_ADAPTIVE, 0);
    if (plan_only) {
        tinyaiAddLayerToSchedule(plan_only, 0, 1, TINYAI_DEP_SEQUENTIAL, 8);
        tinyaiAddLayerToSchedule(plan_only, 1, 0, TINYAI_DEP_SEQUENTIAL, 8);
        CHECK_STATUS(tinyaiPrepareForwardPass(plan_only), TINYAI_ERR_GRAPH_CYCLE);
        CHECK(strstr(tinyaiGetLastErrorMessage(), "0 -> 1") != NULL);
        tinyaiDestroyForwardScheduler(plan_only);
    }

    /* The language model, layer by layer, as the guide's last example. */
    s = tinyaiCreateForwardScheduler(model, TINYAI_EXEC_MEMORY_OPT, 64u << 20);
    CHECK(s != NULL);
    if (!s) return;
    CHECK_SENTINEL(tinyaiExecuteNextLayer(s, "Once", text, &layer), false, TINYAI_ERR_MISUSE);
    CHECK_STATUS(tinyaiAddModelLayersToSchedule(s), TINYAI_OK);
    n = tinyaiGetMappedLayerCount(model);
    for (i = 0; i < n; ++i) CHECK(tinyaiGetLayerOutputSize(model, i) > 0);
    CHECK_SENTINEL(tinyaiGetLayerOutputSize(model, n), 0, TINYAI_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(tinyaiPrepareForwardPass(s), TINYAI_OK);
    {
        TinyAIGenerateParams gp = tinyaiCreateDefaultGenerateParams();
        gp.steps = 24;
        CHECK_STATUS(tinyaiSetSchedulerGenerateParams(s, &gp), TINYAI_OK);
    }
    while (tinyaiExecuteNextLayer(s, "Once upon a time", text, &layer)) {
        CHECK(layer == (last + 1) % n);
        last = layer;
        ++layers;
    }
    CHECK(tinyaiGetSchedulerStatus(s) == TINYAI_OK);
    CHECK(layers > 0 && layers % n == 0 && last == n - 1);
    CHECK(strncmp(text, "Once upon a time", 16) == 0 && strlen(text) > 16);
    CHECK(tinyaiGetSchedulerPeakMemoryUsage(s) <= (64u << 20));
    CHECK(tinyaiGetSchedulerMemoryUsage(s) <= tinyaiGetSchedulerPeakMemoryUsage(s));
    CHECK_STATUS(tinyaiGetSchedulerReport(s, &rep), TINYAI_OK);
    CHECK(rep.mode == TINYAI_EXEC_MEMORY_OPT && rep.inPlaceCount > 0 && rep.kvCacheBytes > 0);
    tinyaiDestroyForwardScheduler(s);
}

/* A model read through the caller's callback: from the image, or failing. */
typedef struct {
    const unsigned char* image;
    size_t size;
    int fail_after;  /* calls that succeed before one fails; -1 never */
    int empty_calls; /* calls for 0 bytes (refused, as a careful callback may) */
} Reader;

static int read_image(void* user, uint64_t offset, void* dst, size_t size) {
    Reader* r = (Reader*)user;
    if (size == 0) {
        ++r->empty_calls;
        return -9;
    }
    if (r->fail_after == 0) return -7;
    if (r->fail_after > 0) --r->fail_after;
    if (offset > r->size || size > r->size - offset) return -5;
    memcpy(dst, r->image + offset, size);
    return 0;
}

/* The reader and the bare-metal calls on the posix port. */
static void test_reader_and_platform(const unsigned char* image, size_t size) {
    Reader r;
    TinyAIMappedModel* m;
    TinyAILLM* llm = NULL;
    TinyAILLMConfig cfg = tinyaiCreateDefaultLLMConfig();
    TinyAIGenerateParams gp = tinyaiCreateDefaultGenerateParams();
    TinyAIArenaStats st;
    char text[512];
    size_t len = 0, bytes = 1;

    r.image = image;
    r.size = size;
    r.fail_after = -1;
    r.empty_calls = 0;
    /* An empty model is truncated, whatever the callback thinks of reading
     * 0 bytes (it is never asked to). */
    CHECK_SENTINEL(tinyaiOpenMappedModelFromReader(read_image, &r, 0, NULL), NULL, TINYAI_ERR_TRUNCATED);
    CHECK(r.empty_calls == 0);
    m = tinyaiOpenMappedModelFromReader(read_image, &r, size, NULL);
    CHECK(m != NULL);
    if (m) {
        /* Weights streamed through the callback under a 1 MiB limit. */
        cfg.memoryLimit = 1u << 20;
        CHECK_STATUS(tinyaiCreateLLM(m, &cfg, &llm), TINYAI_OK);
        gp.steps = 24;
        if (llm) {
            CHECK_STATUS(tinyaiLLMGenerate(llm, "Once upon a time", &gp, text, sizeof text, &len, NULL), TINYAI_OK);
            CHECK(strncmp(text, "Once upon a time, there was a little girl named Lily", 52) == 0);
            /* The callback fails from now on: the next weight read reports it. */
            r.fail_after = 0;
            CHECK_STATUS(tinyaiLLMGenerate(llm, "Once upon a time", &gp, text, sizeof text, &len, NULL),
                         TINYAI_ERR_IO);
            CHECK(strstr(tinyaiGetLastErrorMessage(), "read callback returned -7") != NULL);
            tinyaiDestroyLLM(llm);
        }
        tinyaiCloseMappedModel(m);
    }
    r.fail_after = 0;
    CHECK_SENTINEL(tinyaiOpenMappedModelFromReader(read_image, &r, size, NULL), NULL, TINYAI_ERR_IO);
    CHECK_SENTINEL(tinyaiOpenMappedModelFromReader(NULL, &r, size, NULL), NULL, TINYAI_ERR_INVALID_ARGUMENT);

    /* The static arena and the clock belong to the bare-metal port. */
    static unsigned char arena[4096];
    CHECK_STATUS(tinyaiSetStaticArena(arena, sizeof arena), TINYAI_ERR_UNSUPPORTED);
    st.structSize = sizeof st;
    CHECK_STATUS(tinyaiGetStaticArenaStats(&st), TINYAI_ERR_UNSUPPORTED);
    CHECK_STATUS(tinyaiEstimateStaticArena(image, size, NULL, NULL, NULL, NULL, &bytes), TINYAI_ERR_UNSUPPORTED);
    CHECK(bytes == 0);
    CHECK_STATUS(tinyaiEstimateStaticArena(image, size, read_image, &r, NULL, NULL, &bytes),
                 TINYAI_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(tinyaiEstimateStaticArena(image, size, NULL, NULL, NULL, NULL, NULL), TINYAI_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(tinyaiSetClock(NULL), TINYAI_ERR_UNSUPPORTED);
}

static int count_progress(void* user, const TinyAISaveProgress* p) {
    ++*(int*)user;
    return p->bytesDone > p->bytesTotal; /* never: a bad count stops the save */
}

/* The guide's mixed-precision block, then the model saved, reopened and run. */
static void test_mixed_precision(const char* model_path, const char* tmp) {
    TinyAIMappedModel* model = tinyaiOpenMappedModel(model_path, NULL);
    TinyAIMappedModel* saved;
    TinyAILLM* llm = NULL;
    TinyAISaveOptions options;
    TinyAIPrecision p = TINYAI_PREC_AS_STORED;
    TinyAIPrecisionOverride keep_v = {-1, "blk.0.attn_v", TINYAI_PREC_FP32};
    char path[1024];
    char text[256];
    int calls = 0;
    int32_t index = -1;
    uint64_t size = 0;
    CHECK(model != NULL);
    if (!model) return;
    {
        /* Create mixed precision configuration */
        TinyAIMixedPrecisionConfig mpConfig;
        tinyaiInitMixedPrecisionConfig(&mpConfig);

        /* Set precision for different layer types */
        mpConfig.embeddingPrecision = TINYAI_PREC_INT8;   /* 8-bit for embeddings */
        mpConfig.attentionPrecision = TINYAI_PREC_INT4;   /* 4-bit for attention */
        mpConfig.ffnPrecision = TINYAI_PREC_INT4;         /* 4-bit for feed-forward */
        mpConfig.outputPrecision = TINYAI_PREC_FP16;      /* FP16 for output layer */
        mpConfig.overrides = &keep_v;
        mpConfig.overrideCount = 1;

        /* Apply mixed precision configuration to model */
        CHECK_STATUS(tinyaiApplyMixedPrecision(model, &mpConfig), TINYAI_OK);
        mpConfig.groupSize = 0;
        CHECK_STATUS(tinyaiApplyMixedPrecision(model, &mpConfig), TINYAI_ERR_INVALID_ARGUMENT);
    }
    CHECK_STATUS(tinyaiFindMappedTensor(model, "blk.1.ffn_up", &index), TINYAI_OK);
    CHECK_STATUS(tinyaiGetTensorPrecision(model, index, &p), TINYAI_OK);
    CHECK(p == TINYAI_PREC_INT4);
    CHECK_STATUS(tinyaiFindMappedTensor(model, "blk.0.attn_v", &index), TINYAI_OK);
    CHECK_STATUS(tinyaiGetTensorPrecision(model, index, &p), TINYAI_OK);
    CHECK(p == TINYAI_PREC_FP32);
    CHECK_STATUS(tinyaiParsePrecision("int8", &p), TINYAI_OK);
    CHECK(p == TINYAI_PREC_INT8 && strcmp(tinyaiPrecisionName(p), "int8") == 0);

    snprintf(path, sizeof path, "%s/c_api_mixed.tmai", tmp);
    options = tinyaiCreateDefaultSaveOptions();
    options.threads = 2;
    options.progress = count_progress;
    options.progressUser = &calls;
    CHECK_STATUS(tinyaiGetSavedModelSize(model, &size), TINYAI_OK);
    CHECK_STATUS(tinyaiSaveMappedModel(model, path, &options), TINYAI_OK);
    CHECK(calls == tinyaiGetMappedTensorCount(model));
    saved = tinyaiOpenMappedModel(path, NULL);
    CHECK(saved != NULL);
    if (saved) {
        CHECK(tinyaiGetMappedModelFileSize(saved) == size);
        CHECK(size * 2 < tinyaiGetMappedModelFileSize(model));
        CHECK_STATUS(tinyaiCreateLLM(saved, NULL, &llm), TINYAI_OK);
        if (llm) {
            TinyAIGenerateParams gp = tinyaiCreateDefaultGenerateParams();
            gp.maxNewTokens = 16;
            CHECK_STATUS(tinyaiLLMGenerate(llm, "Once upon a time", &gp, text, sizeof text, NULL, NULL), TINYAI_OK);
            CHECK(strlen(text) > 10);
            tinyaiDestroyLLM(llm);
        }
        tinyaiCloseMappedModel(saved);
    }
    remove(path);
    CHECK_STATUS(tinyaiSaveMappedModel(model, model_path, NULL), TINYAI_ERR_INVALID_ARGUMENT);
    tinyaiCloseMappedModel(model);
}

/* The guide's "Model Pruning" block as written, then the pruned model
 * generates, is saved and read back at its pruned size. */
static void test_prune(const char* model_path, const char* tmp) {
    TinyAIMappedModel* model = tinyaiOpenMappedModel(model_path, NULL);
    TinyAIMappedModel* saved = NULL;
    TinyAITensorSparsity sp;
    TinyAIPruneMethod method = TINYAI_PRUNE_MAGNITUDE;
    TinyAILLM* llm = NULL;
    char path[1024];
    char text[256];
    int32_t index = -1;
    size_t savedBytes = 0;
    CHECK(model != NULL);
    if (!model) return;
    {
        // Create pruning configuration
        TinyAIPruneConfig pruneConfig;
        tinyaiInitPruneConfig(&pruneConfig);

        // Set pruning parameters
        pruneConfig.method = TINYAI_PRUNE_MAGNITUDE;   // Magnitude-based pruning
        pruneConfig.sparsity = 0.7;                    // Target 70% sparsity
        pruneConfig.blockSize = 4;                     // 4x4 block pruning
        pruneConfig.layerSparsity[0] = 0.5;            // Custom sparsity for layer 0

        // Apply pruning to the model
        CHECK_STATUS(tinyaiPruneModel(model, &pruneConfig), TINYAI_OK);

        // Calculate memory savings
        savedBytes = tinyaiCalculatePruningSavings(model);
        printf("Memory saved: %.2f MB\n", savedBytes / (1024.0 * 1024.0));
        pruneConfig.blockSize = 3;
        CHECK_STATUS(tinyaiPruneModel(model, &pruneConfig), TINYAI_ERR_UNSUPPORTED);
        pruneConfig.blockSize = 0;
        CHECK_STATUS(tinyaiPruneModel(model, &pruneConfig), TINYAI_ERR_INVALID_ARGUMENT);
        pruneConfig.blockSize = 4;
        pruneConfig.sparsity = 1.0;
        CHECK_STATUS(tinyaiPruneModel(model, &pruneConfig), TINYAI_ERR_INVALID_ARGUMENT);
    }
    CHECK(savedBytes > 0 && savedBytes == tinyaiCalculatePruningSavings(model));
    memset(&sp, 0, sizeof sp);
    sp.structSize = sizeof sp;
    CHECK_STATUS(tinyaiFindMappedTensor(model, "blk.1.ffn_up", &index), TINYAI_OK);
    CHECK_STATUS(tinyaiGetTensorSparsity(model, index, &sp), TINYAI_OK);
    CHECK(sp.blockSize == 4 && sp.sparsity > 0.6 && sp.sparsity < 0.8 && sp.bytes < sp.denseBytes);
    CHECK_STATUS(tinyaiFindMappedTensor(model, "blk.0.attn_q", &index), TINYAI_OK);
    CHECK_STATUS(tinyaiGetTensorSparsity(model, index, &sp), TINYAI_OK);
    CHECK(sp.blockSize == 4 && sp.sparsity == 0.5);
    CHECK_STATUS(tinyaiParsePruneMethod("activation", &method), TINYAI_OK);
    CHECK(method == TINYAI_PRUNE_ACTIVATION && strcmp(tinyaiPruneMethodName(method), "activation") == 0);
    CHECK_STATUS(tinyaiParsePruneMethod("random", &method), TINYAI_ERR_INVALID_ARGUMENT);

    snprintf(path, sizeof path, "%s/c_api_pruned.tmai", tmp);
    CHECK_STATUS(tinyaiSaveMappedModel(model, path, NULL), TINYAI_OK);
    saved = tinyaiOpenMappedModel(path, NULL);
    CHECK(saved != NULL);
    if (saved) {
        CHECK(tinyaiCalculatePruningSavings(saved) == savedBytes);
        CHECK(tinyaiGetMappedModelFileSize(saved) + savedBytes / 2 < tinyaiGetMappedModelFileSize(model));
        CHECK_STATUS(tinyaiCreateLLM(saved, NULL, &llm), TINYAI_OK);
        if (llm) {
            TinyAIGenerateParams gp = tinyaiCreateDefaultGenerateParams();
            gp.maxNewTokens = 16;
            CHECK_STATUS(tinyaiLLMGenerate(llm, "Once upon a time", &gp, text, sizeof text, NULL, NULL), TINYAI_OK);
            CHECK(strlen(text) > 10);
            tinyaiDestroyLLM(llm);
        }
        tinyaiCloseMappedModel(saved);
    }
    remove(path);
    tinyaiCloseMappedModel(model);
}

/* The persistent store from C, as <tinyai/persistent.h>'s example uses it. */
static void test_persistent_store(const char* tmp) {
    TinyAIPersistentStore* store = NULL;
    TinyAIPersistentConfig cfg = tinyaiCreateDefaultPersistentConfig();
    TinyAIPersistentStore* back = NULL;
    TinyAIPersistentEntry entry;
    float row[4] = {1.0f, 2.0f, 3.0f, 4.0f};
    float rows[12];
    size_t bytes = 0;
    int32_t step = -1;
    char path[1024];
    cfg.memoryLimit = 1 << 20;
    CHECK_STATUS(tinyaiCreatePersistentStore(&cfg, &store), TINYAI_OK);
    if (!store) return;
    CHECK_STATUS(tinyaiSetPersistentDim(store, "D", 4), TINYAI_OK);
    CHECK_STATUS(tinyaiDeclarePersistent(store,
                                         "persistent {\n"
                                         "    step: i32 @init(0);\n"
                                         "    A(i): f32[D] @table;\n"
                                         "    K(l, t): f16[4, 16] @table @fixed(l=2, t=128);\n"
                                         "}\n"),
                 TINYAI_OK);
    CHECK_STATUS(tinyaiDeclarePersistent(store, "bad: f32 @init(5)"), TINYAI_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(tinyaiPersistentWrite(store, "A[step]", TINYAI_PTYPE_F32, row, sizeof row), TINYAI_OK);
    CHECK_STATUS(tinyaiPersistentIncrement(store, "step", 1), TINYAI_OK);
    row[0] = 5.0f;
    CHECK_STATUS(tinyaiPersistentWrite(store, "A[step]", TINYAI_PTYPE_F32, row, sizeof row), TINYAI_OK);
    CHECK_STATUS(tinyaiPersistentRead(store, "A[0..-1]", TINYAI_PTYPE_F32, rows, sizeof rows, &bytes), TINYAI_OK);
    CHECK(bytes == 4 * sizeof(float) && rows[0] == 1.0f);
    CHECK_STATUS(tinyaiPersistentRead(store, "A[]", TINYAI_PTYPE_F32, rows, 4, &bytes), TINYAI_ERR_BUFFER_TOO_SMALL);
    CHECK(bytes == 8 * sizeof(float));
    CHECK_STATUS(tinyaiPersistentWrite(store, "K[2, 0]", TINYAI_PTYPE_F16, rows, 128), TINYAI_ERR_OUT_OF_BOUNDS);
    memset(&entry, 0, sizeof entry);
    entry.structSize = sizeof entry;
    CHECK_STATUS(tinyaiGetPersistentEntry(store, "A", &entry), TINYAI_OK);
    CHECK(entry.extent[0] == 2 && entry.indexCount == 1 && strcmp(entry.indexNames[0], "i") == 0);
    CHECK(tinyaiGetPersistentMemoryUsage(store) > 2 * 128 * 64 * 2);
    snprintf(path, sizeof path, "%s/c_api_state.tps", tmp);
    CHECK_STATUS(tinyaiSavePersistentStore(store, path), TINYAI_OK);
    CHECK_STATUS(tinyaiCreatePersistentStore(&cfg, &back), TINYAI_OK);
    if (back) {
        CHECK_STATUS(tinyaiSetPersistentDim(back, "D", 4), TINYAI_OK);
        CHECK_STATUS(tinyaiDeclarePersistent(back, "step: i32 @init(0)"), TINYAI_OK);
        CHECK_STATUS(tinyaiLoadPersistentStore(back, path), TINYAI_ERR_MISMATCH);
        CHECK_STATUS(tinyaiDeclarePersistent(back, "A(i): f32[D] @table; K(l, t): f16[4, 16] @table @fixed(l=2, t=128)"),
                     TINYAI_OK);
        CHECK_STATUS(tinyaiLoadPersistentStore(back, path), TINYAI_OK);
        CHECK_STATUS(tinyaiPersistentRead(back, "step", TINYAI_PTYPE_I32, &step, sizeof step, &bytes), TINYAI_OK);
        CHECK(step == 1);
        CHECK_STATUS(tinyaiPersistentRead(back, "A[1]", TINYAI_PTYPE_F32, rows, sizeof rows, &bytes), TINYAI_OK);
        CHECK(rows[0] == 5.0f && rows[3] == 4.0f);
        tinyaiDestroyPersistentStore(back);
    }
    remove(path);
    tinyaiDestroyPersistentStore(store);
}

/* A session saved after a prompt and loaded into a second LLM: the same
 * next logits and the same tokens; a file that is not a session is refused
 * and leaves the LLM where it was. */
static void test_session(TinyAIMappedModel* model, const char* tmp) {
    TinyAILLM* a = NULL;
    TinyAILLM* b = NULL;
    TinyAIModelInfo info;
    int32_t prompt[5] = {1, 2, 3, 4, 5};
    int32_t held[8];
    int32_t count = 0, next = 6;
    float *la, *lb;
    char path[1024];
    FILE* f;
    CHECK_STATUS(tinyaiCreateLLM(model, NULL, &a), TINYAI_OK);
    CHECK_STATUS(tinyaiCreateLLM(model, NULL, &b), TINYAI_OK);
    if (!a || !b) goto out;
    memset(&info, 0, sizeof info);
    info.structSize = sizeof info;
    CHECK_STATUS(tinyaiGetLLMModelInfo(a, &info), TINYAI_OK);
    la = (float*)malloc((size_t)info.vocabSize * sizeof(float));
    lb = (float*)malloc((size_t)info.vocabSize * sizeof(float));
    if (!la || !lb) goto free_logits;
    CHECK_STATUS(tinyaiLLMEval(a, prompt, 5, la), TINYAI_OK);
    snprintf(path, sizeof path, "%s/c_api_session.tsn", tmp);
    CHECK_STATUS(tinyaiSaveLLMSession(a, path), TINYAI_OK);
    CHECK_STATUS(tinyaiLoadLLMSession(b, path), TINYAI_OK);
    CHECK(tinyaiGetLLMPosition(b) == 5);
    CHECK_STATUS(tinyaiGetLLMTokens(b, held, 8, &count), TINYAI_OK);
    CHECK(count == 5 && held[0] == 1 && held[4] == 5);
    /* A short buffer: *count is what the cache holds, the first capacity
     * tokens are copied and nothing past them. */
    held[0] = held[1] = held[2] = -7;
    count = 0;
    CHECK_STATUS(tinyaiGetLLMTokens(b, held, 2, &count), TINYAI_ERR_BUFFER_TOO_SMALL);
    CHECK(count == 5);
    CHECK(held[0] == 1 && held[1] == 2);
    CHECK(held[2] == -7);
    CHECK_STATUS(tinyaiLLMEval(a, &next, 1, la), TINYAI_OK);
    CHECK_STATUS(tinyaiLLMEval(b, &next, 1, lb), TINYAI_OK);
    CHECK(memcmp(la, lb, (size_t)info.vocabSize * sizeof(float)) == 0);
    f = fopen(path, "r+b");
    if (f) {
        fputc('X', f);
        fclose(f);
    }
    CHECK_STATUS(tinyaiLoadLLMSession(b, path), TINYAI_ERR_BAD_MAGIC);
    CHECK(tinyaiGetLLMPosition(b) == 6);
    remove(path);
free_logits:
    free(la);
    free(lb);
out:
    tinyaiDestroyLLM(a);
    tinyaiDestroyLLM(b);
}

/* ---- Handles that are not live ------------------------------------------------- */

/* A call on a handle that is not live (closed, destroyed, or never created)
 * touches nothing: it returns TINYAI_ERR_MISUSE, or its sentinel with that
 * as the last error, and the message starts with the call's name and says
 * why (word). */
static void check_dead(int returned, const char* expr, const char* word, const char* file, int line) {
    char what[768];
    const char* message = tinyaiGetLastErrorMessage();
    size_t name = strcspn(expr, "(");
    if (expr[0] == '(') name = strcspn(expr + 1, "(") + 1; /* "(call(...), 0)" */
    snprintf(what, sizeof what, "%s returns TINYAI_ERR_MISUSE or its sentinel", expr);
    check(returned, what, file, line);
    snprintf(what, sizeof what, "after %s: last error is %s (expected TINYAI_ERR_MISUSE)", expr,
             tinyaiStatusString(tinyaiGetLastError()));
    check(tinyaiGetLastError() == TINYAI_ERR_MISUSE, what, file, line);
    snprintf(what, sizeof what, "the message of %s names the call and says '%s' (got \"%s\")", expr, word, message);
    check(strncmp(message, expr + (expr[0] == '('), name - (expr[0] == '(')) == 0 && strstr(message, word) != NULL,
          what, file, line);
}

#define CHECK_DEAD(expr, sentinel, word)                               \
    do {                                                               \
        tinyaiClearLastError();                                        \
        check_dead((expr) == (sentinel), #expr, (word), __FILE__, __LINE__); \
    } while (0)

static int write_nothing(void* user, uint64_t offset, const void* data, size_t size) {
    (void)offset;
    (void)data;
    (void)size;
    ++*(int*)user;
    return 0;
}

/* Every call that takes a model, with one that is not open. */
static void check_dead_model(TinyAIMappedModel* m, const char* word, const char* tmp) {
    TinyAITensorInfo info;
    TinyAICacheStats stats;
    TinyAIModelInfo minfo;
    TinyAIMemoryReport report;
    TinyAIMixedPrecisionConfig mix;
    TinyAIPruneConfig prune;
    TinyAITensorSparsity sparsity;
    TinyAISchedulerConfig sc = tinyaiCreateDefaultSchedulerConfig();
    TinyAIPrecision precision = TINYAI_PREC_FP32;
    TinyAILLM* llm = (TinyAILLM*)&minfo; /* overwritten with NULL */
    int index = -5, writes = 0;
    int64_t i64 = -5;
    float f = -5.0f;
    const char* str = NULL;
    size_t len = 0;
    uint64_t size = 7;
    char path[1024];
    memset(&info, 0, sizeof info);
    info.structSize = sizeof info;
    memset(&stats, 0, sizeof stats);
    stats.structSize = sizeof stats;
    memset(&minfo, 0, sizeof minfo);
    memset(&report, 0, sizeof report);
    report.structSize = sizeof report;
    tinyaiInitMixedPrecisionConfig(&mix);
    tinyaiInitPruneConfig(&prune);
    memset(&sparsity, 0, sizeof sparsity);
    sparsity.structSize = sizeof sparsity;
    snprintf(path, sizeof path, "%s/c_api_dead_model.tmai", tmp);
    remove(path);

    CHECK_DEAD((tinyaiCloseMappedModel(m), 0), 0, word);
    CHECK_DEAD(tinyaiGetMappedLayerCount(m), -1, word);
    CHECK_DEAD(tinyaiGetLayerDescriptor(m, 0), NULL, word);
    CHECK_DEAD(tinyaiGetLayerWeights(m, 0), NULL, word);
    CHECK_DEAD(tinyaiPrefetchLayerWeights(m, 0), TINYAI_ERR_MISUSE, word);
    CHECK_DEAD(tinyaiReleaseLayerWeights(m, 0), TINYAI_ERR_MISUSE, word);
    CHECK_DEAD(tinyaiGetMappedModelMemoryUsage(m), 0, word);
    CHECK_DEAD(tinyaiGetMappedModelCacheStats(m, &stats), TINYAI_ERR_MISUSE, word);
    CHECK_DEAD(tinyaiResetMappedModelCacheStats(m), TINYAI_ERR_MISUSE, word);
    CHECK_DEAD(tinyaiSetLayerPriority(m, 0, 2.0f), TINYAI_ERR_MISUSE, word);
    CHECK_DEAD(tinyaiGetMappedTensorCount(m), -1, word);
    CHECK_DEAD(tinyaiGetMappedTensorInfo(m, 0, &info), TINYAI_ERR_MISUSE, word);
    CHECK_DEAD(tinyaiFindMappedTensor(m, "token_embd", &index), TINYAI_ERR_MISUSE, word);
    CHECK_DEAD(tinyaiGetMetadataInt(m, "llama.dim", &i64), TINYAI_ERR_MISUSE, word);
    CHECK_DEAD(tinyaiGetMetadataFloat(m, "llama.norm_eps", &f), TINYAI_ERR_MISUSE, word);
    CHECK_DEAD(tinyaiGetMetadataString(m, "general.architecture", &str, &len), TINYAI_ERR_MISUSE, word);
    CHECK_DEAD(tinyaiGetMappedModelFileSize(m), 0, word);
    CHECK(index == -5 && i64 == -5 && f == -5.0f && str == NULL && len == 0);
    /* forward_scheduler.h */
    CHECK_DEAD(tinyaiCreateForwardScheduler(m, TINYAI_EXEC_ADAPTIVE, 0), NULL, word);
    CHECK_DEAD(tinyaiCreateForwardSchedulerWithConfig(m, TINYAI_EXEC_ADAPTIVE, 0, &sc), NULL, word);
    CHECK_DEAD(tinyaiGetLayerOutputSize(m, 0), 0, word);
    /* llm.h */
    CHECK_DEAD(tinyaiCreateLLM(m, NULL, &llm), TINYAI_ERR_MISUSE, word);
    CHECK(llm == NULL);
    CHECK_DEAD(tinyaiEstimateLLMMemory(m, NULL, &report), TINYAI_ERR_MISUSE, word);
    {
        TinyAIPreflight preflight;
        memset(&preflight, 0, sizeof preflight);
        preflight.structSize = sizeof preflight;
        CHECK_DEAD(tinyaiPreflightLLM(m, NULL, &preflight), TINYAI_ERR_MISUSE, word);
    }
    /* quantize_mixed.h */
    CHECK_DEAD(tinyaiApplyMixedPrecision(m, &mix), TINYAI_ERR_MISUSE, word);
    CHECK_DEAD(tinyaiGetTensorPrecision(m, 0, &precision), TINYAI_ERR_MISUSE, word);
    CHECK_DEAD(tinyaiGetSavedModelSize(m, &size), TINYAI_ERR_MISUSE, word);
    CHECK_DEAD(tinyaiSaveMappedModelTo(m, write_nothing, &writes, NULL), TINYAI_ERR_MISUSE, word);
    CHECK_DEAD(tinyaiSaveMappedModel(m, path, NULL), TINYAI_ERR_MISUSE, word);
    /* prune.h */
    CHECK_DEAD(tinyaiPruneModel(m, &prune), TINYAI_ERR_MISUSE, word);
    CHECK_DEAD(tinyaiCalculatePruningSavings(m), 0, word);
    CHECK_DEAD(tinyaiGetTensorSparsity(m, 0, &sparsity), TINYAI_ERR_MISUSE, word);
    CHECK(sparsity.blockSize == 0);
    CHECK(size == 7 && writes == 0 && precision == TINYAI_PREC_FP32);
    CHECK(!file_exists(path));
}

/* Every call that takes an LLM, with one that cannot run (its model closed,
 * or not an LLM at all). */
static void check_dead_llm(TinyAILLM* l, const char* word, const char* tmp, int live) {
    TinyAIModelInfo info;
    TinyAIMemoryReport report;
    TinyAISamplerConfig sc = tinyaiCreateDefaultSamplerConfig();
    TinyAIGenerateParams gp = tinyaiCreateDefaultGenerateParams();
    int32_t ids[4] = {1, 2, 3, 4};
    int32_t count = -5, token = -5;
    float logits[4] = {0.5f, 0.25f, 0.125f, 0.0f};
    uint64_t rng = 1;
    char buf[16] = "untouched";
    size_t len = 99;
    char path[1024];
    memset(&info, 0, sizeof info);
    info.structSize = sizeof info;
    memset(&report, 0, sizeof report);
    report.structSize = sizeof report;
    snprintf(path, sizeof path, "%s/c_api_dead_llm.tsn", tmp);
    remove(path);

    if (!live) CHECK_DEAD((tinyaiDestroyLLM(l), 0), 0, word);
    CHECK_DEAD(tinyaiGetLLMModelInfo(l, &info), TINYAI_ERR_MISUSE, word);
    CHECK_DEAD(tinyaiGetLLMMemoryReport(l, &report), TINYAI_ERR_MISUSE, word);
    {
        TinyAIErrorInfo warning;
        memset(&warning, 0, sizeof warning);
        warning.structSize = sizeof warning;
        CHECK_DEAD(tinyaiGetLLMWarning(l, &warning), TINYAI_ERR_MISUSE, word);
    }
    {
        TinyAIFallbackReport fallback;
        memset(&fallback, 0, sizeof fallback);
        fallback.structSize = sizeof fallback;
        CHECK_DEAD(tinyaiGetLLMFallback(l, &fallback), TINYAI_ERR_MISUSE, word);
    }
    CHECK_DEAD(tinyaiLLMTokenize(l, "Once", 1, ids, 4, &count), TINYAI_ERR_MISUSE, word);
    CHECK_DEAD(tinyaiLLMDecodeToken(l, 1, 2, buf, sizeof buf, &len), TINYAI_ERR_MISUSE, word);
    CHECK_DEAD(tinyaiLLMChatPrompt(l, NULL, "a", buf, sizeof buf, &len), TINYAI_ERR_MISUSE, word);
    CHECK_DEAD(tinyaiLLMChatNextTurn(l, "a", buf, sizeof buf, &len), TINYAI_ERR_MISUSE, word);
    CHECK_DEAD(tinyaiLLMChatTemplateName(l), NULL, word);
    CHECK_DEAD(tinyaiLLMEval(l, ids, 1, logits), TINYAI_ERR_MISUSE, word);
    CHECK_DEAD(tinyaiGetLLMPosition(l), -1, word);
    CHECK_DEAD(tinyaiResetLLM(l), TINYAI_ERR_MISUSE, word);
    CHECK_DEAD(tinyaiSaveLLMSession(l, path), TINYAI_ERR_MISUSE, word);
    CHECK_DEAD(tinyaiLoadLLMSession(l, path), TINYAI_ERR_MISUSE, word);
    CHECK_DEAD(tinyaiGetLLMTokens(l, ids, 4, &count), TINYAI_ERR_MISUSE, word);
    CHECK_DEAD(tinyaiLLMSample(l, logits, &sc, &rng, &token), TINYAI_ERR_MISUSE, word);
    CHECK_DEAD(tinyaiLLMGenerate(l, "Once", &gp, buf, sizeof buf, &len, NULL), TINYAI_ERR_MISUSE, word);
    CHECK_DEAD(tinyaiGetLLMScheduler(l), NULL, word);
    CHECK(ids[0] == 1 && ids[3] == 4 && token == -5 && logits[0] == 0.5f && rng == 1);
    CHECK(strcmp(buf, "untouched") == 0);
    CHECK(!file_exists(path));
}

/* Every call that takes a scheduler, with one that cannot run. */
static void check_dead_scheduler(TinyAIForwardScheduler* s, const char* word, int live) {
    TinyAISchedulerReport report;
    TinyAIGenerateParams gp = tinyaiCreateDefaultGenerateParams();
    char text[16] = "untouched";
    char dag[16] = "untouched";
    size_t needed = 99;
    int layer = -5;
    memset(&report, 0, sizeof report);
    report.structSize = sizeof report;

    if (!live) CHECK_DEAD((tinyaiDestroyForwardScheduler(s), 0), 0, word);
    CHECK_DEAD(tinyaiSetSchedulerOutputCapacity(s, 64), TINYAI_ERR_MISUSE, word);
    CHECK_DEAD(tinyaiAddLayerToSchedule(s, 0, -1, TINYAI_DEP_NONE, 4), TINYAI_ERR_MISUSE, word);
    CHECK_DEAD(tinyaiAddModelLayersToSchedule(s), TINYAI_ERR_MISUSE, word);
    CHECK_DEAD(tinyaiSetScheduleBatchSize(s, 1), TINYAI_ERR_MISUSE, word);
    CHECK_DEAD(tinyaiPlanForwardPass(s), TINYAI_ERR_MISUSE, word);
    CHECK_DEAD(tinyaiPrepareForwardPass(s), TINYAI_ERR_MISUSE, word);
    CHECK_DEAD(tinyaiExecuteNextLayer(s, "Once", text, &layer), false, word);
    CHECK_DEAD(tinyaiGetSchedulerStatus(s), TINYAI_ERR_MISUSE, word);
    CHECK_DEAD(tinyaiGetSchedulerMemoryUsage(s), 0, word);
    CHECK_DEAD(tinyaiGetSchedulerPeakMemoryUsage(s), 0, word);
    CHECK_DEAD(tinyaiCalculateOptimalBatchSize(s, 4, 4, 8), -1, word);
    CHECK_DEAD(tinyaiGetSchedulerReport(s, &report), TINYAI_ERR_MISUSE, word);
    CHECK_DEAD(tinyaiDumpActivationDag(s, dag, sizeof dag, &needed), TINYAI_ERR_MISUSE, word);
    CHECK_DEAD(tinyaiSetSchedulerGenerateParams(s, &gp), TINYAI_ERR_MISUSE, word);
    CHECK(layer == -1 && needed == 99 && strcmp(dag, "untouched") == 0);
    CHECK(live || strcmp(text, "untouched") == 0);
}

/* A handle used after its model was closed, after it was destroyed, or one
 * that never was: every call that takes it answers TINYAI_ERR_MISUSE and
 * touches no freed memory (an ASan build proves the second). */
static void test_dead_handles(const char* model_path, const char* tmp) {
    static union {
        uint64_t align;
        unsigned char bytes[4096];
    } never; /* zeroes that no call may take for a handle */
    TinyAIMappedModel* model = tinyaiOpenMappedModel(model_path, NULL);
    TinyAILLM* llm = NULL;
    TinyAIForwardScheduler* s = NULL;
    TinyAIForwardScheduler* llm_s = NULL;
    CHECK(model != NULL);
    if (!model) return;
    CHECK_STATUS(tinyaiCreateLLM(model, NULL, &llm), TINYAI_OK);
    s = tinyaiCreateForwardScheduler(model, TINYAI_EXEC_ADAPTIVE, 0);
    CHECK(s != NULL);
    if (!llm || !s) {
        tinyaiDestroyLLM(llm);
        tinyaiDestroyForwardScheduler(s);
        tinyaiCloseMappedModel(model);
        return;
    }
    CHECK_STATUS(tinyaiAddModelLayersToSchedule(s), TINYAI_OK);
    llm_s = (TinyAIForwardScheduler*)tinyaiGetLLMScheduler(llm);
    CHECK(llm_s != NULL);

    /* The model closed under its runners: they stay (unusable), it is gone. */
    tinyaiCloseMappedModel(model);
    check_dead_model(model, "closed", tmp);
    check_dead_llm(llm, "closed", tmp, 1);
    check_dead_scheduler(s, "closed", 1);
    if (llm_s) check_dead_scheduler(llm_s, "closed", 1);

    /* The runners destroyed: an LLM's scheduler goes with it. */
    tinyaiDestroyLLM(llm);
    tinyaiDestroyForwardScheduler(s);
    check_dead_llm(llm, "destroyed", tmp, 0);
    check_dead_scheduler(s, "destroyed", 0);
    if (llm_s) check_dead_scheduler(llm_s, "destroyed", 0);

    /* Pointers that never were handles. */
    check_dead_model((TinyAIMappedModel*)never.bytes, "never", tmp);
    check_dead_llm((TinyAILLM*)never.bytes, "never", tmp, 0);
    check_dead_scheduler((TinyAIForwardScheduler*)never.bytes, "never", 0);
}

int main(int argc, char** argv) {
    const char* model_path;
    const char* tmp;
    unsigned char* raw = NULL;
    unsigned char* image = NULL;
    size_t size = 0;
    TinyAIMappedModel* model;
    TinyAIMappedModel* from_memory;
    TinyAIMmapConfig mc;

    if (argc < 3) {
        fprintf(stderr, "usage: %s MODEL.tmai TEMP_DIR [GOLDEN.expected]\n", argv[0]);
        return 2;
    }
    model_path = argv[1];
    tmp = argv[2];
    if (!file_exists(model_path)) {
        const char* required = getenv("TINYAI_REQUIRE_SHARED");
        if (required && required[0] != '\0' && strcmp(required, "0") != 0) {
            printf("TINYAI_REQUIRE_SHARED is set and %s is missing (stories260K is converted from ../shared by "
                   "the convert_stories260K test)\n", model_path);
            return 1;
        }
        printf("skip: %s not found (stories260K is converted from ../shared by the convert_stories260K test); "
               "TINYAI_REQUIRE_SHARED=1 fails instead\n", model_path);
        return 77;
    }

    test_status_and_types();
    test_null_arguments();
    test_persistent_store(tmp);

    raw = read_file(model_path, &size, &image);
    CHECK(raw != NULL);
    if (!raw) goto done;
    test_bad_files(tmp, image, size);

    mc = tinyaiCreateDefaultMmapConfig();
    mc.maxCacheSize = 0;
    model = tinyaiOpenMappedModel(model_path, &mc);
    CHECK(model != NULL);
    if (!model) goto done;
    test_loader(model, image, size);

    /* The same model from memory, and a misaligned image. */
    from_memory = tinyaiOpenMappedModelFromMemory(image, size, NULL);
    CHECK(from_memory != NULL);
    if (from_memory) {
        CHECK(tinyaiGetMappedLayerCount(from_memory) == tinyaiGetMappedLayerCount(model));
        CHECK(tinyaiGetLayerWeights(from_memory, 1) ==
              (void*)(image + tinyaiGetLayerDescriptor(from_memory, 1)->fileOffset));
        CHECK_STATUS(tinyaiReleaseLayerWeights(from_memory, 1), TINYAI_OK);
        tinyaiCloseMappedModel(from_memory);
    }
    CHECK_SENTINEL(tinyaiOpenMappedModelFromMemory(image + 1, size - 1, NULL), NULL, TINYAI_ERR_INVALID_ARGUMENT);
    test_reader_and_platform(image, size);
    test_mixed_precision(model_path, tmp);
    test_prune(model_path, tmp);

    {
        TinyAILLM* llm = NULL;
        CHECK_STATUS(tinyaiCreateLLM(model, NULL, &llm), TINYAI_OK);
        if (llm) {
            test_struct_sizes(model_path, model, llm);
            tinyaiDestroyLLM(llm);
        }
    }
    test_llm(model, argc > 3 ? argv[3] : NULL);
    test_error_info(model, model_path);
    test_session(model, tmp);
    test_scheduler(model);
    tinyaiCloseMappedModel(model);
    test_dead_handles(model_path, tmp);

done:
    free(raw);
    printf("%d passed, %d failed\n", g_passed, g_failed);
    return g_failed == 0 ? 0 : 1;
}
