# The toolchain: Debian's arm-none-eabi-gcc with newlib, for the board FIRMWARE_BOARD names
# (boards/FIRMWARE_BOARD.cmake gives its CPU flags). Debian packages gcc-arm-none-eabi,
# libstdc++-arm-none-eabi-newlib, binutils-arm-none-eabi.
set(CMAKE_SYSTEM_NAME Generic)
set(CMAKE_SYSTEM_PROCESSOR arm)
set(CMAKE_C_COMPILER arm-none-eabi-gcc)
set(CMAKE_CXX_COMPILER arm-none-eabi-g++)
set(CMAKE_ASM_COMPILER arm-none-eabi-gcc)
set(CMAKE_AR arm-none-eabi-ar)
set(CMAKE_RANLIB arm-none-eabi-ranlib)
set(CMAKE_TRY_COMPILE_TARGET_TYPE STATIC_LIBRARY)
list(APPEND CMAKE_TRY_COMPILE_PLATFORM_VARIABLES FIRMWARE_BOARD)

if(NOT FIRMWARE_BOARD)
  message(FATAL_ERROR "FIRMWARE_BOARD is not set: -DFIRMWARE_BOARD=mps2-an500 (one of boards/*.cmake)")
endif()
include(${CMAKE_CURRENT_LIST_DIR}/../boards/${FIRMWARE_BOARD}.cmake)

set(CMAKE_C_FLAGS_INIT "${FIRMWARE_CPU_FLAGS} -mthumb -ffunction-sections -fdata-sections")
set(CMAKE_ASM_FLAGS_INIT "${FIRMWARE_CPU_FLAGS} -mthumb")
# xsimd 8 declares posix_memalign only under POSIX; it offers no SIMD on a Cortex-M.
set(CMAKE_CXX_FLAGS_INIT "${FIRMWARE_CPU_FLAGS} -mthumb -ffunction-sections -fdata-sections -fno-exceptions -fno-rtti -D_POSIX_C_SOURCE=200809L")
set(CMAKE_EXE_LINKER_FLAGS_INIT "-nostartfiles -Wl,--gc-sections")

# Headers and libraries from the toolchain (newlib), never the host's /usr/include; header-only
# xsimd through a folder that holds only a link to it.
file(MAKE_DIRECTORY ${CMAKE_BINARY_DIR}/xsimd-include)
file(CREATE_LINK /usr/include/xsimd ${CMAKE_BINARY_DIR}/xsimd-include/xsimd SYMBOLIC)
set(XSIMD_INCLUDE_DIRS ${CMAKE_BINARY_DIR}/xsimd-include CACHE PATH "xsimd's headers alone")
set(CMAKE_FIND_ROOT_PATH /usr/lib/arm-none-eabi)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
