# Numbers and sizes on the command line: each is parsed with its range in one
# place (tools/common/cli.h), the same way in every tool. A bad value - one
# that would wrap or be cut (-t 4294967297 was 1 thread), is negative, junk,
# or outside what the library accepts - is a usage error (exit 2) naming the
# flag, the value and the allowed range, with nothing on stdout; a flag
# several tools share has one rule (tinyai-bench took --cache 0, which
# tinyai-generate refused). Sizes take K, M and G (binary) with decimals,
# rounded to a whole byte.
# Run by ctest as tools_numbers_cli with CONVERT, GENERATE, INSPECT, BENCH,
# ARENA (empty without the bare-metal build), OUT_DIR and EMULATOR.
include(${CMAKE_CURRENT_LIST_DIR}/cli_common.cmake)

set(model ${OUT_DIR}/tiny.tmai)
expect_run(RC 0 COMMAND ${CONVERT} --synthetic dim=16,hidden=32,layers=2,heads=2,kv_heads=1,vocab=300,seq_len=32
           ${model})

# ---- Integers: flag, value and range named --------------------------------------
set(G ${GENERATE} -m ${model} -p Once)
expect_usage_error("-t: 4294967297 is out of range 0..256" ${G} -t 4294967297)
expect_usage_error("-t: -1 is out of range 0..256" ${G} -t -1)
expect_usage_error("-t: '4x' is not an integer (allowed 0..256" ${G} -t 4x)
expect_usage_error("-t: '0x4' is not an integer" ${G} -t 0x4)
expect_usage_error("-t: '+4' is not an integer" ${G} -t +4)
expect_usage_error("--context: -5 is out of range 0..1048576" ${G} --context -5)
expect_usage_error("--context: 4294967296 is out of range 0..1048576" ${G} --context 4294967296)
expect_usage_error("--max-new: -1 is out of range 0..2147483647" ${G} --max-new -1)
expect_usage_error("-n: 2147483648 is out of range 0..2147483647" ${G} -n 2147483648)
expect_usage_error("--steps: 99999999999999999999 is out of range 0..2147483647" ${G} --steps 99999999999999999999)
expect_usage_error("--seed: '-1' is not a number (allowed 0..18446744073709551615)" ${G} --seed -1)
expect_usage_error("--seed: 18446744073709551616 is out of range" ${G} --seed 18446744073709551616)
expect_usage_error("--temp: 'nan' is not a number" ${G} --temp nan)
expect_usage_error("--temp: 'inf' is not a number" ${G} --temp inf)
expect_usage_error("--temp: -0.5 is out of range" ${G} --temp -0.5)
expect_usage_error("--temp: 1e999 is out of range" ${G} --temp 1e999)
expect_usage_error("--top-p: 0 is out of range (0, 1" ${G} --top-p 0)
expect_usage_error("--top-p: 1.5 is out of range (0, 1" ${G} --top-p 1.5)
expect_usage_error("--top-k: -1 is out of range 0..2147483647; 0 = off" ${G} --top-k -1)
expect_usage_error("--min-p: 1.5 is out of range [0, 1]" ${G} --min-p 1.5)
expect_usage_error("--repeat-penalty: 0 is out of range (0, " ${G} --repeat-penalty 0)
expect_usage_error("--repeat-last-n: 4097 is out of range 1..4096" ${G} --repeat-last-n 4097)
expect_usage_error("--stop: at most 16 stop strings" ${G} --stop a --stop b --stop c --stop d --stop e --stop f
                   --stop g --stop h --stop i --stop j --stop k --stop l --stop m --stop n --stop o --stop p --stop q)
expect_run(RC 0 COMMAND ${G} -n 8 --temp 0.7 --top-k 40 --min-p 0.05 --repeat-penalty 1.1 --repeat-last-n 32
           --stop "zzz" -s 5 --quiet)
expect_usage_error("--prefetch-threads: 65 is out of range 0..64" ${G} --prefetch-threads 65)
expect_usage_error("--shape ROWS: 99999999999 is out of range 1..2147483647" ${INSPECT} ${model} --shape 99999999999:1)
expect_usage_error("--shape ROWS: 0 is out of range 1..2147483647" ${INSPECT} ${model} --shape 0:4)
expect_usage_error("--shape CONTEXT: -1 is out of range 0..1048576" ${INSPECT} ${model} --shape 1:-1)
expect_usage_error("--shape: at most 8 shapes" ${INSPECT} ${model} --shape 1 --shape 2 --shape 3 --shape 4 --shape 5
                   --shape 6 --shape 7 --shape 8 --shape 9)
