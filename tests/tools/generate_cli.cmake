# tinyai-generate and tinyai-inspect at the edges: the prompt from standard
# input (-p -) or a file (-f FILE), a prompt file that cannot be read, nothing
# on stdout when a run fails (no stray newline), an activation DAG file that
# cannot be written (a runtime error, TINYAI_ERR_IO naming the path and the
# cause, every handle freed: under AddressSanitizer a leak changes the exit
# status), tinyai-inspect --mem-limit without --plan (it checks the fit; exit
# status 1 when nothing fits), and an output that cannot be written.
# Run by ctest as tools_generate_cli with CONVERT, GENERATE, INSPECT, BENCH,
# OUT_DIR and EMULATOR.
include(${CMAKE_CURRENT_LIST_DIR}/cli_common.cmake)

set(model ${OUT_DIR}/tiny.tmai)
expect_run(RC 0 COMMAND ${CONVERT} --synthetic dim=16,hidden=32,layers=2,heads=2,kv_heads=1,vocab=300,seq_len=32
           ${model})
set(G ${GENERATE} -m ${model} -n 6 --quiet)

# ---- The prompt from standard input or a file ----------------------------------------
expect_run(RC 0 COMMAND ${G} -p "Once upon a time")
set(expected "${RUN_OUT}")
if(NOT expected MATCHES "^Once upon a time")
  cli_fail("the text does not start with the prompt: '${expected}'")
endif()
file(WRITE ${OUT_DIR}/prompt.txt "Once upon a time\n")
file(WRITE ${OUT_DIR}/prompt-crlf.txt "Once upon a time\r\n")
file(WRITE ${OUT_DIR}/prompt-bare.txt "Once upon a time")
foreach(input prompt.txt prompt-crlf.txt prompt-bare.txt)
  expect_run(RC 0 INPUT_FILE ${OUT_DIR}/${input} COMMAND ${G} -p -)
  if(NOT RUN_OUT STREQUAL expected)
    cli_fail("-p - with ${input} on stdin gave '${RUN_OUT}', -p gave '${expected}'")
  endif()
  expect_run(RC 0 COMMAND ${G} -f ${OUT_DIR}/${input})
  if(NOT RUN_OUT STREQUAL expected)
    cli_fail("-f ${input} gave '${RUN_OUT}', -p gave '${expected}'")
  endif()
endforeach()
expect_runtime_error(TINYAI_ERR_FILE_NOT_FOUND "cannot read the prompt file '${OUT_DIR}/missing.txt': No such file"
                     ${G} -f ${OUT_DIR}/missing.txt)
expect_runtime_error(TINYAI_ERR_IO "cannot read the prompt file '${OUT_DIR}'" ${G} -f ${OUT_DIR})
expect_usage_error("give the prompt once" ${G} -p Once -f ${OUT_DIR}/prompt.txt)
expect_usage_error("a prompt is required" ${G})
expect_usage_error("-f needs a value" ${G} -f)
# A NUL byte would cut the prompt short silently ("Once", NUL, "up").
execute_process(COMMAND sh -c "printf 'Once\\000up' > '${OUT_DIR}/nul.txt'")
file(SIZE ${OUT_DIR}/nul.txt nul_size)
if(NOT nul_size EQUAL 7)
  cli_fail("could not write the NUL prompt file (${nul_size} bytes)")
endif()
expect_runtime_error(TINYAI_ERR_INVALID_ARGUMENT "holds a NUL byte at offset 4" ${G} -f ${OUT_DIR}/nul.txt)

# ---- Nothing on stdout when a run fails ------------------------------------------------
# A prompt longer than the context fails before any text: no stray newline.
expect_runtime_error(TINYAI_ERR_CONTEXT_OVERFLOW "context" ${GENERATE} -m ${model} --context 4
                     -p "a prompt much longer than four positions of context")
