# tinyai-arena --json reports the context the LLM actually used ("context":
# the model's seq_len when --context is absent or 0) beside the one asked for
# ("requested_context"), and the text says it too.
# Run by ctest as tools_arena_cli with CONVERT, ARENA, OUT_DIR and EMULATOR.
include(${CMAKE_CURRENT_LIST_DIR}/cli_common.cmake)

set(model ${OUT_DIR}/tiny.tmai)
expect_run(RC 0 COMMAND ${CONVERT} --synthetic dim=16,hidden=32,layers=2,heads=2,kv_heads=1,vocab=300,seq_len=32
           ${model})
expect_run(RC 0 STDOUT_HAS "\"context\":32,\"requested_context\":0," "\"exact_runs\":true" COMMAND ${ARENA} ${model} --json)
expect_run(RC 0 STDOUT_HAS "\"context\":32,\"requested_context\":0," COMMAND ${ARENA} ${model} --json --context 0)
expect_run(RC 0 STDOUT_HAS "\"context\":16,\"requested_context\":16," COMMAND ${ARENA} ${model} --json --context 16)
expect_run(RC 0 STDOUT_HAS "\"context\":32,\"requested_context\":0," "\"mem_limit\":1572864,"
           COMMAND ${ARENA} ${model} --json --reader --mem-limit 1.5M)
expect_run(RC 0 STDOUT_HAS "context 32, the model's seq_len" COMMAND ${ARENA} ${model})
expect_run(RC 0 STDOUT_HAS "context 16)" COMMAND ${ARENA} ${model} --context 16)
# A window's context is the window and its sinks, not the model's seq_len.
expect_run(RC 0 STDOUT_HAS "context 10: the window and its sinks)" COMMAND ${ARENA} ${model} --kv-window 8 --kv-sink 2)
# A context beyond the model's is a runtime error, with nothing on stdout.
expect_runtime_error(TINYAI_ERR_INVALID_ARGUMENT "seq_len" ${ARENA} ${model} --context 33)
expect_runtime_error(TINYAI_ERR_FILE_NOT_FOUND "cannot read '${OUT_DIR}/missing.tmai'" ${ARENA} ${OUT_DIR}/missing.tmai)
cli_finish()
