# cmake -P script: installs the TinyAI build tree into a fresh prefix, then
# builds and runs a consumer project against it in two ways:
#   1. CMake: find_package(TinyAI REQUIRED) + TinyAI::tinyai (CMakeLists.txt here)
#   2. pkg-config: `pkg-config --cflags --static --libs tinyai` with the C compiler
# Both programs open MODEL and print its layer count. Any failure is fatal.
#
# Variables (from tests/CMakeLists.txt): TINYAI_BUILD_DIR, CONSUMER_SOURCE,
# WORK_DIR, MODEL, GENERATOR, C_COMPILER; in a cross build also EMULATOR
# (space-separated, runs the consumer's programs) and PKG_CONFIG_LIBDIR (the
# target's .pc files). A cross build's consumer is configured with the same
# toolchain file.
cmake_minimum_required(VERSION 3.16)

foreach(var TINYAI_BUILD_DIR CONSUMER_SOURCE WORK_DIR MODEL GENERATOR)
  if(NOT DEFINED ${var} OR "${${var}}" STREQUAL "")
    message(FATAL_ERROR "run_consumer_test.cmake: -D${var}=... is required")
  endif()
endforeach()
if(NOT EXISTS "${MODEL}")
  message(FATAL_ERROR "model '${MODEL}' does not exist (models/tinyai-fortunes.tmai is committed)")
endif()

set(prefix "${WORK_DIR}/prefix")
file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")

# What the library was built with: the consumer must use the same compiler
# and, for a sanitized static library, the same sanitizer runtime.
load_cache("${TINYAI_BUILD_DIR}" READ_WITH_PREFIX TINYAI_CACHE_
           CMAKE_C_COMPILER CMAKE_BUILD_TYPE TINYAI_SANITIZE CMAKE_INSTALL_LIBDIR BUILD_SHARED_LIBS
           CMAKE_TOOLCHAIN_FILE TINYAI_ARM_FPU CMAKE_C_FLAGS)
separate_arguments(emu UNIX_COMMAND "${EMULATOR}")
# C_COMPILER: the compiler the build used (a toolchain file's compiler is not
# in the cache).
set(cc "${C_COMPILER}")
if(cc STREQUAL "")
  set(cc "${TINYAI_CACHE_CMAKE_C_COMPILER}")
endif()
if(cc STREQUAL "")
  set(cc cc)
endif()
set(libdir "${TINYAI_CACHE_CMAKE_INSTALL_LIBDIR}")
if(libdir STREQUAL "")
  set(libdir lib)
endif()
set(extra_flags "")
if(NOT "${TINYAI_CACHE_TINYAI_SANITIZE}" STREQUAL "")
  set(extra_flags "-fsanitize=${TINYAI_CACHE_TINYAI_SANITIZE}")
endif()