expect_runtime_error(TINYAI_ERR_FILE_NOT_FOUND "missing.tmai" ${GENERATE} -m ${OUT_DIR}/missing.tmai -p Once)
expect_runtime_error(TINYAI_ERR_FILE_NOT_FOUND "missing.tmai" ${INSPECT} ${OUT_DIR}/missing.tmai)
expect_runtime_error(TINYAI_ERR_FILE_NOT_FOUND "missing.tmai" ${BENCH} -m ${OUT_DIR}/missing.tmai --no-probe)
expect_runtime_error(TINYAI_ERR_INVALID_ARGUMENT "exceeds the model's seq_len" ${GENERATE} -m ${model} -p Once
                     --context 33)
# tinyai-inspect: a context the model cannot take is an error, not a figure left out.
expect_run(RC 1 EXPECT "TINYAI_ERR_INVALID_ARGUMENT: " "exceeds the model's seq_len" COMMAND ${INSPECT} ${model}
           --context 33)

# ---- An activation DAG file that cannot be written --------------------------------------
foreach(tool GENERATE INSPECT)
  if(tool STREQUAL GENERATE)
    set(cmd ${G} -p Once)
  else()
    set(cmd ${INSPECT} ${model})
  endif()
  expect_runtime_error(TINYAI_ERR_IO
                       "cannot write the activation DAG to '${OUT_DIR}/no-such-folder/dag.yaml': No such file or directory"
                       ${cmd} --dump-dag ${OUT_DIR}/no-such-folder/dag.yaml)
  if(EXISTS /dev/full)
    expect_runtime_error(TINYAI_ERR_IO "cannot write the activation DAG to '/dev/full': No space left on device"
                         ${cmd} --dump-dag /dev/full)
  endif()
  expect_run(RC 0 COMMAND ${cmd} --dump-dag ${OUT_DIR}/dag.yaml)
  file(READ ${OUT_DIR}/dag.yaml dag LIMIT 4096)
  if(dag STREQUAL "")
    cli_fail("${tool} --dump-dag wrote an empty file")
  endif()
  file(REMOVE ${OUT_DIR}/dag.yaml)
endforeach()

# ---- tinyai-inspect --mem-limit checks the fit, with or without --plan ---------------------
foreach(plan "" "--plan")
  expect_run(RC 1 EXPECT "tinyai-inspect: TINYAI_ERR_RESOURCE_EXHAUSTED: nothing fits --mem-limit 1024 bytes"
             STDOUT_HAS "\"fits\":false" "\"mode\":\"NONE\"" COMMAND ${INSPECT} ${model} ${plan} --json --mem-limit 1K)
  expect_run(RC 1 EXPECT "nothing fits --mem-limit 1024 bytes" STDOUT_HAS "nothing fits"
             COMMAND ${INSPECT} ${model} ${plan} --mem-limit 1K)
  expect_run(RC 0 STDOUT_HAS "\"fits\":true" "\"mem_limit_bytes\":67108864" COMMAND ${INSPECT} ${model} ${plan} --json
             --mem-limit 64M)
  expect_run(RC 0 STDOUT_HAS "plan: mode" "limit 67108864 bytes" COMMAND ${INSPECT} ${model} ${plan} --mem-limit 64M)
endforeach()
# The other plan flags are not ignored either: each implies --plan.
foreach(flag "--mode;normal" "--batch;2" "--shape;1:8" "--debug-exec")
  expect_run(RC 0 STDOUT_HAS "\"arena_bytes\":" COMMAND ${INSPECT} ${model} --json ${flag})
endforeach()

# ---- An output that cannot be written is an error --------------------------------------------
if(EXISTS /dev/full)
  execute_process(COMMAND ${TOOL_EMULATOR} ${INSPECT} ${model} OUTPUT_FILE /dev/full RESULT_VARIABLE rc
                  ERROR_VARIABLE err)
  string(FIND "${err}" "TINYAI_ERR_IO: cannot write to standard output" at)
  if(NOT rc EQUAL 1 OR at EQUAL -1)
    cli_fail("tinyai-inspect > /dev/full: exit ${rc}, expected 1 with TINYAI_ERR_IO:\n${err}")
  endif()
endif()

cli_finish()
