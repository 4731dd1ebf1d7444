# Converts stories260K into the test data folder, or skips when absent.
# EMULATOR (space-separated, may be empty) runs a cross-built CONVERT.
separate_arguments(emu UNIX_COMMAND "${EMULATOR}")
set(CONVERT ${emu} ${CONVERT})
if(NOT EXISTS ${STORIES_DIR}/stories260K.bin)
  message(STATUS "stories260K not found in ${STORIES_DIR}: tests that need it will skip")
  return()
endif()
get_filename_component(dir ${OUT} DIRECTORY)
file(MAKE_DIRECTORY ${dir})
execute_process(COMMAND ${CONVERT} --from llama2c --tokenizer ${STORIES_DIR}/tok512.bin
                        ${STORIES_DIR}/stories260K.bin ${OUT} RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "tinyai-convert failed (${rc})")
endif()
