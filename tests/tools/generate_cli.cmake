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
# --chat needs the model's chat template (the llama2.c model has none);
# --system goes with --chat.
expect_runtime_error(TINYAI_ERR_UNSUPPORTED "the model has no chat template" ${G} --chat -p hi)
expect_usage_error("--system goes with --chat" ${G} -p hi --system "be brief")

# ---- A prompt read from a file or standard input has a bound ---------------------------
# The context's tokens at up to 64 bytes each (this model's seq_len 32: 2048
# bytes; --context 4: 256), refused before more is held: a regular file by its
# size, a stream (a pipe, a device) as soon as it yields one byte more.
# `-f /dev/zero --mem-limit 2M` was read until a 256 MB cgroup killed it.
string(REPEAT "a" 2048 at_bound)
file(WRITE ${OUT_DIR}/prompt-2048.txt "${at_bound}")
file(WRITE ${OUT_DIR}/prompt-2049.txt "${at_bound}a")
# At the bound the tool reads it, and the library refuses it by its tokens.
expect_run(RC 1 EXPECT "TINYAI_ERR_CONTEXT_OVERFLOW: the prompt is 2048 bytes, more than the 32 tokens" STDOUT_EMPTY
           COMMAND ${G} -f ${OUT_DIR}/prompt-2048.txt)
foreach(input "-f;${OUT_DIR}/prompt-2049.txt" "-p;-")
  list(GET input 0 flag)
  list(GET input 1 path)
  set(what "the prompt file '${path}'")
  if(path STREQUAL "-")
    set(what "the prompt from standard input")
  endif()
  expect_run(RC 1 INPUT_FILE ${OUT_DIR}/prompt-2049.txt STDOUT_EMPTY
             EXPECT "TINYAI_ERR_CONTEXT_OVERFLOW: ${what} is 2049 bytes, more than the 2048 bytes it may hold (the context's 32 tokens at up to 64 bytes each); give a shorter prompt, or a longer --context"
             COMMAND ${G} ${flag} ${path})
  expect_run(RC 1 INPUT_FILE ${OUT_DIR}/prompt-2049.txt STDOUT_EMPTY
             EXPECT "${what} is 2049 bytes, more than the 256 bytes it may hold (the context's 4 tokens"
             COMMAND ${G} ${flag} ${path} --context 4)
