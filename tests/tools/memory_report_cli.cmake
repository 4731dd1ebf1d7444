# --memory-report and --memory-trace in tinyai-generate, tinyai-bench and
# tinyai-eval, and tinyai-memplot drawing a trace: the report names
# peak_bytes and peak_rss_bytes, its snapshots go through every stage in
# order (open, index, plan, warmup, first_token, close), TinyAI's account
# comes back to what it was before the model opened (every allocation went
# through the recording allocator and was given back), the KV cache's
# touched bytes never pass its reserved ones; the trace has a row per token;
# memplot refuses what is not a trace by name.
# Run by ctest as tools_memory_report_cli with GENERATE, BENCH, EVAL, MEMPLOT,
# CONVERT, OUT_DIR and EMULATOR.
include(${CMAKE_CURRENT_LIST_DIR}/cli_common.cmake)
cmake_policy(SET CMP0054 NEW)

set(model ${OUT_DIR}/tiny.tmai)
expect_run(RC 0 COMMAND ${CONVERT} --synthetic dim=32,hidden=64,layers=2,heads=2,kv_heads=1,vocab=300,seq_len=64
           ${model})

# Reads a report; checks what every report holds. Sets STAGES (the
# snapshots' stage names in order) and TOKEN_ROWS (snapshots of stage tokens).
function(check_report path tool)
  if(NOT EXISTS ${path})
    cli_fail("${tool}: no report at ${path}")
    set(CLI_FAILURES ${CLI_FAILURES} PARENT_SCOPE)
    return()
  endif()
  file(READ ${path} json)
  string(JSON name ERROR_VARIABLE bad GET "${json}" tool)
  if(bad OR NOT name STREQUAL "${tool}")
    cli_fail("${path}: not ${tool}'s report (${bad}): ${json}")
  endif()
  string(JSON completed GET "${json}" completed)
  string(JSON peak GET "${json}" peak_bytes)
  string(JSON peak_rss GET "${json}" peak_rss_bytes)
  if(NOT completed STREQUAL "ON" AND NOT completed STREQUAL "true")
    cli_fail("${path}: completed is ${completed}")
  endif()
  if(NOT peak GREATER 0 OR NOT peak_rss GREATER peak)
    cli_fail("${path}: peak_bytes ${peak}, peak_rss_bytes ${peak_rss} (the process holds TinyAI's and its own)")
  endif()
  string(JSON before GET "${json}" before_open total_bytes)
  string(JSON count LENGTH "${json}" snapshots)
  set(stages "")
  set(token_rows 0)
  math(EXPR last "${count} - 1")
  foreach(i RANGE ${last})
    string(JSON stage GET "${json}" snapshots ${i} stage)
    string(JSON reserved GET "${json}" snapshots ${i} kv_reserved_bytes)
    string(JSON touched GET "${json}" snapshots ${i} kv_touched_bytes)
    string(JSON total GET "${json}" snapshots ${i} total_bytes)
    if(touched GREATER reserved)
      cli_fail("${path}: snapshot ${i} (${stage}) touched ${touched} KV bytes of ${reserved} reserved")
    endif()
    if(total GREATER peak)
      cli_fail("${path}: snapshot ${i} (${stage}) holds ${total} bytes, past peak_bytes ${peak}")
    endif()
    if(stage STREQUAL "tokens")
      math(EXPR token_rows "${token_rows} + 1")
    else()
      list(APPEND stages ${stage})
    endif()
  endforeach()
  string(JSON total GET "${json}" snapshots ${last} total_bytes)
  if(NOT total EQUAL before)
    cli_fail("${path}: TinyAI holds ${total} bytes after closing, ${before} before opening")
  endif()
  set(STAGES "${stages}" PARENT_SCOPE)
  set(TOKEN_ROWS ${token_rows} PARENT_SCOPE)
  set(CLI_FAILURES ${CLI_FAILURES} PARENT_SCOPE)
endfunction()

# ---- tinyai-generate ------------------------------------------------------------------
expect_run(RC 0 COMMAND ${GENERATE} -m ${model} -p "Once upon a time" -n 40 --quiet
           --memory-report ${OUT_DIR}/generate.json --memory-trace ${OUT_DIR}/generate.csv)
check_report(${OUT_DIR}/generate.json tinyai-generate)
if(NOT STAGES STREQUAL "open;index;plan;warmup;first_token;close;close")
  cli_fail("tinyai-generate's stages: ${STAGES}")
endif()
# The trace: a row before the model opened, one per stage, one per position.
file(STRINGS ${OUT_DIR}/generate.csv rows)
list(LENGTH rows n)
list(GET rows 0 header)
if(NOT header MATCHES "^ms,stage,tokens,total_bytes,runtime,model,weights,kv,activations,scratch,text,")
  cli_fail("the trace's header: ${header}")
endif()
if(n LESS 40)
  cli_fail("the trace has ${n} rows for 40 tokens")
endif()
# The report alone: every 16 positions.
expect_run(RC 0 COMMAND ${GENERATE} -m ${model} -p "Once upon a time" -n 40 --quiet
           --memory-report ${OUT_DIR}/generate16.json)
check_report(${OUT_DIR}/generate16.json tinyai-generate)
if(TOKEN_ROWS LESS 2 OR TOKEN_ROWS GREATER 4)
  cli_fail("every 16 positions over about 45: ${TOKEN_ROWS} token snapshots")
