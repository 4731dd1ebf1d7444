# Every tool answers --version (the library's version, exit 0) and -h/--help
# (exit 0, the usage on stdout) and its help names every option its parser
# takes: the parser lists them (--list-flags, tools/common/args.h), so an
# option added without its help line fails here.
# Run by ctest as tools_help_version_cli with TOOLS (a list of NAME=PATH),
# SOURCE_DIR (the repository), VERSION (the project's), OUT_DIR and EMULATOR.
include(${CMAKE_CURRENT_LIST_DIR}/cli_common.cmake)

set(sources
  tinyai-convert=tools/convert/tinyai_convert.cc
  tinyai-eval=tools/eval/tinyai_eval.cc
  tinyai-quantize=tools/quantize/tinyai_quantize.cc
    tinyai-prune=tools/prune/tinyai_prune.cc
  tinyai-generate=tools/generate/tinyai_generate.cc
  tinyai-inspect=tools/inspect/tinyai_inspect.cc
  tinyai-bench=tools/bench/tinyai_bench.cc
  tinyai-arena=tools/arena/tinyai_arena.cc
  tinyai-memplot=tools/memplot/tinyai_memplot.cc
  tinyai-bench-stream=tools/bench/stream_bench.cc)

string(REPLACE "," ";" TOOLS "${TOOLS}")
foreach(entry IN LISTS TOOLS)
  string(REGEX REPLACE "=.*" "" name "${entry}")
  string(REGEX REPLACE "^[^=]*=" "" path "${entry}")
  foreach(version_flag --version)
    expect_run(RC 0 STDOUT_HAS "${name} (TinyAI) ${VERSION}" COMMAND ${path} ${version_flag})
    if(NOT "${RUN_ERR}" STREQUAL "")
      cli_fail("${name} --version wrote to stderr: ${RUN_ERR}")
    endif()
  endforeach()
  expect_run(RC 0 STDOUT_HAS "usage: ${name}" COMMAND ${path} -h)
  expect_run(RC 0 STDOUT_HAS "usage: ${name}" COMMAND ${path} --help)
  set(help "${RUN_OUT}")
  # The options the parser takes, as it lists them (tools/common/args.h).
  expect_run(RC 0 COMMAND ${path} --list-flags)
  string(REGEX MATCHALL "[^\n]+" options "${RUN_OUT}")
  list(LENGTH options count)
  if(count LESS 3)
    cli_fail("${name} --list-flags lists only ${count} options: ${RUN_OUT}")
  endif()
  foreach(option IN LISTS options)
    # As a word of the help: followed by a space, a comma, '=', ']', '|' or the line's end.
    string(REGEX MATCH "(^|[^-a-zA-Z])${option}([], =|\n]|$)" found "${help}")
    if(NOT found)
      cli_fail("${name} --help does not list ${option}, which its parser takes:\n${help}")
    endif()
  endforeach()
  # An unknown option is named, with the nearest the tool takes.
  expect_run(RC 2 EXPECT "unknown option --versio (did you mean --version" STDOUT_EMPTY COMMAND ${path} --versio)
  message(STATUS "${name}: --version, -h, --help; help lists all ${count} options")
endforeach()
cli_finish()