endforeach()
# A 64 MiB file (sparse: it takes no room) is refused by its size, unread.
file(WRITE ${OUT_DIR}/sparse.txt "")
execute_process(COMMAND truncate -s 64M ${OUT_DIR}/sparse.txt RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  cli_fail("truncate -s 64M failed (${rc})")
endif()
expect_runtime_error(TINYAI_ERR_CONTEXT_OVERFLOW
                     "the prompt file '${OUT_DIR}/sparse.txt' is 67108864 bytes, more than the 2048 bytes it may hold"
                     ${G} -f ${OUT_DIR}/sparse.txt --mem-limit 2M)
# A stream is read no further than the bound: 64 MiB of /dev/zero through a
# pipe, as standard input and as -f /dev/stdin; the tool stops reading after
# 2049 bytes, so the writer dies of the closed pipe instead of finishing.
foreach(flags "-p;-" "-f;/dev/stdin")
  execute_process(COMMAND head -c 67108864 /dev/zero COMMAND ${TOOL_EMULATOR} ${G} ${flags} --mem-limit 2M
                  TIMEOUT ${CLI_TIMEOUT} RESULTS_VARIABLE rcs OUTPUT_VARIABLE out ERROR_VARIABLE err)
  list(GET rcs 0 writer_rc)
  list(GET rcs 1 tool_rc)
  string(FIND "${err}" "TINYAI_ERR_CONTEXT_OVERFLOW: " at1)
  string(FIND "${err}" " is longer than the 2048 bytes it may hold (the context's 32 tokens" at2)
  if(NOT tool_rc EQUAL 1 OR at1 EQUAL -1 OR at2 EQUAL -1 OR NOT out STREQUAL "")
    cli_fail("head -c 64M /dev/zero | tinyai-generate ${flags}: exit ${tool_rc}, expected 1 and the bound:\n${out}${err}")
  endif()
  if(writer_rc STREQUAL "0")
    cli_fail("head -c 64M /dev/zero | tinyai-generate ${flags}: the tool read all 64 MiB (the writer finished)")
  endif()
endforeach()

# ---- A path that is not the file a tool needs is named as what it is -------------------------
execute_process(COMMAND mkfifo ${OUT_DIR}/fifo RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  cli_fail("mkfifo failed (${rc})")
endif()
expect_runtime_error(TINYAI_ERR_IO "the prompt file '${OUT_DIR}' is a directory, not a file" ${G} -f ${OUT_DIR})
foreach(tool "${GENERATE};-p;Once;-m" "${INSPECT}" "${BENCH};--no-probe;-m" "${EVAL};--ref;${model}")
  expect_runtime_error(TINYAI_ERR_IO "the model '${OUT_DIR}' is a directory, not a regular file; give a .tmai or .gguf file"
                       ${tool} ${OUT_DIR})
  # A FIFO is refused before it is opened (opening it would wait for a writer).
  expect_runtime_error(TINYAI_ERR_IO
                       "the model '${OUT_DIR}/fifo' is a FIFO (named pipe), not a regular file (it is read at offsets"
                       ${tool} ${OUT_DIR}/fifo)
endforeach()
expect_runtime_error(TINYAI_ERR_IO "the model '${OUT_DIR}/fifo' is a FIFO (named pipe), not a regular file (it is read whole"
                     ${BENCH} --no-probe --huge-pages -m ${OUT_DIR}/fifo)
foreach(cmd "${G};-p;Once" "${INSPECT};${model}")
  expect_runtime_error(TINYAI_ERR_IO "--dump-dag '${OUT_DIR}' is a directory; name the file to write"
                       ${cmd} --dump-dag ${OUT_DIR})
endforeach()

# ---- Nothing on stdout when a run fails ------------------------------------------------
# A prompt longer than the context fails before any text: no stray newline.
expect_runtime_error(TINYAI_ERR_CONTEXT_OVERFLOW "context" ${GENERATE} -m ${model} --context 4
                     -p "a prompt much longer than four positions of context")
expect_runtime_error(TINYAI_ERR_FILE_NOT_FOUND "missing.tmai" ${GENERATE} -m ${OUT_DIR}/missing.tmai -p Once)
expect_runtime_error(TINYAI_ERR_FILE_NOT_FOUND "missing.tmai" ${INSPECT} ${OUT_DIR}/missing.tmai)
expect_runtime_error(TINYAI_ERR_FILE_NOT_FOUND "missing.tmai" ${BENCH} -m ${OUT_DIR}/missing.tmai --no-probe)
# A context past the model's seq_len runs, said with what it risks; within it, nothing is said.
expect_run(RC 0 EXPECT "warning: -c 64 is past the model's seq_len 32" "-c 32 stays within"
           COMMAND ${GENERATE} -m ${model} -p Once -c 64 -n 40)
expect_run(RC 0 COMMAND ${GENERATE} -m ${model} -p Once -c 32 -n 4)
if(RUN_ERR MATCHES "past the model's seq_len")
  cli_fail("a context within seq_len was warned about: ${RUN_ERR}")
endif()
expect_run(RC 0 EXPECT "warning: -c 64 is past the model's seq_len 32" COMMAND ${INSPECT} ${model} -c 64 --json)
if(NOT RUN_OUT MATCHES "\"context\":64")
  cli_fail("tinyai-inspect -c 64 did not estimate 64 positions: ${RUN_OUT}")
endif()
expect_run(RC 0 EXPECT "warning: -c 64 is past" COMMAND ${BENCH} -m ${model} -c 64 -p 40 -n 8 --no-probe)
# Past the runtime's positions: refused.
expect_usage_error("-c: 1048577 is out of range 0..1048576" ${GENERATE} -m ${model} -p Once -c 1048577)

# ---- An activation DAG file that cannot be written --------------------------------------
foreach(tool GENERATE INSPECT)
  if(tool STREQUAL GENERATE)
    set(cmd ${G} -p Once)
  else()
    set(cmd ${INSPECT} ${model})
  endif()
  expect_runtime_error(TINYAI_ERR_FILE_NOT_FOUND
                       "cannot write the activation DAG: '${OUT_DIR}/no-such-folder/dag.yaml': cannot write in the directory '${OUT_DIR}/no-such-folder': No such file or directory"
                       ${cmd} --dump-dag ${OUT_DIR}/no-such-folder/dag.yaml)
  if(EXISTS /dev/full)
    expect_run(RC 1 EXPECT "TINYAI_ERR_IO: " "cannot write the activation DAG: '/dev/full': cannot write"
               "No space left on device" STDOUT_EMPTY COMMAND ${cmd} --dump-dag /dev/full)
  endif()
  # The DAG goes where every file goes (docs/files.md): never over the model
  # being run, nor into a FIFO.
  expect_runtime_error(TINYAI_ERR_INVALID_ARGUMENT "cannot write the activation DAG: '${model}' is a file this process is reading"
                       ${cmd} --dump-dag ${model})
  expect_runtime_error(TINYAI_ERR_INVALID_ARGUMENT "cannot write the activation DAG: '${OUT_DIR}/fifo' is a FIFO"
                       ${cmd} --dump-dag ${OUT_DIR}/fifo)
  expect_run(RC 0 COMMAND ${cmd} --dump-dag ${OUT_DIR}/dag.yaml)
  file(READ ${OUT_DIR}/dag.yaml dag LIMIT 4096)
  if(dag STREQUAL "")
    cli_fail("${tool} --dump-dag wrote an empty file")
  endif()
  file(REMOVE ${OUT_DIR}/dag.yaml)
endforeach()

# ---- Every least --mem-limit a tool prints runs when given back ------------------------------
# tinyai-inspect's figure is for tinyai-generate's defaults (one thread per
# core; it was for one thread, which generate refused on a machine of two
# cores) or the options given, and says which; tinyai-generate --stats prints
# it for its own options. Each is rounded up ("0.76 MiB (795088 bytes)"; --stats
# rounded 0.74 down to 0.7): given back as MiB or as bytes, generate runs;
# a byte less is refused. A model whose activations and scratch grow with the
# threads.
set(wide ${OUT_DIR}/wide.tmai)
expect_run(RC 0 COMMAND ${CONVERT} --synthetic dim=64,hidden=128,layers=2,heads=4,vocab=300,seq_len=512 ${wide})
set(least_regex "least --mem-limit ([0-9]+\\.[0-9][0-9]) MiB \\(([0-9]+) bytes\\)")
# check_least(WHO text options...): the least limit in text, given back to
# tinyai-generate with options.
function(check_least who text)
  if(NOT text MATCHES "${least_regex}")
    cli_fail("${who}: no least --mem-limit in:\n${text}")
    set(CLI_FAILURES ${CLI_FAILURES} PARENT_SCOPE)
    return()
  endif()
  set(mib ${CMAKE_MATCH_1})
  set(bytes ${CMAKE_MATCH_2})
  math(EXPR below "${bytes} - 1")
  set(gen ${GENERATE} -m ${wide} -p Once -n 2 --quiet ${ARGN})
  expect_run(RC 0 COMMAND ${gen} --mem-limit ${mib}M)
  expect_run(RC 0 COMMAND ${gen} --mem-limit ${bytes})
  expect_runtime_error(TINYAI_ERR_RESOURCE_EXHAUSTED "memory limit of ${below} bytes is below this model's minimum of ${bytes}"
                       ${gen} --mem-limit ${below})
  message(STATUS "${who}: least --mem-limit ${mib} MiB (${bytes} bytes) runs; ${below} is refused")
  set(CLI_FAILURES ${CLI_FAILURES} PARENT_SCOPE)
endfunction()
foreach(options "" "-t;1" "-t;3" "--context;100" "--kv-type;f16" "--kv-type;int8" "--kv-type;auto"
                "--kv-window;16;--kv-sink;4")
  string(REPLACE ";" " " shown "${options}")
  expect_run(RC 0 COMMAND ${INSPECT} ${wide} ${options})
  check_least("tinyai-inspect ${shown}" "${RUN_OUT}" ${options})
  expect_run(RC 0 COMMAND ${INSPECT} ${wide} --plan ${options})
  string(REGEX MATCH "\n    least --mem-limit [^\n]*" plan_line "${RUN_OUT}")
  check_least("tinyai-inspect --plan ${shown}" "${plan_line}" ${options})
  expect_run(RC 0 COMMAND ${GENERATE} -m ${wide} -p Once -n 2 --stats ${options})
  check_least("tinyai-generate --stats ${shown}" "${RUN_ERR}" ${options})
endforeach()
# The figure says what it is for.
expect_run(RC 0 STDOUT_HAS "with 3 threads, context 100, KV cache int8:"
           COMMAND ${INSPECT} ${wide} -t 3 --context 100 --kv-type int8)
expect_run(RC 0 STDOUT_HAS "threads (-t 0: one per core), context 512 (the model's seq_len), KV cache f32"
           COMMAND ${INSPECT} ${wide})
expect_run(RC 0 STDOUT_HAS "\"threads\":3,\"context\":100,\"kv_type\":\"f16\",\"kv_window\":0,\"kv_sinks\":0"
           COMMAND ${INSPECT} ${wide} --json -t 3 --context 100 --kv-type f16)
expect_usage_error("--kv-sink goes with --kv-window" ${INSPECT} ${wide} --kv-sink 2)

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
# --mem-limit auto: the room this process's memory cgroup (else MemAvailable)
# leaves, less the process overhead, said on stderr; given to every tool
# that takes --mem-limit. (Under an emulator /proc is the host's: the same.)
if(EXISTS /proc/meminfo)
  expect_run(RC 0 EXPECT "tinyai-inspect: --mem-limit auto: " "less 16.0 MiB for the process" STDOUT_HAS "\"fits\":true"
             COMMAND ${INSPECT} ${model} --json --mem-limit auto)
  expect_run(RC 0 EXPECT "tinyai-generate: --mem-limit auto: " STDOUT_HAS "Once upon a time"
             COMMAND ${GENERATE} -m ${model} -n 6 -p "Once upon a time" --mem-limit auto)
  # --quiet: the text alone.
  expect_run(RC 0 COMMAND ${G} -p "Once upon a time" --mem-limit auto)
  if(NOT RUN_ERR STREQUAL "" OR NOT RUN_OUT STREQUAL "${expected}")
    cli_fail("--quiet --mem-limit auto: stderr '${RUN_ERR}', stdout '${RUN_OUT}' (expected '${expected}')")
  endif()
  expect_run(RC 0 EXPECT "--mem-limit auto: " COMMAND ${BENCH} -m ${model} --prompt 4 --gen 4 --no-probe
             --mem-limit auto)
endif()
expect_usage_error("--mem-limit" ${G} -p Once --mem-limit automatic)
# A limit the run does not fit: the library's remedies as flags
# (tinyaiGetLastErrorInfo), each of which runs.
expect_run(RC 1 EXPECT "TINYAI_ERR_RESOURCE_EXHAUSTED" "tinyai-generate: to fit: --mem-limit " STDOUT_EMPTY
           COMMAND ${G} -p Once --mem-limit 1K)
string(REGEX MATCH "to fit: --mem-limit ([0-9]+)" fix "${RUN_ERR}")
set(least ${CMAKE_MATCH_1})
expect_run(RC 0 COMMAND ${G} -p Once --mem-limit ${least})
expect_run(RC 1 EXPECT "tinyai-generate: to fit: --mode " COMMAND ${G} -p Once --mem-limit ${least} --mode normal)
string(REGEX MATCH "to fit: --mode ([a-z_]+)" fix "${RUN_ERR}")
expect_run(RC 0 COMMAND ${G} -p Once --mem-limit ${least} --mode ${CMAKE_MATCH_1})
# A weight cache capped below a row slice fails with the least cap; at that
# cap it runs, but warns that every token reads the weights again and names
# the cap that holds them; at that one, no warning.
set(GV ${GENERATE} -m ${model} -n 6)
expect_run(RC 1 EXPECT "tinyai-generate: to fit: --cache " COMMAND ${GV} -p Once --cache 1K)
string(REGEX MATCH "to fit: --cache ([0-9]+)" fix "${RUN_ERR}")
expect_run(RC 0 EXPECT "tinyai-generate: warning: the weight cache's cap of" "tinyai-generate: to run faster: --cache "
           COMMAND ${GV} -p Once --cache ${CMAKE_MATCH_1})
string(REGEX MATCH "to run faster: --cache ([0-9]+)" fix "${RUN_ERR}")
expect_run(RC 0 COMMAND ${GV} -p Once --cache ${CMAKE_MATCH_1})
string(FIND "${RUN_ERR}" "warning" at)
if(NOT at EQUAL -1)
  cli_fail("--cache ${CMAKE_MATCH_1} (the weights' bytes) still warns:\n${RUN_ERR}")
endif()
# --estimate: tinyaiPreflightLLM before anything is allocated; what does not
# fit fails with the remedies, each of which the estimate then accepts.
expect_run(RC 0 STDOUT_HAS "\"mode\":\"NORMAL\"" "\"peak_bytes\":" "\"peak_rss_bytes\":" "\"memory_gbps\":40.00"
           "\"bandwidth_source\":\"given\"" "\"storage_bytes_per_token\":0,"
           COMMAND ${INSPECT} ${model} --estimate --json --bandwidth 40)
expect_run(RC 0 STDOUT_HAS "estimate, before anything is allocated" "TinyAI holds at most" "decode at most"
           COMMAND ${INSPECT} ${model} --estimate --bandwidth 40 --kv-type int8 --context 16)
expect_run(RC 1 EXPECT "TINYAI_ERR_RESOURCE_EXHAUSTED" "tinyai-inspect: to fit: --mem-limit " STDOUT_EMPTY
           COMMAND ${INSPECT} ${model} --estimate --bandwidth 40 --mem-limit 1K)
string(REGEX MATCH "to fit: --mem-limit ([0-9]+)" fix "${RUN_ERR}")
expect_run(RC 0 STDOUT_HAS "\"mem_limit_bytes\":${CMAKE_MATCH_1}," "\"peak_bytes\":${CMAKE_MATCH_1},"
           COMMAND ${INSPECT} ${model} --estimate --json --bandwidth 40 --mem-limit ${CMAKE_MATCH_1})
expect_usage_error("--cache and --bandwidth go with --estimate" ${INSPECT} ${model} --bandwidth 40)
expect_usage_error("--estimate is a language model's" ${INSPECT} ${model} --estimate --batch 2)
expect_usage_error("--bandwidth" ${INSPECT} ${model} --estimate --bandwidth 0)
# The other plan flags are not ignored either: each implies --plan.
foreach(flag "--mode;normal" "--batch;2" "--shape;1:8" "--debug-exec")
  expect_run(RC 0 STDOUT_HAS "\"arena_bytes\":" COMMAND ${INSPECT} ${model} --json ${flag})
endforeach()

# ---- An output that cannot be written is an error --------------------------------------------
if(EXISTS /dev/full)
  execute_process(COMMAND ${TOOL_EMULATOR} ${INSPECT} ${model} OUTPUT_FILE /dev/full RESULT_VARIABLE rc
                  ERROR_VARIABLE err TIMEOUT ${CLI_TIMEOUT})
  string(FIND "${err}" "TINYAI_ERR_IO: cannot write to standard output" at)
  if(NOT rc EQUAL 1 OR at EQUAL -1)
    cli_fail("tinyai-inspect > /dev/full: exit ${rc}, expected 1 with TINYAI_ERR_IO:\n${err}")
  endif()
endif()

cli_finish()