endif()
# Under a limit, TinyAI's accounted peak stays inside it: at the model's
# least limit (as the refusal of 1 byte names it: "--mem-limit N"), where
# TinyAI holds most of it, and at 2M.
execute_process(COMMAND ${TOOL_EMULATOR} ${GENERATE} -m ${model} -p "Once upon a time" -n 8 --mem-limit 1
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
string(REGEX MATCH "to fit: --mem-limit ([0-9]+)" found "${err}")
set(least ${CMAKE_MATCH_1})
if(NOT rc EQUAL 1 OR NOT least)
  cli_fail("--mem-limit 1: exit status ${rc}, no least limit in: ${err}")
  set(least 2097152)
endif()
foreach(limit ${least} 2097152)
  expect_run(RC 0 COMMAND ${GENERATE} -m ${model} -p "Once upon a time" -n 8 --quiet --mem-limit ${limit}
             --memory-report ${OUT_DIR}/limited.json)
  check_report(${OUT_DIR}/limited.json tinyai-generate)
  file(READ ${OUT_DIR}/limited.json json)
  string(JSON peak GET "${json}" peak_bytes)
  if(peak GREATER limit)
    cli_fail("--mem-limit ${limit}: TinyAI held ${peak} bytes")
  endif()
  math(EXPR half "${least} / 2")
  if(limit EQUAL least AND NOT peak GREATER half)
    cli_fail("--mem-limit ${limit}: TinyAI held ${peak} bytes, not most of its least limit: not its whole account")
  endif()
endforeach()

# ---- tinyai-bench and tinyai-eval -------------------------------------------------------
expect_run(RC 0 COMMAND ${BENCH} -m ${model} --prompt 8 --gen 8 --no-probe --json
           --memory-report ${OUT_DIR}/bench.json)
check_report(${OUT_DIR}/bench.json tinyai-bench)
if(NOT STAGES STREQUAL "open;index;plan;warmup;close;close")
  cli_fail("tinyai-bench's stages: ${STAGES}")
endif()
expect_usage_error("--probe runs none" ${BENCH} --probe --memory-report ${OUT_DIR}/probe.json)
expect_run(RC 0 COMMAND ${EVAL} --ref ${model} ${model} --tokens 32 --sequence 16 --kv-type int8
           --memory-report ${OUT_DIR}/eval.json)
check_report(${OUT_DIR}/eval.json tinyai-eval)
if(NOT STAGES STREQUAL "open;index;open;index;plan;warmup;plan;warmup;close;close;close;close")
  cli_fail("tinyai-eval's stages: ${STAGES}")
endif()

# ---- Outputs that cannot be written: refused before the run --------------------------
# (nothing written, the model untouched)
expect_run(RC 1 EXPECT "--memory-report: " STDOUT_EMPTY COMMAND ${GENERATE} -m ${model} -p Once --memory-report
           ${OUT_DIR}/no/such/dir/r.json)
expect_run(RC 1 EXPECT "--memory-trace: " STDOUT_EMPTY COMMAND ${GENERATE} -m ${model} -p Once --memory-trace
           ${OUT_DIR})
file(SIZE ${model} before)
expect_usage_error("--memory-report '${model}' is the input" ${GENERATE} -m ${model} -p Once --memory-report
                   ${model})
expect_usage_error("name one file" ${GENERATE} -m ${model} -p Once --memory-report ${OUT_DIR}/same
                   --memory-trace ${OUT_DIR}/same)
file(SIZE ${model} after)
if(NOT before EQUAL after)
  cli_fail("the model changed size from ${before} to ${after}")
endif()

# ---- tinyai-memplot ---------------------------------------------------------------------
expect_run(RC 0 COMMAND ${MEMPLOT} ${OUT_DIR}/generate.csv)
if(NOT EXISTS ${OUT_DIR}/generate.svg)
  cli_fail("tinyai-memplot generate.csv wrote no generate.svg")
else()
  file(READ ${OUT_DIR}/generate.svg svg)
  foreach(text "<svg" "RSS (OS), most" "TinyAI's account, most" ">weights<" ">first_token @" "</svg>")
    string(FIND "${svg}" "${text}" at)
    if(at EQUAL -1)
      cli_fail("the picture lacks '${text}'")
    endif()
  endforeach()
endif()
expect_run(RC 0 COMMAND ${MEMPLOT} ${OUT_DIR}/generate.csv -o ${OUT_DIR}/named.svg --title "a title")
if(NOT EXISTS ${OUT_DIR}/named.svg)
  cli_fail("tinyai-memplot -o named.svg wrote nothing")
endif()
expect_runtime_error(TINYAI_ERR_FILE_NOT_FOUND "cannot read the trace '${OUT_DIR}/missing.csv'" ${MEMPLOT}
                     ${OUT_DIR}/missing.csv)
expect_usage_error("-o '${OUT_DIR}/generate.csv' is the input" ${MEMPLOT} ${OUT_DIR}/generate.csv -o
                   ${OUT_DIR}/generate.csv)
file(WRITE ${OUT_DIR}/other.csv "a,b,c\n1,2,3\n")
expect_runtime_error(TINYAI_ERR_BAD_FORMAT "has no column 'ms': not a --memory-trace file" ${MEMPLOT}
                     ${OUT_DIR}/other.csv)
file(READ ${OUT_DIR}/generate.csv trace)
string(REGEX REPLACE "\n([0-9.]+),open," "\nsoon,open," broken "${trace}")
file(WRITE ${OUT_DIR}/broken.csv "${broken}")
expect_runtime_error(TINYAI_ERR_BAD_FORMAT "ms is 'soon', not a number" ${MEMPLOT} ${OUT_DIR}/broken.csv)
file(WRITE ${OUT_DIR}/empty.csv "")
expect_runtime_error(TINYAI_ERR_BAD_FORMAT "is empty" ${MEMPLOT} ${OUT_DIR}/empty.csv)
expect_usage_error("a trace is required" ${MEMPLOT} --title x)
cli_finish()
