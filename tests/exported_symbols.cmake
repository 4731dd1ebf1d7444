cmake_minimum_required(VERSION 3.25)
# The shared library exports exactly the C API: every function declared
# with TINYAI_API in include/tinyai/ and nothing else (no internal C++
# symbol, no helper), and every function the headers declare carries
# TINYAI_API.
#
#   cmake -DLIB=libtinyai.so -DINCLUDE=<repo>/include -DNM=nm -P tests/exported_symbols.cmake
if(NOT EXISTS "${LIB}" OR NOT IS_DIRECTORY "${INCLUDE}" OR NOT NM)
  message(FATAL_ERROR "exported_symbols.cmake: LIB ('${LIB}'), INCLUDE ('${INCLUDE}') and NM ('${NM}') are required")
endif()

# What the headers declare.
set(declared "")
set(problems "")
file(GLOB_RECURSE headers "${INCLUDE}/*.h")
foreach(h IN LISTS headers)
  file(READ "${h}" text)
  # Comments out (their examples call functions), then one declaration per
  # match: a line-start return type, a tinyai* name and '('.
  string(REGEX REPLACE "/\\*([^*]|\\*+[^*/])*\\*+/" "" text "${text}")
  string(REGEX MATCHALL "(^|\n)[A-Za-z_][A-Za-z0-9_ \t\\*]*[ \t\\*]tinyai[A-Za-z0-9_]*[ \t]*\\(" decls "${text}")
  foreach(d IN LISTS decls)
    string(REGEX MATCH "tinyai[A-Za-z0-9_]*[ \t]*\\($" name "${d}")
    string(REGEX REPLACE "[ \t]*\\($" "" name "${name}")
    string(STRIP "${d}" d)
    if(d MATCHES "^typedef")
      continue()
    endif()
    if(NOT d MATCHES "^TINYAI_API ")
      file(RELATIVE_PATH rel "${INCLUDE}" "${h}")
      string(APPEND problems "  ${rel}: ${name} is declared without TINYAI_API\n")
    endif()
    list(APPEND declared "${name}")
  endforeach()
endforeach()
list(REMOVE_DUPLICATES declared)
list(LENGTH declared n_declared)
if(n_declared LESS 50)
  message(FATAL_ERROR "exported_symbols.cmake: found only ${n_declared} declarations in ${INCLUDE}: the parser is broken")
endif()

# What the library exports: defined dynamic symbols, weak ones included.
execute_process(COMMAND "${NM}" -D --defined-only "${LIB}" OUTPUT_VARIABLE nm_out RESULT_VARIABLE rc
                ERROR_VARIABLE nm_err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "exported_symbols.cmake: ${NM} -D ${LIB} failed: ${nm_err}")
endif()
string(REPLACE "\n" ";" lines "${nm_out}")
set(exported "")
foreach(line IN LISTS lines)
  if(line MATCHES "^[0-9a-fA-F]* *([A-Za-z]) ([^ ]+)$")
    set(type "${CMAKE_MATCH_1}")
    set(sym "${CMAKE_MATCH_2}")
    # Absolute symbols (A) are the linker's version nodes, not code or data.
    if(NOT type STREQUAL "A")
      list(APPEND exported "${sym}")
    endif()
  endif()
endforeach()

foreach(sym IN LISTS exported)
  if(NOT sym IN_LIST declared)
    string(APPEND problems "  exported but not a function of the headers: ${sym}\n")
  endif()
endforeach()
foreach(name IN LISTS declared)
  if(NOT name IN_LIST exported)
    string(APPEND problems "  declared but not exported: ${name}\n")
  endif()
endforeach()
if(problems)
  message(FATAL_ERROR "exported symbols of ${LIB} differ from the C API:\n${problems}")
endif()
list(LENGTH exported n)
message(STATUS "exported symbols: exactly the ${n} tinyai* functions of the headers")
