# A Cortex-M7 with a double-precision FPU, bare metal (newlib), for the core
# library only: cmake -DCMAKE_TOOLCHAIN_FILE=cmake/toolchains/cortex-m7.cmake
# (scripts/cortex-m.sh sets the options: the baremetal port, no threads, no
# zstd, no tools or tests). Debian packages gcc-arm-none-eabi,
# libstdc++-arm-none-eabi-newlib, binutils-arm-none-eabi.
set(CMAKE_SYSTEM_NAME Generic)
set(CMAKE_SYSTEM_PROCESSOR arm)
set(CMAKE_C_COMPILER arm-none-eabi-gcc)
set(CMAKE_CXX_COMPILER arm-none-eabi-g++)
set(CMAKE_AR arm-none-eabi-ar)
set(CMAKE_RANLIB arm-none-eabi-ranlib)
# No OS to link test programs for: configure checks build static libraries.
set(CMAKE_TRY_COMPILE_TARGET_TYPE STATIC_LIBRARY)

set(TINYAI_CORTEX_M_FLAGS "-mcpu=cortex-m7 -mfpu=fpv5-d16 -mfloat-abi=hard -mthumb -ffunction-sections -fdata-sections")
set(CMAKE_C_FLAGS_INIT "${TINYAI_CORTEX_M_FLAGS}")
# xsimd 8 declares posix_memalign only under POSIX; it offers no SIMD on a
# Cortex-M, so the reference kernels run there.
set(CMAKE_CXX_FLAGS_INIT "${TINYAI_CORTEX_M_FLAGS} -fno-exceptions -fno-rtti -D_POSIX_C_SOURCE=200809L")

# Headers and libraries come from the toolchain (newlib), never the host's
# /usr/include (its glibc headers break newlib): header-only xsimd comes
# through a folder that holds only a link to it.
file(MAKE_DIRECTORY ${CMAKE_BINARY_DIR}/xsimd-include)
file(CREATE_LINK /usr/include/xsimd ${CMAKE_BINARY_DIR}/xsimd-include/xsimd SYMBOLIC)
set(XSIMD_INCLUDE_DIRS ${CMAKE_BINARY_DIR}/xsimd-include CACHE PATH "xsimd's headers alone")
set(CMAKE_FIND_ROOT_PATH /usr/lib/arm-none-eabi)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
