cmake_minimum_required(VERSION 3.25)
# The layers of src/ (README, "Layout") may include only what sits below
# them, and the core never calls the public C API on itself. Fails naming
# every file and line that breaks a rule:
#
#   cmake -DSRC=<repo>/src -P tests/layering.cmake
#
# ALLOWED_<dir>: the folders (or headers) of src/ and include/ a file in
# src/<dir>/ may include, with "..." or with <...> (src/ is on the include
# path, so <model/llama.h> is checked as "model/llama.h"); FORBIDDEN_<dir>:
# headers excluded from an allowed folder. Every source file counts
# (SOURCE_EXTENSIONS), and a path with '.' or '..' in it is refused
# ("common/../model/llama.h" would pass as common/). Every folder of src/
# needs a rule. common depends on nothing but itself and the public headers
# (what it needs of the platform it declares, common/seam.h, and the port
# implements). The KV cache (kv/) multiplies with the kernels and knows no
# model; the quantizer (quant/) is encoders over the kernels' decoders and
# knows no file or model; the offline importers (import/) build files with
# the writer and read them back through the loader, and use the C API, being
# no part of the core. The scheduler runs programs and knows no model; it
# decides the runners' budgets, the cap of a weight cache they share
# included (scheduler/cache_budget.h).
# The loader serves weights and decides nothing about them (since the weight
# cache was split by concern): the panel layout and the row codec that
# converts matrices to the precisions applied to a model come from above
# (loader/row_transform.h; the models' one, model/weight_transform.h, asks
# the kernels and the quantizer, quant/, which saving a model at its
# precisions, model/save_model.h, uses too).
# The C API's calibration measures the inputs' second moments and factors
# them (quant/hessian.h). The safetensors import checks its vocabulary
# encodes with TinyAI's tokenizer (text/) as with SentencePiece.
set(ALLOWED_common    common/ tinyai/)
set(ALLOWED_port      common/ port/ tinyai/)
set(ALLOWED_format    common/ format/ port/ tinyai/)
set(ALLOWED_kernels   common/ kernels/ port/ tinyai/)
set(ALLOWED_quant     common/ kernels/ quant/ tinyai/)
set(ALLOWED_planner   common/ planner/ port/ tinyai/)
set(ALLOWED_text      common/ text/ port/ tinyai/)
set(ALLOWED_loader    common/ format/ loader/ port/ tinyai/)
set(ALLOWED_scheduler common/ loader/ planner/ port/ scheduler/ tinyai/)
set(FORBIDDEN_scheduler tinyai/llm.h)
set(ALLOWED_kv        common/ kernels/ kv/ port/ tinyai/)
set(ALLOWED_model     common/ format/ kernels/ kv/ loader/ model/ port/ quant/ scheduler/ text/ tinyai/)
set(ALLOWED_import    common/ format/ import/ kernels/ loader/ port/ quant/ text/ tinyai/)
set(ALLOWED_capi      capi/ common/ format/ kv/ loader/ model/ port/ quant/ scheduler/ text/ tinyai/)
# Folders whose code is the core: no call of a tinyaiCreate*/Open*/Close*/
# Destroy* function of the C API (a default or a handle of its own).
set(CORE_DIRS common port format kernels kv quant planner text loader scheduler model)
# What counts as source (a README beside the code does not).
set(SOURCE_EXTENSIONS h hh hpp hxx inc ipp c cc cpp cxx)

if(NOT SRC OR NOT IS_DIRECTORY "${SRC}")
  message(FATAL_ERROR "layering.cmake: SRC (the src/ folder) is not set or not a folder: '${SRC}'")
endif()
set(problems "")
file(GLOB dirs RELATIVE "${SRC}" "${SRC}/*")
foreach(dir IN LISTS dirs)
  if(NOT IS_DIRECTORY "${SRC}/${dir}")
    continue()
  endif()
  if(NOT DEFINED ALLOWED_${dir})
    string(APPEND problems "src/${dir}/: a folder with no rule in tests/layering.cmake\n")
    continue()
  endif()
  set(globs "")
  foreach(ext IN LISTS SOURCE_EXTENSIONS)
    list(APPEND globs "${SRC}/${dir}/*.${ext}")
  endforeach()
  file(GLOB_RECURSE files ${globs})
  foreach(f IN LISTS files)
    file(RELATIVE_PATH rel "${SRC}/.." "${f}")
    # One list item per line: ';' and brackets, which CMake lists treat
    # specially, become placeholders first.
    file(READ "${f}" content)
    string(REPLACE ";" "<semicolon>" content "${content}")
    string(REPLACE "[" "<lb>" content "${content}")
    string(REPLACE "]" "<rb>" content "${content}")
    string(REPLACE "\n" ";" lines "${content}")
    set(n 0)
    foreach(line IN LISTS lines)
      math(EXPR n "${n} + 1")
      set(inc "")
      if(line MATCHES "^[ \t]*#[ \t]*include[ \t]*\"([^\"]+)\"")
        set(inc "${CMAKE_MATCH_1}")
      elseif(line MATCHES "^[ \t]*#[ \t]*include[ \t]*<([^>/]+)/([^>]*)>")
        # <common/status.h> finds src/ as "common/status.h" does (src/ is on
        # the include path): the same rule. Other <...> are libraries.
        if(DEFINED ALLOWED_${CMAKE_MATCH_1} OR CMAKE_MATCH_1 STREQUAL "tinyai")
          set(inc "${CMAKE_MATCH_1}/${CMAKE_MATCH_2}")
        endif()
      endif()
      if(inc MATCHES "(^|/)\\.\\.?(/|$)")
        # "common/../model/llama.h" would pass as common/.
        string(APPEND problems "${rel}:${n}: includes \"${inc}\": a path with '.' or '..' in it; name the header "
                               "from src/ or include/\n")
      elseif(NOT inc STREQUAL "")
        set(ok FALSE)
        foreach(prefix IN LISTS ALLOWED_${dir})
          string(LENGTH "${prefix}" len)
          string(SUBSTRING "${inc}" 0 ${len} head)
          if(head STREQUAL prefix)
            set(ok TRUE)
          endif()
        endforeach()
        if(inc IN_LIST FORBIDDEN_${dir})
          set(ok FALSE)
        endif()
        if(NOT ok)
          string(JOIN " " allowed ${ALLOWED_${dir}})
          string(APPEND problems "${rel}:${n}: includes \"${inc}\"; src/${dir}/ may include only ${allowed}")
          if(DEFINED FORBIDDEN_${dir})
            string(JOIN " " forbidden ${FORBIDDEN_${dir}})
            string(APPEND problems " (not ${forbidden})")
          endif()
          string(APPEND problems "\n")
        endif()
      endif()
      if(dir IN_LIST CORE_DIRS)
        # The code without string literals (messages name the C API) and comments.
        string(REGEX REPLACE "\"([^\"\\\\]|\\\\.)*\"" "\"\"" code "${line}")
        string(REGEX REPLACE "//.*" "" code "${code}")
        if(code MATCHES "(tinyai(Create|Open|Close|Destroy)[A-Za-z]*)[ \t]*\\(")
          string(APPEND problems "${rel}:${n}: calls ${CMAKE_MATCH_1}: the core calls the C API on itself\n")
        endif()
      endif()
    endforeach()
  endforeach()
endforeach()
if(problems)
  message(FATAL_ERROR "layering: forbidden includes or calls:\n${problems}")
endif()
message(STATUS "layering: every include in ${SRC} is allowed")
