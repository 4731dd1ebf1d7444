# Runs one test's command and requires both its exit status and its output:
# CTest's PASS_REGULAR_EXPRESSION ignores the exit status (a program that
# prints its line and then exits with an error passes), and WILL_FAIL passes
# on any non-zero status (a usage error instead of the runtime error, or a
# sanitizer's report of a crash, which exits with 1 by default).
#
#   cmake -DEXPECT_STATUS=N [-DEXPECT_OUTPUT=REGEX] [-DEMULATOR=...] [-DREQUIRES=FILE]
#         [-DEXPECT_TIMEOUT=SECONDS] -P tests/expect.cmake -- COMMAND [ARGUMENT...]
#
# EXPECT_STATUS  the exit status COMMAND must end with: 0 for success, or the
#                one the program documents for the failure (1 a runtime error,
#                2 a usage error). A process killed by a signal never matches:
#                execute_process reports it as text ("Child aborted",
#                "Segmentation fault"), not a number; under qemu-user a crashed
#                target kills qemu with the same signal.
# EXPECT_OUTPUT  a regular expression (CMake's, the syntax of
#                PASS_REGULAR_EXPRESSION) that COMMAND's standard output and
#                error, merged, must contain.
# EMULATOR       space-separated words that run a cross-built COMMAND
#                (tests/CMakeLists.txt's TINYAI_TEST_EMULATOR; empty natively).
# EXPECT_TIMEOUT the seconds COMMAND may run before it counts as hung and is
#                killed (default below): a timeout is for a hang, never for a
#                slow machine, so 10x the slowest command measured.
# REQUIRES       a file COMMAND needs from ../shared (or made from it, such as
#                the converted stories260K): when it is missing the test skips
#                (it prints "tinyai-test-skip: ...", which the test's
#                SKIP_REGULAR_EXPRESSION matches) or, when the environment sets
#                TINYAI_REQUIRE_SHARED (to anything but 0), fails naming it.
#
# The arguments after "--" are COMMAND, passed as they are (CMake does not
# read options after "--"); an argument may not be empty or hold a ';'.
# Sanitizer reports exit with status 99 here (set below), a status no program
# documents, so a sanitizer's finding is never a program's expected failure.
# On any mismatch the script prints what was expected and what came, and
# fails (cmake exits with 1). Diagnostics go through message() without a mode,
# which prints them as they are (message(FATAL_ERROR) rewraps its text).
cmake_minimum_required(VERSION 3.16)

if(NOT DEFINED EXPECT_STATUS OR NOT EXPECT_STATUS MATCHES "^[0-9]+$")
  message(FATAL_ERROR "expect.cmake: -DEXPECT_STATUS=N (the exit status the command must end with) is required")
endif()
set(command "")
set(after_separator FALSE)
math(EXPR last "${CMAKE_ARGC} - 1")
foreach(i RANGE 1 ${last})
  if(after_separator)
    list(APPEND command "${CMAKE_ARGV${i}}")
  elseif(CMAKE_ARGV${i} STREQUAL "--")
    set(after_separator TRUE)
  endif()
endforeach()
if(NOT command)
  message(FATAL_ERROR "expect.cmake: no command after --")
endif()
list(JOIN command " " shown)

if(NOT "${REQUIRES}" STREQUAL "" AND NOT EXISTS "${REQUIRES}")
  if(NOT "$ENV{TINYAI_REQUIRE_SHARED}" STREQUAL "" AND NOT "$ENV{TINYAI_REQUIRE_SHARED}" STREQUAL "0")
    message("TINYAI_REQUIRE_SHARED is set and ${REQUIRES} is missing: it comes from the shared data folder "
            "(../shared; -DTINYAI_SHARED_DIR=...)")
    message(FATAL_ERROR "the shared data is required")
  endif()
  message("tinyai-test-skip: ${REQUIRES} not found (../shared absent?); TINYAI_REQUIRE_SHARED=1 fails instead")
  return()
endif()

foreach(var ASAN_OPTIONS UBSAN_OPTIONS LSAN_OPTIONS TSAN_OPTIONS)
  if("$ENV{${var}}" STREQUAL "")
    set(ENV{${var}} "exitcode=99")
  else()
    set(ENV{${var}} "$ENV{${var}}:exitcode=99")
  endif()
endforeach()

# The slowest commands run here: the guide's examples and tinyai-arena on
# stories260K, 2.7 s under ASan beside other builds (the whole test); the
# heaviest stories260K run measured under qemu-aarch64 (tinyai-generate of
# 2,043 tokens, more than any example makes) took 14.1 s: 10x that.
if(NOT DEFINED EXPECT_TIMEOUT)
  set(EXPECT_TIMEOUT 150)
endif()
separate_arguments(emulator UNIX_COMMAND "${EMULATOR}")
execute_process(COMMAND ${emulator} ${command} TIMEOUT ${EXPECT_TIMEOUT} RESULT_VARIABLE status OUTPUT_VARIABLE output
                ERROR_VARIABLE output)
# The command's output first, as CTest shows a test's own.
message("${output}")

set(problems "")
if(status STREQUAL "Process terminated due to timeout")
  string(APPEND problems "\n  it ran past EXPECT_TIMEOUT (${EXPECT_TIMEOUT} s) and was killed: a hang")
elseif(NOT status MATCHES "^[0-9]+$")
  string(APPEND problems "\n  it did not exit: killed by a signal or not run (${status})")
elseif(NOT status EQUAL EXPECT_STATUS)
  string(APPEND problems "\n  it exited with status ${status}")
  if(status EQUAL 99)
    string(APPEND problems " (a sanitizer's report, see above)")
  endif()
endif()
if(DEFINED EXPECT_OUTPUT AND NOT output MATCHES "${EXPECT_OUTPUT}")
  string(APPEND problems "\n  its output does not match the expected regular expression")
endif()
if(problems)
  set(want "exit status ${EXPECT_STATUS}")
  if(DEFINED EXPECT_OUTPUT)
    string(APPEND want " and output matching\n    ${EXPECT_OUTPUT}")
  endif()
  message("${shown}\nexpected ${want}\ngot:${problems}")
  message(FATAL_ERROR "the test failed (see above)")
endif()
if(DEFINED EXPECT_OUTPUT)
  message(STATUS "exit status ${status} and output as expected")
else()
  message(STATUS "exit status ${status} as expected")
endif()
