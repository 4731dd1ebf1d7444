# tinyai-arena --json reports the context the LLM actually used ("context":
# the model's seq_len when --context is absent or 0) beside the one asked for
# ("requested_context"), and the text says it too; the smallest contexts run;
# a model that is not a regular file is named as what it is.
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
# Past the model's seq_len: the arena for it (the tools that run the model warn).
expect_run(RC 0 STDOUT_HAS "context 33" COMMAND ${ARENA} ${model} --context 33)
expect_runtime_error(TINYAI_ERR_INVALID_ARGUMENT "1048576" ${ARENA} ${model} --context 1048576 --kv-window 1048576
                     --kv-sink 1)
expect_runtime_error(TINYAI_ERR_FILE_NOT_FOUND "cannot read '${OUT_DIR}/missing.tmai'" ${ARENA} ${OUT_DIR}/missing.tmai)
# The smallest contexts run: with a context of 1 the check's generation after
# "Once" (6 tokens with BOS for this model's vocabulary) cannot fit, and the
# tool answered TINYAI_ERR_INTERNAL, blaming the library, for an estimate that
# held; the check now generates after BOS alone where "Once" does not fit.
foreach(context 1 2 5 6)
  set(prompt "BOS alone ('Once' does not fit the context)")
  if(context GREATER 5)
    set(prompt "'Once'")
  endif()
  foreach(options "" "--reader" "--kv-type;int8" "--kv-type;f16" "--reader;--mem-limit;1M" "--kv-window;1;--kv-sink;0")
    string(REPLACE ";" " " shown "${options}")
    expect_run(RC 0 STDOUT_HAS "runs (generation allocated 0 times)"
               "fails with TINYAI_ERR_OUT_OF_MEMORY; the generation after ${prompt}"
               COMMAND ${ARENA} ${model} --context ${context} ${options})
    expect_run(RC 0 STDOUT_HAS "\"requested_context\":${context}," "\"exact_runs\":true"
               "\"one_byte_less_fails\":true" COMMAND ${ARENA} ${model} --json --context ${context} ${options})
  endforeach()
endforeach()
# The model is read whole into memory, as the device holds it: a regular file
# (its size bounds the read), read straight into the image. A directory was
# TINYAI_ERR_INTERNAL ("basic_filebuf::underflow"); a FIFO is refused before
# it is opened (opening it would wait for a writer).
expect_runtime_error(TINYAI_ERR_IO "'${OUT_DIR}' is a directory, not a file" ${ARENA} ${OUT_DIR})
execute_process(COMMAND mkfifo ${OUT_DIR}/fifo RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  cli_fail("mkfifo failed (${rc})")
endif()
expect_runtime_error(TINYAI_ERR_IO
                     "'${OUT_DIR}/fifo' is a FIFO (named pipe), not a regular file (a model is read whole into memory: its size is the bound)"
                     ${ARENA} ${OUT_DIR}/fifo)
cli_finish()
