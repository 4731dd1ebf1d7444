# The shared_data test: SHARED_DIR (../shared, or -DTINYAI_SHARED_DIR=...)
# holds what the tests read from it: the stories260K checkpoint and tokenizer
# (converted by the convert_stories260K fixture for the golden, reference,
# C API, example, bare-metal and C++ tests) and the golden outputs (each
# golden/stories260K/*.prompt with its .expected; configure makes one golden
# test per prompt, so without them there are none to fail).
#   cmake -DSHARED_DIR=... -P tests/shared_data.cmake
# Passes when everything is there. Otherwise it names what is missing and
# skips (prints "tinyai-test-skip: ...", which the test's
# SKIP_REGULAR_EXPRESSION matches), or fails when the environment sets
# TINYAI_REQUIRE_SHARED (to anything but 0).
cmake_minimum_required(VERSION 3.16)

set(missing "")
foreach(file models/stories260K/stories260K.bin models/stories260K/tok512.bin)
  if(NOT EXISTS "${SHARED_DIR}/${file}")
    list(APPEND missing "${SHARED_DIR}/${file}")
  endif()
endforeach()
file(GLOB prompts "${SHARED_DIR}/golden/stories260K/*.prompt")
if(NOT prompts)
  list(APPEND missing "${SHARED_DIR}/golden/stories260K/*.prompt")
endif()
foreach(prompt ${prompts})
  string(REGEX REPLACE "\\.prompt$" ".expected" expected "${prompt}")
  if(NOT EXISTS "${expected}")
    list(APPEND missing "${expected}")
  endif()
endforeach()

if(NOT missing)
  list(LENGTH prompts n)
  message(STATUS "${SHARED_DIR}: stories260K and ${n} golden prompts")
  return()
endif()
list(JOIN missing "\n  " missing)
if(NOT "$ENV{TINYAI_REQUIRE_SHARED}" STREQUAL "" AND NOT "$ENV{TINYAI_REQUIRE_SHARED}" STREQUAL "0")
  message("TINYAI_REQUIRE_SHARED is set and the shared data is missing:\n  ${missing}")
  message(FATAL_ERROR "the shared data is required")
endif()
message("tinyai-test-skip: the shared data is missing (the tests that read it skip; "
        "TINYAI_REQUIRE_SHARED=1 fails instead):\n  ${missing}")