expect_usage_error("--batch: 0 is out of range 1..2147483647" ${INSPECT} ${model} --batch 0)
expect_usage_error("--batch: 4294967297 is out of range 1..2147483647" ${INSPECT} ${model} --batch 4294967297)
expect_usage_error("--prompt: 0 is out of range 1..1048576" ${BENCH} -m ${model} --prompt 0)
expect_usage_error("--gen: 4294967297 is out of range 1..1048576" ${BENCH} -m ${model} --gen 4294967297)
expect_usage_error("--probe-mib: 15 is out of range 16.." ${BENCH} --probe --probe-mib 15)
expect_usage_error("--compress zstd:LEVEL: 4294967297 is out of range 1..19" ${CONVERT} --compress zstd:4294967297
                   --synthetic dim=16,hidden=32,layers=1,heads=2,vocab=300,seq_len=8 ${OUT_DIR}/never.tmai)
if(EXISTS ${OUT_DIR}/never.tmai)
  cli_fail("a usage error wrote ${OUT_DIR}/never.tmai")
endif()

# ---- One rule per shared flag: the same value, the same answer in every tool ---------
# Each command is one string, its words joined by '|'.
string(REPLACE ";" "|" g "${G}")
set(inspect "${INSPECT}|${model}")
set(bench "${BENCH}|-m|${model}")
set(eval "${EVAL}|--ref|${model}|${model}")
set(quantize "${QUANTIZE}|${model}|${OUT_DIR}/never.tmai")
set(prune "${PRUNE}|${model}|${OUT_DIR}/never.tmai")
set(takes_threads "${g}" "${inspect}" "${bench}" "${eval}" "${quantize}" "${prune}")
set(takes_context "${g}" "${inspect}" "${bench}")
set(takes_mem_limit "${g}" "${inspect}" "${bench}" "${eval}")
set(takes_cache "${g}" "${bench}")
set(takes_prefetch "${g}" "${bench}")
if(ARENA)
  list(APPEND takes_context "${ARENA}|${model}")
  list(APPEND takes_mem_limit "${ARENA}|${model}")
endif()
foreach(cmd IN LISTS takes_threads)
  string(REPLACE "|" ";" cmd "${cmd}")
  expect_run(RC 2 EXPECT "-t: 257 is out of range 0..256" "0 = one per core" "usage:" STDOUT_EMPTY COMMAND ${cmd} -t 257)
endforeach()
foreach(cmd IN LISTS takes_context)
  string(REPLACE "|" ";" cmd "${cmd}")
  expect_run(RC 2 EXPECT "--context: 1048577 is out of range 0..1048576" "0 = the model's seq_len" "usage:" STDOUT_EMPTY
             COMMAND ${cmd} --context 1048577)
  # -c is --context (llama.cpp's name), in every tool that takes it.
  expect_run(RC 2 EXPECT "-c: 1048577 is out of range 0..1048576" STDOUT_EMPTY COMMAND ${cmd} -c 1048577)
endforeach()
expect_run(RC 0 STDOUT_HAS "\"context\":16" COMMAND ${INSPECT} ${model} -c 16 --json)
# The model as -m MODEL (or --model) in every tool, or alone: the same run.
set(alone "${RUN_OUT}")
foreach(flag -m --model)
  expect_run(RC 0 COMMAND ${INSPECT} ${flag} ${model} -c 16 --json)
  if(NOT RUN_OUT STREQUAL alone)
    cli_fail("tinyai-inspect ${flag} MODEL differs from MODEL alone:\n${RUN_OUT}\n${alone}")
  endif()
endforeach()
foreach(cmd "${GENERATE}|-p|Once|-n|2|-q" "${BENCH}|--no-probe|-p|2|-n|2" "${EVAL}|--ref|${model}|--tokens|4"
            "${QUANTIZE}|--eval|0|-q|--all|q8_0|${OUT_DIR}/m-q8.tmai" "${PRUNE}|--eval|0|-q|${OUT_DIR}/m-pruned.tmai")
  string(REPLACE "|" ";" cmd "${cmd}")
  expect_run(RC 0 COMMAND ${cmd} -m ${model})
  expect_usage_error("give the model once" ${cmd} -m ${model} -m ${model})
endforeach()
if(ARENA)
  expect_run(RC 0 COMMAND ${ARENA} -m ${model})
