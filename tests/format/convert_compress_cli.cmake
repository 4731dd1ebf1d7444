# tinyai-convert --compress: zstd writes a file the loader opens (through
# tinyai-inspect) and reports what it compressed; bad values are usage errors
# (exit 2). Run by ctest as convert_compress_cli with CONVERT, INSPECT, OUT_DIR
# and EMULATOR (space-separated, empty in a native build: runs cross-built
# tools). Each run through tests/tools/cli_common.cmake's expect_run, with its
# timeout for hangs (these runs took at most 98 ms in release and 395 ms
# under ASan, loaded).
include(${CMAKE_CURRENT_LIST_DIR}/../tools/cli_common.cmake)
set(spec dim=32,hidden=64,layers=2,heads=4,kv_heads=2,vocab=300,seq_len=16,shared=0)

function(expect_opens file)
  expect_run(RC 0 COMMAND ${INSPECT} ${file})
  set(CLI_FAILURES ${CLI_FAILURES} PARENT_SCOPE)
endfunction()

expect_run(RC 0 EXPECT "compressed (zstd level 3)" COMMAND ${CONVERT} --compress zstd:3 --synthetic ${spec} ${OUT_DIR}/zstd3.tmai)
expect_opens(${OUT_DIR}/zstd3.tmai)
expect_run(RC 0 EXPECT "compressed (zstd level 3)" COMMAND ${CONVERT} --synthetic ${spec} --compress zstd ${OUT_DIR}/zstd.tmai)
expect_opens(${OUT_DIR}/zstd.tmai)
expect_run(RC 0 EXPECT "0 compressed (none)" COMMAND ${CONVERT} --compress none --synthetic ${spec} ${OUT_DIR}/none.tmai)
expect_opens(${OUT_DIR}/none.tmai)
file(SIZE ${OUT_DIR}/zstd3.tmai zstd_size)
file(SIZE ${OUT_DIR}/none.tmai none_size)
if(NOT zstd_size LESS none_size)
  cli_fail("the zstd file (${zstd_size} bytes) is not smaller than the plain one (${none_size})")
endif()

foreach(bad lz4 zstd:0 zstd:20 zstd: zstd:3x zstdx ZSTD)
  expect_usage_error("--compress" ${CONVERT} --compress ${bad} --synthetic ${spec} ${OUT_DIR}/bad.tmai)
endforeach()
expect_usage_error("--compress needs a value" ${CONVERT} --synthetic ${spec} ${OUT_DIR}/bad.tmai --compress)
if(EXISTS ${OUT_DIR}/bad.tmai)
  cli_fail("a usage error still wrote ${OUT_DIR}/bad.tmai")
endif()
cli_finish()
