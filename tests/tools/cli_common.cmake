# Helpers of the tools' command-line tests (cmake -P scripts): run a tool
# and check its exit status, its messages and that stdout stays empty on an
# error. Every failed check is reported (message(SEND_ERROR)) and the script
# goes on, so one run lists them all; the script then exits non-zero.
#
# The including script gets EMULATOR (space-separated, empty in a native
# build: it runs cross-built tools) and OUT_DIR (a scratch folder, emptied
# here).
separate_arguments(TOOL_EMULATOR UNIX_COMMAND "${EMULATOR}")
file(REMOVE_RECURSE ${OUT_DIR})
file(MAKE_DIRECTORY ${OUT_DIR})
set(CLI_FAILURES 0)
# Seconds one run may take: a timeout is for hangs, never for a slow machine
# (ctest itself sets none), so 10x the slowest run measured, on a 2-core
# machine loaded by other builds: 2,048 positions of stories260K in a window
# (kv_cli.cmake) took 0.8 s in release, 9.1 s under ASan+UBSan and 14.1 s under
# qemu-aarch64 (scripts/test.sh runs these scripts in all three); the generation
# of a 4,096-layer model, 4.1 s in release. Measure again with
# -DCLI_TIMES=FILE (each run's milliseconds and command are appended to FILE).
set(CLI_TIMEOUT 150)

function(cli_fail what)
  math(EXPR n "${CLI_FAILURES} + 1")
  set(CLI_FAILURES ${n} PARENT_SCOPE)
  message(SEND_ERROR "${what}")
endfunction()

# expect_run(RC code [EXPECT text...] [STDOUT_EMPTY] [STDOUT_HAS text...]
#            [INPUT_FILE file] [TIMEOUT seconds] COMMAND program args...)
# Runs program (through the emulator, for at most TIMEOUT, default
# CLI_TIMEOUT, seconds: a hang); checks the exit status is code, that
# stdout+stderr contain every EXPECT text, stdout every STDOUT_HAS text, and
# with STDOUT_EMPTY that stdout is empty. Sets RUN_OUT and RUN_ERR in the
# caller.
function(expect_run)
  cmake_parse_arguments(A "STDOUT_EMPTY" "RC;INPUT_FILE;TIMEOUT" "EXPECT;STDOUT_HAS;COMMAND" ${ARGN})
  set(input "")
  if(A_INPUT_FILE)
    set(input INPUT_FILE ${A_INPUT_FILE})
  endif()
  if(NOT A_TIMEOUT)
    set(A_TIMEOUT ${CLI_TIMEOUT})
  endif()
  string(TIMESTAMP started "%s%f")
  execute_process(COMMAND ${TOOL_EMULATOR} ${A_COMMAND} ${input} TIMEOUT ${A_TIMEOUT}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  string(TIMESTAMP ended "%s%f")
  list(GET A_COMMAND 0 program)
  get_filename_component(program ${program} NAME)
  list(SUBLIST A_COMMAND 1 -1 args)
  string(REPLACE ";" " " args "${args}")
  set(what "${program} ${args}")
  if(CLI_TIMES)
    math(EXPR ms "(${ended} - ${started}) / 1000")
    file(APPEND ${CLI_TIMES} "${ms} ${what}\n")
  endif()
  set(failures ${CLI_FAILURES})
  if(NOT "${rc}" STREQUAL "${A_RC}")
    cli_fail("${what}: exit status ${rc}, expected ${A_RC}\n--- stdout:\n${out}--- stderr:\n${err}")
  endif()
  foreach(text IN LISTS A_EXPECT)
    string(FIND "${out}${err}" "${text}" at)
    if(at EQUAL -1)
      cli_fail("${what}: the output lacks '${text}'\n--- stdout:\n${out}--- stderr:\n${err}")
    endif()
  endforeach()
  foreach(text IN LISTS A_STDOUT_HAS)
    string(FIND "${out}" "${text}" at)
    if(at EQUAL -1)
      cli_fail("${what}: stdout lacks '${text}'\n--- stdout:\n${out}--- stderr:\n${err}")
    endif()
  endforeach()
  if(A_STDOUT_EMPTY AND NOT "${out}" STREQUAL "")
    cli_fail("${what}: stdout is not empty on an error:\n'${out}'")
  endif()
  set(CLI_FAILURES ${CLI_FAILURES} PARENT_SCOPE)
  set(RUN_OUT "${out}" PARENT_SCOPE)
  set(RUN_ERR "${err}" PARENT_SCOPE)
endfunction()

# A usage error: exit 2, the message, the usage, nothing on stdout.
function(expect_usage_error text)
  expect_run(RC 2 EXPECT "${text}" "usage:" STDOUT_EMPTY COMMAND ${ARGN})
  set(CLI_FAILURES ${CLI_FAILURES} PARENT_SCOPE)
endfunction()

# A runtime error: exit 1, "STATUS: " and the message, nothing on stdout.
function(expect_runtime_error status text)
  expect_run(RC 1 EXPECT "${status}: " "${text}" STDOUT_EMPTY COMMAND ${ARGN})
  set(CLI_FAILURES ${CLI_FAILURES} PARENT_SCOPE)
endfunction()

# expect_json(WHAT JSON PATH...): fails naming WHAT unless JSON (a JSON
# text) holds every dotted PATH (quality.positions, tensors.1.rel_rms); each
# value is set as JSON_<PATH with dots as underscores> (JSON_quality_positions).
function(expect_json what json)
  foreach(path IN LISTS ARGN)
    string(REPLACE "." ";" parts "${path}")
    string(JSON value ERROR_VARIABLE error GET "${json}" ${parts})
    if(error)
      cli_fail("${what}: no ${path} in '${json}' (${error})")
    endif()
    string(REPLACE "." "_" name "${path}")
    set(JSON_${name} "${value}" PARENT_SCOPE)
  endforeach()
  set(CLI_FAILURES ${CLI_FAILURES} PARENT_SCOPE)
endfunction()

# Ends the script: a summary, and a non-zero exit when anything failed.
function(cli_finish)
  if(CLI_FAILURES GREATER 0)
    message(FATAL_ERROR "${CLI_FAILURES} check(s) failed")
  endif()
  file(REMOVE_RECURSE ${OUT_DIR})
endfunction()
# (Expected texts hold no square brackets: CMake does not split a list
# inside them.)