endif()
foreach(cmd IN LISTS takes_mem_limit)
  string(REPLACE "|" ";" cmd "${cmd}")
  expect_usage_error("--mem-limit: 0 is out of range 1.." ${cmd} --mem-limit 0)
  expect_usage_error("--mem-limit: -1M is negative" ${cmd} --mem-limit -1M)
endforeach()
foreach(cmd IN LISTS takes_cache)
  string(REPLACE "|" ";" cmd "${cmd}")
  expect_usage_error("--cache: 0 is out of range 1.." ${cmd} --cache 0)
endforeach()
foreach(cmd IN LISTS takes_prefetch)
  string(REPLACE "|" ";" cmd "${cmd}")
  expect_usage_error("--prefetch-threads: -1 is out of range 0..64" ${cmd} --prefetch-threads -1)
  expect_usage_error("--direct-reads takes auto (while the weight cache streams), on or off, got 'yes'"
                     ${cmd} --direct-reads yes)
endforeach()
# Under a cache cap below the weights, tinyai-bench reads them past the page
# cache where the file system allows (auto), and not when told off.
expect_run(RC 0 STDOUT_HAS "\"direct_reads\":\"off\"" COMMAND ${BENCH} -m ${model} --prompt 2 --gen 2 --no-probe --json
           --cache 64K --direct-reads off)
string(REGEX MATCH "\"decode_cache\":{[^}]*\"bytes_read_direct\":0," buffered "${RUN_OUT}")
if(NOT buffered)
  message(FATAL_ERROR "--direct-reads off read directly:\n${RUN_OUT}")
endif()
# tinyai-generate --json says the same of its cache: no byte read directly
# when told off, and how many loaders took loads.
expect_run(RC 0 STDOUT_HAS "\"bytes_read_direct\":0," "\"prefetch_workers\":"
           COMMAND ${G} -n 2 --json --cache 64K --direct-reads off)
set(takes_kv_type "${g}" "${bench}" "${inspect}")
foreach(cmd IN LISTS takes_kv_type)
  string(REPLACE "|" ";" cmd "${cmd}")
  expect_usage_error("--kv-type takes f32, f16, int8 or auto, got 'f8'" ${cmd} --kv-type f8)
endforeach()
# tinyai-bench runs the KV cache type asked for and counts its bytes per token.
expect_run(RC 0 STDOUT_HAS "\"kv_type\":\"f16\"" COMMAND ${BENCH} -m ${model} --prompt 2 --gen 2 --no-probe --json --kv-type f16)
# --huge-pages runs the model from a copy in memory: the same greedy run, the
# copy's size reported (how much of it the kernel put in huge pages depends
# on the host's THP setting, so only its presence is checked).
expect_run(RC 0 STDOUT_HAS "\"huge_pages\":false" COMMAND ${BENCH} -m ${model} --prompt 2 --gen 2 --no-probe --json)
string(REGEX MATCH "\"bytes_per_token\":[0-9]+" mapped_bytes "${RUN_OUT}")
file(SIZE ${model} model_size)
expect_run(RC 0 STDOUT_HAS "\"huge_pages\":true,\"model_file_bytes\":${model_size},\"model_huge_page_bytes\":"
           COMMAND ${BENCH} -m ${model} --prompt 2 --gen 2 --no-probe --json --huge-pages)
if(NOT RUN_OUT MATCHES "${mapped_bytes},")
  cli_fail("tinyai-bench --huge-pages counted other bytes per token than the mapped run (${mapped_bytes}):\n${RUN_OUT}")
endif()
expect_runtime_error(TINYAI_ERR_FILE_NOT_FOUND "cannot read the model '${OUT_DIR}/no-such.tmai'"
                     ${BENCH} -m ${OUT_DIR}/no-such.tmai --no-probe --huge-pages)
# Bytes per decoded token of a 4-bit model whose classifier is not its
# embedding: every weight (57,216) but the table (18,432) except one row (36),
# plus 3 positions of the KV cache (18,280 bytes for 32). A table counted as
# vocab x dim floats once made this 2^64 - 5,120,000.
set(separate ${OUT_DIR}/separate-q4.tmai)
expect_run(RC 0 COMMAND ${CONVERT} --dtype q4_g32 --synthetic dim=64,hidden=96,layers=1,heads=2,vocab=512,seq_len=32,seed=3,shared=0
           ${separate})
