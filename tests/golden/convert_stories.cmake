# Converts stories260K into the test data folder, or skips when absent (the
# tests that need it then skip too); fails instead when the environment sets
# TINYAI_REQUIRE_SHARED (to anything but 0).
# EMULATOR (space-separated, may be empty) runs a cross-built CONVERT; DTYPE,
# when set, is passed as --dtype.
separate_arguments(emu UNIX_COMMAND "${EMULATOR}")
set(CONVERT ${emu} ${CONVERT})
if(NOT EXISTS ${STORIES_DIR}/stories260K.bin)
  if(NOT "$ENV{TINYAI_REQUIRE_SHARED}" STREQUAL "" AND NOT "$ENV{TINYAI_REQUIRE_SHARED}" STREQUAL "0")
    message("TINYAI_REQUIRE_SHARED is set and ${STORIES_DIR}/stories260K.bin is missing "
            "(../shared; -DTINYAI_SHARED_DIR=...)")
    message(FATAL_ERROR "the shared data is required")
  endif()
  message(STATUS "stories260K not found in ${STORIES_DIR}: tests that need it will skip; "
                 "TINYAI_REQUIRE_SHARED=1 fails instead")
  return()
endif()
get_filename_component(dir ${OUT} DIRECTORY)
file(MAKE_DIRECTORY ${dir})
set(dtype_args)
if(DEFINED DTYPE)
  set(dtype_args --dtype ${DTYPE})
endif()
execute_process(COMMAND ${CONVERT} ${dtype_args} --from llama2c --tokenizer ${STORIES_DIR}/tok512.bin
                        ${STORIES_DIR}/stories260K.bin ${OUT} RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "tinyai-convert failed (${rc})")
endif()
