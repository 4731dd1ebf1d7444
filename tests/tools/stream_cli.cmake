# tinyai-bench-stream (tools/bench/stream_bench.cc) on small matrices: a
# kernel pass and a read pass per dtype and round with their ratio, for the
# rows and the panels layouts and a super-block dtype (dtypes by tinyai-convert's
# names, GGUF's among them); every bad option
# refused with exit status 2, naming it, and nothing on stdout.
# Run by ctest as tools_stream_cli with STREAM, OUT_DIR and EMULATOR.
include(${CMAKE_CURRENT_LIST_DIR}/cli_common.cmake)

set(S ${STREAM} --scale 8 --mib 2 --rounds 2)
expect_run(RC 0 STDOUT_HAS "2 threads, 2 rounds" COMMAND ${S} --threads 2 --dtype f32 --dtype q4_g32 --dtype q8_g32)
foreach(dtype f32 q4_g32 q8_g32)
  if(NOT RUN_OUT MATCHES "${dtype} +(rows|panels), [0-9]+ layers")
    cli_fail("no line for ${dtype}: ${RUN_OUT}")
  endif()
endforeach()
string(REGEX MATCHALL "kernel / read [0-9.]+  \\( [0-9.]+ [0-9.]+ \\)" ratios "${RUN_OUT}")
list(LENGTH ratios n)
if(NOT n EQUAL 3)
  cli_fail("expected a ratio with both rounds for each of 3 dtypes: ${RUN_OUT}")
endif()
expect_run(RC 0 STDOUT_HAS "1 threads, 1 rounds" "q4_k " "q4_g32 " "kernel / read"
           COMMAND ${STREAM} --scale 2 --mib 1 --rounds 1 --threads 1 --dtype q4_k --dtype Q4_0)

expect_usage_error("--dtype takes f32, f16" ${STREAM} --dtype q9)
expect_usage_error("--threads: 0 is out of range 1..64" ${STREAM} --threads 0)
expect_usage_error("--rounds: '1x' is not an integer (allowed 1..100)" ${STREAM} --rounds 1x)
expect_usage_error("--mib: 0 is out of range 1..65536" ${STREAM} --mib 0)
expect_usage_error("--scale 3: give 1, 2, 4 or 8" ${STREAM} --scale 3)
expect_usage_error("q4_k rows hold whole blocks of 256 values: --scale 4 leaves rows of 1408; give --scale 1 or 2"
                   ${STREAM} --dtype q4_k --scale 4)
expect_usage_error("no kernel table 'nope' on this CPU" ${STREAM} --kernels nope)
expect_usage_error("--rounds needs a value" ${STREAM} --rounds)
expect_usage_error("unknown option --fast" ${STREAM} --fast)
expect_usage_error("unexpected argument extra" ${STREAM} extra)

cli_finish()
