# tinyai-bench as people benchmark: -r N repetitions with their spread, -t, -p
# and -n lists (a row per combination), markdown, JSON Lines and CSV output, the
# model with or without -m, a prompt and generation that do not fit the
# context refused naming the flags (the defaults cut, and said), and the
# bandwidth probe fitted to the memory the system leaves (a --probe-mib that
# does not fit refused, never killed).
# Run by ctest as tools_bench_cli with CONVERT, BENCH, OUT_DIR and EMULATOR.
include(${CMAKE_CURRENT_LIST_DIR}/cli_common.cmake)

set(model ${OUT_DIR}/tiny.tmai)
expect_run(RC 0 COMMAND ${CONVERT} --synthetic dim=32,hidden=64,layers=2,heads=2,kv_heads=1,vocab=300,seq_len=64
           ${model})
set(B ${BENCH} -m ${model} --no-probe)

# ---- Rows and repetitions: a markdown row per test, the spread of -r ------------------
expect_run(RC 0 STDOUT_HAS "| threads | test | tokens/s |" "3 runs each: mean ± standard deviation"
           COMMAND ${B} -r 3 -t 1,2 -p 8,16 -n 4 -o md)
foreach(t 1 2)
  foreach(test pp8 pp16 tg4)
    if(NOT RUN_OUT MATCHES "\\| ${t} \\| ${test} \\| [0-9.]+ ± [0-9.]+ \\|")
      cli_fail("-o md lacks the row of -t ${t}, ${test} with its spread: ${RUN_OUT}")
    endif()
  endforeach()
endforeach()
# JSON Lines: an object per row, each with its samples.
expect_run(RC 0 COMMAND ${B} -r 2 -t 1 -p 8,16 -n 4 --json)
string(REGEX MATCHALL "\"decode_tokens_per_s_samples\":\\[[0-9.]+,[0-9.]+\\]" samples "${RUN_OUT}")
list(LENGTH samples rows)
if(NOT rows EQUAL 2)
  cli_fail("--json -r 2 with two rows: expected two objects with two samples each: ${RUN_OUT}")
endif()
# CSV: a header and a line per row; the model alone (no -m) is the model.
expect_run(RC 0 COMMAND ${BENCH} ${model} --no-probe -p 8 -n 4,6 -o csv)
string(REGEX MATCHALL "\n" lines "${RUN_OUT}")
list(LENGTH lines n_lines)
if(NOT RUN_OUT MATCHES "^model,threads,prompt_tokens,gen_tokens,repetitions,pp_tokens_per_s" OR NOT n_lines EQUAL 3)
  cli_fail("-o csv: expected a header and two lines: ${RUN_OUT}")
endif()

# ---- Nothing cut silently -----------------------------------------------------------------
expect_run(RC 1 EXPECT "-p 60 and -n 10 take 70 positions; the context holds 64" "or -c 70" STDOUT_EMPTY
           COMMAND ${B} -p 60 -n 10)
expect_run(RC 0 EXPECT "by default -p 128 and -n 128 take 256 positions; the context holds 64"
           "-p 32 -n 32 run instead" COMMAND ${B})

# ---- Usage -----------------------------------------------------------------------------------
expect_usage_error("-t: 'x' is not an integer" ${B} -t 1,x)
expect_usage_error("-p: 0 is out of range 1..1048576" ${B} -p 8,0)
expect_usage_error("-r: 0 is out of range 1..1000" ${B} -r 0)
expect_usage_error("-o takes text, md, json or csv, got 'xml'" ${B} -o xml)
expect_usage_error("record one run: give one -t, -p and -n, and -r 1" ${B} -r 2 --memory-report ${OUT_DIR}/r.json)
expect_usage_error("one model: -m MODEL or MODEL, once" ${B} ${model})

# ---- The probe fits the room it has --------------------------------------------------------
# 65536 MiB is more than half of what any machine running this leaves.
expect_run(RC 1 EXPECT "TINYAI_ERR_RESOURCE_EXHAUSTED" "--probe-mib 65536 does not fit" "or --no-probe" STDOUT_EMPTY
           COMMAND ${BENCH} --probe --probe-mib 65536)
cli_finish()
