# The KV cache options on the command line (tinyai-generate): a rolling
# window runs stories260K for 2,048 positions (four times its context) in
# the memory a 256-position run takes (peak RSS within 5%, as the OS
# measures it), in every storage type; bad values are usage errors.
# Run by ctest as tools_kv_cli with GENERATE, MODEL (stories260K.tmai),
# OUT_DIR and EMULATOR (the RSS comparison is skipped under an emulator,
# whose RSS is its own).
include(${CMAKE_CURRENT_LIST_DIR}/cli_common.cmake)

if(NOT EXISTS ${MODEL})
  message("tinyai-test-skip: ${MODEL} not found (the convert_stories260K fixture)")
  return()
endif()

# Peak RSS in MiB from tinyai-generate's report.
function(peak_rss out)
  string(REGEX MATCH "peak RSS ([0-9.]+) MiB" m "${RUN_ERR}")
  set(${out} "${CMAKE_MATCH_1}" PARENT_SCOPE)
endfunction()

expect_run(RC 0 EXPECT "stopped: max_new" COMMAND ${GENERATE} -m ${MODEL} -p "Once upon a time" -n 251 --temp 0.8 -t 1)
peak_rss(short)
foreach(type f32 f16 int8)
  expect_run(RC 0 EXPECT "stopped: max_new" "(${type}, window 64 + 4 sinks)"
             COMMAND ${GENERATE} -m ${MODEL} -p "Once upon a time" -n 2043 --temp 0.8 -t 1
                     --kv-window 64 --kv-sink 4 --kv-type ${type})
  peak_rss(long)
  string(LENGTH "${RUN_OUT}" chars)
  if(chars LESS 4000)
    cli_fail("a 2,048-position text in a window (${type}) is only ${chars} characters")
  endif()
  if(EMULATOR STREQUAL "" AND NOT short STREQUAL "" AND NOT long STREQUAL "")
    # RSS is printed with one decimal: compare long <= short * 1.05 + 0.1 (the rounding).
    execute_process(COMMAND awk "BEGIN { exit !(${long} <= ${short} * 1.05 + 0.1) }" RESULT_VARIABLE over)
    if(NOT over EQUAL 0)
      cli_fail("2,048 positions in a window (${type}) peaked at ${long} MiB, a 256-position run at ${short} MiB")
    endif()
  endif()
endforeach()

# A growable cache: the same greedy text as a cache taken whole, and the
# cache held after 40 positions is one chunk of 64 (5 layers x 4 KV heads x
# 64 x 32 bytes, keys and values, 64 tokens: 0.078 MiB) and its records,
# not 512 positions (0.629 MiB).
expect_run(RC 0 EXPECT "stopped: max_new" COMMAND ${GENERATE} -m ${MODEL} -p "Once upon a time" -n 35 -t 1)
set(whole "${RUN_OUT}")
expect_run(RC 0 EXPECT "stopped: max_new" "(f32, 512 positions, growable: held now)"
           COMMAND ${GENERATE} -m ${MODEL} -p "Once upon a time" -n 35 -t 1 --kv-growable)
string(REGEX MATCH "KV cache ([0-9.]+) MiB" m "${RUN_ERR}")
execute_process(COMMAND awk "BEGIN { exit !(${CMAKE_MATCH_1} >= 0.078 && ${CMAKE_MATCH_1} < 0.09) }" RESULT_VARIABLE off)
if(NOT off EQUAL 0)
  cli_fail("a growable cache held ${CMAKE_MATCH_1} MiB after 40 positions; one chunk is 0.078 MiB")
endif()
if(NOT RUN_OUT STREQUAL whole)
  cli_fail("--kv-growable changed the greedy text:\n${RUN_OUT}\nagainst\n${whole}")
endif()

# --kv-type auto: at int8's least limit only int8 fits (f16 and f32 are
# refused by name there); with no limit it is f32.
execute_process(COMMAND ${TOOL_EMULATOR} ${GENERATE} -m ${MODEL} -p a -n 1 -t 1 --kv-type int8 --mem-limit 1
                RESULT_VARIABLE rc ERROR_VARIABLE err OUTPUT_QUIET TIMEOUT ${CLI_TIMEOUT})
if(NOT err MATCHES "minimum of ([0-9]+)")
  cli_fail("no minimum in the refusal of a 1-byte limit (status ${rc}):\n${err}")
endif()
set(least_int8 ${CMAKE_MATCH_1})
expect_run(RC 0 EXPECT "stopped: max_new" "(int8 (auto), 512 positions)" "int8 KV cache" "chosen: with f16"
           COMMAND ${GENERATE} -m ${MODEL} -p "Once upon a time" -n 8 -t 1 --kv-type auto --mem-limit ${least_int8})
expect_run(RC 1 EXPECT "below this model's minimum"
           COMMAND ${GENERATE} -m ${MODEL} -p "Once upon a time" -n 8 -t 1 --kv-type f16 --mem-limit ${least_int8})
expect_run(RC 0 EXPECT "(f32 (auto), 512 positions)" "f32 KV cache" "the most precise choice"
           COMMAND ${GENERATE} -m ${MODEL} -p "Once upon a time" -n 8 -t 1 --kv-type auto)

# ---- Bad values --------------------------------------------------------------------------------
expect_usage_error("--kv-type takes f32, f16, int8 or auto, got 'q4'" ${GENERATE} -m ${MODEL} -p a --kv-type q4)
expect_usage_error("--kv-window" ${GENERATE} -m ${MODEL} -p a --kv-window 0)
expect_usage_error("--kv-sink goes with --kv-window" ${GENERATE} -m ${MODEL} -p a --kv-sink 4)
expect_usage_error("--kv-sink" ${GENERATE} -m ${MODEL} -p a --kv-window 8 --kv-sink -1)
expect_usage_error("--kv-growable does not go with --kv-window" ${GENERATE} -m ${MODEL} -p a --kv-growable
                   --kv-window 8)
cli_finish()
