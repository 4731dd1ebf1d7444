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
# Seconds one run may take (a hang is a failure, not a stuck test).
set(CLI_TIMEOUT 60)

function(cli_fail what)
  math(EXPR n "${CLI_FAILURES} + 1")
  set(CLI_FAILURES ${n} PARENT_SCOPE)
  message(SEND_ERROR "${what}")
endfunction()

# expect_run(RC code [EXPECT text...] [STDOUT_EMPTY] [STDOUT_HAS text...]
#            [INPUT_FILE file] COMMAND program args...)
# Runs program (through the emulator, for at most CLI_TIMEOUT seconds); checks the exit status is code, that
# stdout+stderr contain every EXPECT text, stdout every STDOUT_HAS text, and
# with STDOUT_EMPTY that stdout is empty. Sets RUN_OUT and RUN_ERR in the
# caller.
function(expect_run)
  cmake_parse_arguments(A "STDOUT_EMPTY" "RC;INPUT_FILE" "EXPECT;STDOUT_HAS;COMMAND" ${ARGN})
  set(input "")
  if(A_INPUT_FILE)
    set(input INPUT_FILE ${A_INPUT_FILE})
  endif()
  execute_process(COMMAND ${TOOL_EMULATOR} ${A_COMMAND} ${input} TIMEOUT ${CLI_TIMEOUT}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  list(GET A_COMMAND 0 program)
  get_filename_component(program ${program} NAME)
  list(SUBLIST A_COMMAND 1 -1 args)
  string(REPLACE ";" " " args "${args}")
  set(what "${program} ${args}")
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

# Ends the script: a summary, and a non-zero exit when anything failed.
function(cli_finish)
  if(CLI_FAILURES GREATER 0)
    message(FATAL_ERROR "${CLI_FAILURES} check(s) failed")
  endif()
  file(REMOVE_RECURSE ${OUT_DIR})
endfunction()
# (Expected texts hold no square brackets: CMake does not split a list
# inside them.)
