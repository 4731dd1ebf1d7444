# Every tool answers --version (the library's version, exit 0) and -h/--help
# (exit 0, the usage on stdout) and its help names every option its parser
# takes: the options are read from the tool's source (each `a == "-x"`), so an
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
  tinyai-memplot=tools/memplot/tinyai_memplot.cc)

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
  # The options the parser takes.
  set(source "")
  foreach(s IN LISTS sources)
    if(s MATCHES "^${name}=(.*)$")
      set(source ${SOURCE_DIR}/${CMAKE_MATCH_1})
    endif()
  endforeach()
  if(NOT EXISTS "${source}")
    cli_fail("no source known for ${name}")
    continue()
  endif()
  file(READ ${source} code)
  string(REGEX MATCHALL "a == \"-[-a-zA-Z]+\"" options "${code}")
  list(LENGTH options count)
  if(count LESS 3)
    cli_fail("${source}: found only ${count} options; the parser changed shape")
  endif()
  foreach(option IN LISTS options)
    string(REGEX REPLACE "a == \"(.*)\"" "\\1" option "${option}")
    # As a word of the help: followed by a space, a comma, '=', ']' or the line's end.
    string(REGEX MATCH "(^|[^-a-zA-Z])${option}([], =\n]|$)" found "${help}")
    if(NOT found)
      cli_fail("${name} --help does not list ${option}, which its parser takes:\n${help}")
    endif()
  endforeach()
  message(STATUS "${name}: --version, -h, --help; help lists all ${count} options")
endforeach()
cli_finish()
