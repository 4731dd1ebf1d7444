# tinyai-convert --compress: zstd writes a file the loader opens (through
# tinyai-inspect) and reports what it compressed; bad values are usage errors
# (exit 2). Run by ctest as convert_compress_cli with CONVERT, INSPECT, OUT_DIR
# and EMULATOR (space-separated, empty in a native build: runs cross-built tools).
separate_arguments(emu UNIX_COMMAND "${EMULATOR}")
set(CONVERT ${emu} ${CONVERT})
set(INSPECT ${emu} ${INSPECT})
file(REMOVE_RECURSE ${OUT_DIR})
file(MAKE_DIRECTORY ${OUT_DIR})
set(spec dim=32,hidden=64,layers=2,heads=4,kv_heads=2,vocab=300,seq_len=16,shared=0)

# Seconds one run may take: a timeout is for hangs, never for a slow machine,
# so 10x the slowest run measured on a 2-core machine loaded by other builds
# (0.1 s in release, 0.4 s under ASan; a tinyai-convert --synthetic of this
# size took 1.9 s under qemu-aarch64). -DCLI_TIMES=FILE appends each run's
# milliseconds and command to FILE.
set(RUN_TIMEOUT 20)
function(timed_run)
  string(TIMESTAMP started "%s%f")
  execute_process(COMMAND ${ARGN} TIMEOUT ${RUN_TIMEOUT} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  string(TIMESTAMP ended "%s%f")
  if(CLI_TIMES)
    math(EXPR ms "(${ended} - ${started}) / 1000")
    string(REPLACE ";" " " what "${ARGN}")
    file(APPEND ${CLI_TIMES} "${ms} ${what}\n")
  endif()
  set(rc "${rc}" PARENT_SCOPE)
  set(out "${out}" PARENT_SCOPE)
  set(err "${err}" PARENT_SCOPE)
endfunction()

function(run_convert expect_rc expect_text)
  timed_run(${CONVERT} ${ARGN})
  if(NOT rc EQUAL expect_rc)
    message(FATAL_ERROR "tinyai-convert ${ARGN}: exit ${rc}, expected ${expect_rc}\n${out}${err}")
  endif()
  string(FIND "${out}${err}" "${expect_text}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "tinyai-convert ${ARGN}: output lacks '${expect_text}':\n${out}${err}")
  endif()
endfunction()

function(expect_opens file)
  timed_run(${INSPECT} ${file})
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "tinyai-inspect ${file}: exit ${rc}\n${out}${err}")
  endif()
endfunction()

run_convert(0 "compressed (zstd level 3)" --compress zstd:3 --synthetic ${spec} ${OUT_DIR}/zstd3.tmai)
expect_opens(${OUT_DIR}/zstd3.tmai)
run_convert(0 "compressed (zstd level 3)" --synthetic ${spec} --compress zstd ${OUT_DIR}/zstd.tmai)
expect_opens(${OUT_DIR}/zstd.tmai)
run_convert(0 "0 compressed (none)" --compress none --synthetic ${spec} ${OUT_DIR}/none.tmai)
expect_opens(${OUT_DIR}/none.tmai)
file(SIZE ${OUT_DIR}/zstd3.tmai zstd_size)
file(SIZE ${OUT_DIR}/none.tmai none_size)
if(NOT zstd_size LESS none_size)
  message(FATAL_ERROR "the zstd file (${zstd_size} bytes) is not smaller than the plain one (${none_size})")
endif()

foreach(bad lz4 zstd:0 zstd:20 zstd: zstd:3x zstdx ZSTD)
  run_convert(2 "usage:" --compress ${bad} --synthetic ${spec} ${OUT_DIR}/bad.tmai)
endforeach()
run_convert(2 "--compress needs a value" --synthetic ${spec} ${OUT_DIR}/bad.tmai --compress)
if(EXISTS ${OUT_DIR}/bad.tmai)
  message(FATAL_ERROR "a usage error still wrote ${OUT_DIR}/bad.tmai")
endif()
