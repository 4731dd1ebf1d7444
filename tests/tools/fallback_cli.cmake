# --fallback in tinyai-generate, tinyai-inspect --estimate, tinyai-bench and
# tinyai-eval: under a limit the configuration does not fit, each level
# tried is said on stderr and the one reached runs; the estimate reports the
# same level; when no level fits, the levels are said and one error ends the
# run (exit status 1, nothing on stdout); steps that are not steps, repeated
# or without --estimate are usage errors.
# Run by ctest as tools_fallback_cli with GENERATE, INSPECT, BENCH, EVAL,
# CONVERT, OUT_DIR and EMULATOR.
include(${CMAKE_CURRENT_LIST_DIR}/cli_common.cmake)
cmake_policy(SET CMP0054 NEW)

set(model ${OUT_DIR}/tiny.tmai)
expect_run(RC 0 COMMAND ${CONVERT} --synthetic dim=64,hidden=128,layers=2,heads=4,kv_heads=2,vocab=300,seq_len=256
           ${model})

# The least limit of an f32 cache (to fit: --kv-type f16, or --mem-limit N):
# 1 byte is refused with it.
execute_process(COMMAND ${TOOL_EMULATOR} ${GENERATE} -m ${model} -p Once -n 4 --temp 0 --mem-limit 1
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
string(REGEX MATCH "below this model's minimum of ([0-9]+)" found "${err}")
set(least ${CMAKE_MATCH_1})
if(NOT rc EQUAL 1 OR NOT least)
  cli_fail("--mem-limit 1: exit status ${rc}, no minimum in: ${err}")
endif()
# Below it by a little: an f16 cache fits, an f32 one does not.
math(EXPR limit "${least} - 64")
expect_runtime_error(TINYAI_ERR_RESOURCE_EXHAUSTED "below this model's minimum"
                     ${GENERATE} -m ${model} -p Once -n 4 --temp 0 --mem-limit ${limit})
expect_run(RC 0 EXPECT "tinyai-generate: fallback: as configured: needs ${least} bytes, over the memory limit of ${limit}"
           "tinyai-generate: fallback: 1. kv-f16: KV cache f32 -> f16: fits (" "tinyai-generate: fallback: level 1 runs"
           COMMAND ${GENERATE} -m ${model} -p Once -n 4 --temp 0 --mem-limit ${limit} --fallback kv-f16,kv-int8)
# --quiet says nothing of it.
expect_run(RC 0 COMMAND ${GENERATE} -m ${model} -p Once -n 4 --temp 0 --mem-limit ${limit} --fallback all --quiet)
execute_process(COMMAND ${TOOL_EMULATOR} ${GENERATE} -m ${model} -p Once -n 4 --temp 0 --mem-limit ${limit}
                        --fallback all --quiet
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT err STREQUAL "")
  cli_fail("--quiet --fallback all: stderr is not empty: ${err}")
endif()
# The caller's order: the window first, though an f16 cache would fit.
expect_run(RC 0 EXPECT "1. kv-window: KV window of" "and 4 sinks: fits" "level 1 runs"
           COMMAND ${GENERATE} -m ${model} -p Once -n 4 --temp 0 --mem-limit ${limit} --fallback kv-window,kv-f16)
# The estimate reaches the same level.
expect_run(RC 0 EXPECT "\"fallback_level\":1" "\"kv_type\":\"f16\"" "\"kv_window\":0"
           COMMAND ${INSPECT} ${model} --estimate --mem-limit ${limit} --bandwidth 10 --json --fallback kv-f16)
expect_run(RC 0 EXPECT "after 1 step of --fallback: KV cache f16"
           COMMAND ${INSPECT} ${model} --estimate --mem-limit ${limit} --bandwidth 10 --fallback kv-f16)
expect_run(RC 0 EXPECT "tinyai-bench: fallback: 1. memory-opt: skipped: ADAPTIVE chooses the mode already"
           "tinyai-bench: fallback: level 1 runs"
           COMMAND ${BENCH} -m ${model} --no-probe --prompt 4 --gen 4 --mem-limit ${limit} --fallback memory-opt,kv-int8)
expect_run(RC 0 EXPECT "tinyai-eval: fallback: level 1 runs"
           COMMAND ${EVAL} --ref ${model} ${model} --tokens 16 --sequence 16 --mem-limit ${limit} --fallback kv-int8)
# Nothing fits 64 KiB: every level said, then one error.
expect_run(RC 1 STDOUT_EMPTY EXPECT "fallback: 1. kv-f16: KV cache f32 -> f16: needs"
           "fallback: 3. streaming: skipped: ADAPTIVE chooses the mode already"
           "fallback: 4. kv-window: skipped: no window fits (one position and 4 sinks needs"
           "TINYAI_ERR_RESOURCE_EXHAUSTED: " "the fallback chain (kv-f16, kv-int8, streaming, kv-window) was tried to its end"
           COMMAND ${GENERATE} -m ${model} -p Once -n 4 --temp 0 --mem-limit 64K --fallback kv-f16,kv-int8,streaming,kv-window)
expect_runtime_error(TINYAI_ERR_RESOURCE_EXHAUSTED "tried to its end"
                     ${INSPECT} ${model} --estimate --mem-limit 64K --bandwidth 10 --fallback all)
# The prefetch step: a compressed model's four prefetch workers hold a
# staging set each (a zstd context and a buffer); one byte below the least
# limit with them, sharing one fits, and the text is the same.
set(zmodel ${OUT_DIR}/z.tmai)
expect_run(RC 0 COMMAND ${CONVERT} --compress zstd
           --synthetic dim=64,hidden=128,layers=2,heads=4,kv_heads=2,vocab=300,seq_len=256 ${zmodel})
execute_process(COMMAND ${TOOL_EMULATOR} ${GENERATE} -m ${zmodel} -p Once -n 4 --prefetch-threads 4 --mem-limit 1
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
string(REGEX MATCH "to fit: --mem-limit ([0-9]+)" found "${err}")
set(zleast ${CMAKE_MATCH_1})
if(NOT zleast)
  cli_fail("--prefetch-threads 4 --mem-limit 1: no least limit in: ${err}")
  set(zleast 1000000)
endif()
math(EXPR zlimit "${zleast} - 1")
execute_process(COMMAND ${TOOL_EMULATOR} ${GENERATE} -m ${zmodel} -p Once -n 8 --temp 0 --quiet --prefetch-threads 4
                RESULT_VARIABLE rc OUTPUT_VARIABLE reference ERROR_VARIABLE err)
expect_runtime_error(TINYAI_ERR_RESOURCE_EXHAUSTED "below this model's minimum"
                     ${GENERATE} -m ${zmodel} -p Once -n 8 --temp 0 --prefetch-threads 4 --mem-limit ${zlimit})
expect_run(RC 0 EXPECT "fallback: 1. prefetch: prefetch workers share 1 staging set of 4 (" "bytes freed): fits ("
           "fallback: level 1 runs"
           COMMAND ${GENERATE} -m ${zmodel} -p Once -n 8 --temp 0 --prefetch-threads 4 --mem-limit ${zlimit}
                   --fallback prefetch,kv-f16)
execute_process(COMMAND ${TOOL_EMULATOR} ${GENERATE} -m ${zmodel} -p Once -n 8 --temp 0 --quiet --prefetch-threads 4
                        --mem-limit ${zlimit} --fallback prefetch
                RESULT_VARIABLE rc OUTPUT_VARIABLE shared ERROR_VARIABLE err)
if(NOT rc EQUAL 0 OR NOT shared STREQUAL reference)
  cli_fail("--fallback prefetch: exit status ${rc}, text '${shared}', without the limit '${reference}' ${err}")
endif()
# One worker has nothing to share.
expect_run(RC 1 EXPECT "fallback: 1. prefetch: skipped: the prefetch workers share one staging set already"
           COMMAND ${GENERATE} -m ${zmodel} -p Once -n 8 --prefetch-threads 1 --mem-limit 64K --fallback prefetch)
expect_run(RC 1 EXPECT "fallback: 1. prefetch: skipped: the model holds no staging buffers"
           COMMAND ${GENERATE} -m ${model} -p Once -n 8 --mem-limit 64K --fallback prefetch)
# Usage errors.
expect_usage_error("--fallback takes steps from prefetch, kv-f16, kv-int8, memory-opt, streaming, kv-window"
                   ${GENERATE} -m ${model} -p Once --fallback kv-f8)
expect_usage_error("--fallback names kv-f16 twice" ${GENERATE} -m ${model} -p Once --fallback kv-f16,kv-f16)
expect_usage_error("--fallback goes with --estimate" ${INSPECT} ${model} --fallback all)
cli_finish()