function(run_checked what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (${rc}):\n${ARGN}\n--- stdout\n${out}\n--- stderr\n${err}")
  endif()
  set(run_out "${out}" PARENT_SCOPE)
endfunction()

# ---- 1. Install ----------------------------------------------------------------
run_checked("cmake --install" "${CMAKE_COMMAND}" --install "${TINYAI_BUILD_DIR}" --prefix "${prefix}")
foreach(f include/tinyai/tinyai.h include/tinyai/utils/mmap_loader.h ${libdir}/cmake/TinyAI/TinyAIConfig.cmake
        ${libdir}/pkgconfig/tinyai.pc)
  if(NOT EXISTS "${prefix}/${f}")
    message(FATAL_ERROR "the install lacks ${f}")
  endif()
endforeach()

# ---- 2. find_package(TinyAI) ------------------------------------------------------
set(build "${WORK_DIR}/build")
set(configure_args -S "${CONSUMER_SOURCE}" -B "${build}" -G "${GENERATOR}" "-DCMAKE_PREFIX_PATH=${prefix}"
                   "-DCMAKE_C_COMPILER=${cc}" -DCMAKE_BUILD_TYPE=Release)
if(NOT "${TINYAI_CACHE_CMAKE_TOOLCHAIN_FILE}" STREQUAL "")
  list(APPEND configure_args "-DCMAKE_TOOLCHAIN_FILE=${TINYAI_CACHE_CMAKE_TOOLCHAIN_FILE}")
  if(NOT "${TINYAI_CACHE_TINYAI_ARM_FPU}" STREQUAL "")
    list(APPEND configure_args "-DTINYAI_ARM_FPU=${TINYAI_CACHE_TINYAI_ARM_FPU}")
  endif()
endif()
if(extra_flags)
  list(APPEND configure_args "-DCMAKE_C_FLAGS=${extra_flags}" "-DCMAKE_EXE_LINKER_FLAGS=${extra_flags}")
endif()
run_checked("configuring the consumer" "${CMAKE_COMMAND}" ${configure_args})
# The package must come from the fresh prefix, not from a system install.
load_cache("${build}" READ_WITH_PREFIX CONSUMER_ TinyAI_DIR)
file(REAL_PATH "${prefix}" real_prefix)
file(REAL_PATH "${CONSUMER_TinyAI_DIR}" real_dir)
string(FIND "${real_dir}" "${real_prefix}/" at)
if(NOT at EQUAL 0)
  message(FATAL_ERROR "find_package(TinyAI) found '${CONSUMER_TinyAI_DIR}', not the package in '${prefix}'")
endif()
run_checked("building the consumer" "${CMAKE_COMMAND}" --build "${build}")
run_checked("running the consumer" ${emu} "${build}/app" "${MODEL}")
if(NOT run_out MATCHES "has [1-9][0-9]* layers")
  message(FATAL_ERROR "the consumer printed no layer count:\n${run_out}")
endif()
message(STATUS "find_package consumer: ${run_out}")

# ---- 3. pkg-config -----------------------------------------------------------------
find_program(PKG_CONFIG_EXECUTABLE NAMES pkg-config pkgconf)
if(NOT PKG_CONFIG_EXECUTABLE)
  message(FATAL_ERROR "pkg-config not found")
endif()
set(pc_env "${CMAKE_COMMAND}" -E env "PKG_CONFIG_PATH=${prefix}/${libdir}/pkgconfig")
if(NOT "${PKG_CONFIG_LIBDIR}" STREQUAL "")
  list(APPEND pc_env "PKG_CONFIG_LIBDIR=${PKG_CONFIG_LIBDIR}")
endif()
run_checked("pkg-config --cflags tinyai" ${pc_env} "${PKG_CONFIG_EXECUTABLE}" --cflags tinyai)
string(STRIP "${run_out}" pc_cflags)
run_checked("pkg-config --static --libs tinyai" ${pc_env} "${PKG_CONFIG_EXECUTABLE}" --static --libs tinyai)
string(STRIP "${run_out}" pc_libs)
run_checked("pkg-config --cflags --libs tinyai" ${pc_env} "${PKG_CONFIG_EXECUTABLE}" --cflags --libs tinyai)
message(STATUS "pkg-config: cflags '${pc_cflags}', static libs '${pc_libs}'")
# The flags must point into the prefix the package was installed to (a .pc
# file that names the configure-time prefix breaks `cmake --install --prefix`).
function(require_dir flags option dir what)
  separate_arguments(items UNIX_COMMAND "${flags}")
  file(REAL_PATH "${dir}" want)
  foreach(item ${items})
    string(FIND "${item}" "${option}" at)
    if(at EQUAL 0)
      string(LENGTH "${option}" n)
      string(SUBSTRING "${item}" ${n} -1 path)
      if(EXISTS "${path}")
        file(REAL_PATH "${path}" got)
        if(got STREQUAL want)
          return()
        endif()
      endif()
    endif()
  endforeach()
  message(FATAL_ERROR "${what} gives '${flags}', with no ${option} for ${dir}: tinyai.pc is not relocatable "
                      "(it names the configure-time prefix, so `cmake --install --prefix` breaks it)")
endfunction()
require_dir("${pc_cflags}" "-I" "${prefix}/include" "pkg-config --cflags tinyai")
require_dir("${pc_libs}" "-L" "${prefix}/${libdir}" "pkg-config --static --libs tinyai")
separate_arguments(cflags_list UNIX_COMMAND "${pc_cflags}")
separate_arguments(libs_list UNIX_COMMAND "${pc_libs}")
# The library's C flags too (a cross build's -mfpu=..., empty natively).
separate_arguments(extra_list UNIX_COMMAND "${TINYAI_CACHE_CMAKE_C_FLAGS}")
if(extra_flags)
  list(APPEND extra_list "${extra_flags}")
endif()
run_checked("compiling main.c with pkg-config flags" "${cc}" -std=c99 -Wall -Wextra -Werror -pedantic ${extra_list}
            ${cflags_list} "${CONSUMER_SOURCE}/main.c" -o "${WORK_DIR}/app-pkgconfig" ${libs_list})
run_checked("running the pkg-config consumer" ${emu} "${WORK_DIR}/app-pkgconfig" "${MODEL}")
if(NOT run_out MATCHES "has [1-9][0-9]* layers")
  message(FATAL_ERROR "the pkg-config consumer printed no layer count:\n${run_out}")
endif()
message(STATUS "pkg-config consumer: ${run_out}")