unset(ENV{TINYAI_KERNELS})  # the table this CPU runs best, as a user without the variable gets
expect_run(RC 0 STDOUT_HAS "\"bytes_per_token\":40533," COMMAND ${BENCH} -m ${separate} --prompt 2 --gen 2 --no-probe --json)
if(NOT RUN_OUT MATCHES "\"kernels\":\"([^\"]+)\"")
  cli_fail("tinyai-bench --json names no kernel table:\n${RUN_OUT}")
endif()
set(best ${CMAKE_MATCH_1})
# TINYAI_KERNELS names the kernel table to run (src/kernels/dispatch.cc):
# the reference on request, on every target; a name this CPU has no table
# for changes nothing (the best table runs), and the report names the table
# that ran.
set(ENV{TINYAI_KERNELS} ref)
expect_run(RC 0 STDOUT_HAS "\"kernels\":\"ref\"" COMMAND ${BENCH} -m ${separate} --prompt 2 --gen 2 --no-probe --json)
set(ENV{TINYAI_KERNELS} no-such-table)
expect_run(RC 0 STDOUT_HAS "\"kernels\":\"${best}\"" COMMAND ${BENCH} -m ${separate} --prompt 2 --gen 2 --no-probe
           --json)
unset(ENV{TINYAI_KERNELS})

# ---- Sizes -----------------------------------------------------------------------
# What a size means: tinyai-inspect --json reports the limit in bytes.
foreach(case "1.5M=1572864" "1.5m=1572864" "1.5MiB=1572864" "2G=2147483648" "0.25g=268435456" "64M=67108864"
             "1048576=1048576" "1048576B=1048576" "1024.5K=1049088" "64MB=67108864" "64mb=67108864" "2GB=2147483648"
             "512KB=524288" "1.5gib=1610612736")
  string(REPLACE "=" ";" pair "${case}")
  list(GET pair 0 size)
  list(GET pair 1 bytes)
  expect_run(RC 0 STDOUT_HAS "\"mem_limit_bytes\":${bytes}," COMMAND ${INSPECT} ${model} --json --mem-limit ${size})
endforeach()
# Below the model's minimum: nothing fits (exit status 1), and the limit is
# still reported exactly, rounded to a whole byte.
foreach(case "3K=3072" "1.0001K=1024" "1.0009K=1025" "0.5K=512" "1.5=2" "1.4=1" "0.001K=1")
  string(REPLACE "=" ";" pair "${case}")
  list(GET pair 0 size)
  list(GET pair 1 bytes)
  expect_run(RC 1 EXPECT "TINYAI_ERR_RESOURCE_EXHAUSTED: nothing fits --mem-limit ${bytes} bytes"
             STDOUT_HAS "\"mem_limit_bytes\":${bytes}," COMMAND ${INSPECT} ${model} --json --mem-limit ${size})
endforeach()
expect_usage_error("--mem-limit: 0.0001K (0 bytes) is out of range 1.." ${INSPECT} ${model} --mem-limit 0.0001K)
foreach(bad "M" "1.M" ".5M" "1.5X" "1e3" "1,5M" " 1M" "1M " "0x10" "1.5.5M" "1MBB" "1T" "1TB" "1Mi" "1iB" "MB")
  expect_usage_error("--mem-limit: '${bad}' is not a size" ${INSPECT} ${model} --mem-limit "${bad}")
endforeach()
expect_usage_error("--mem-limit: 18446744073709551616 is out of range" ${INSPECT} ${model} --mem-limit 18446744073709551616)
expect_usage_error("--mem-limit: 17179869184G is out of range" ${INSPECT} ${model} --mem-limit 17179869184G)
expect_usage_error("--mem-limit: 17179869183.9999999999G is out of range" ${INSPECT} ${model} --mem-limit 17179869183.9999999999G)
expect_usage_error("--cache: -0.5K is negative" ${GENERATE} -m ${model} -p Once --cache -0.5K)
# An empty value.
execute_process(COMMAND ${TOOL_EMULATOR} ${INSPECT} ${model} --mem-limit ""
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT ${CLI_TIMEOUT})
string(FIND "${err}" "--mem-limit: '' is not a size" at)
if(NOT rc EQUAL 2 OR at EQUAL -1 OR NOT out STREQUAL "")
  cli_fail("tinyai-inspect --mem-limit '': exit ${rc}, expected 2 with '--mem-limit: '' is not a size':\n${out}${err}")
endif()

cli_finish()
