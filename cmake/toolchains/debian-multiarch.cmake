# Shared part of the Debian cross toolchain files: the caller sets
# CMAKE_SYSTEM_NAME, CMAKE_SYSTEM_PROCESSOR and TINYAI_CROSS_TRIPLET.
#
# Debian installs a foreign architecture's libraries side by side with the
# build machine's (multiarch): libzstd, libgtest, ... of the target in
# /usr/lib/<triplet>, their arch-independent headers in /usr/include (also the
# header-only xsimd and concurrentqueue), the cross compiler's own C/C++
# runtime in /usr/<triplet>.
set(CMAKE_C_COMPILER ${TINYAI_CROSS_TRIPLET}-gcc)
set(CMAKE_CXX_COMPILER ${TINYAI_CROSS_TRIPLET}-g++)
set(CMAKE_LIBRARY_ARCHITECTURE ${TINYAI_CROSS_TRIPLET})

# Libraries, headers and CMake packages: the cross runtime, then /usr with
# the target's multiarch folders (CMAKE_LIBRARY_ARCHITECTURE). The build
# machine's own /usr/lib/<its triplet> is never searched. Programs (python3,
# pkg-config, qemu) are the build machine's.
set(CMAKE_FIND_ROOT_PATH /usr/${TINYAI_CROSS_TRIPLET})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE BOTH)

# pkg-config (zstd) reads the target's .pc files only.
set(ENV{PKG_CONFIG_LIBDIR} /usr/lib/${TINYAI_CROSS_TRIPLET}/pkgconfig:/usr/share/pkgconfig)
set(ENV{PKG_CONFIG_PATH} "")
set(ENV{PKG_CONFIG_SYSROOT_DIR} "")

# Target programs (tests, the tools the build runs to write models) run under
# qemu-user. -L /usr/<triplet> gives them the cross toolchain's dynamic loader
# (ld-linux-*.so); LD_LIBRARY_PATH then makes it load the C and C++ runtime
# the program was linked against from the same folder. Without it the loader
# prefers the multiarch /lib/<triplet>/libc.so.6 (package libc6:<arch>, pulled
# in by libzstd1:<arch>), a different glibc build than the loader (Debian 12:
# 2.36-9+deb12u* against the cross 2.36-8cross1): mixed, the first
# pthread_create loops forever in the loader's stack cache. libzstd still comes
# from /usr/lib/<triplet>. ctest, add_custom_command and gtest_discover_tests
# prepend this; the shell, python and cmake -P tests take it as an argument.
string(REGEX REPLACE "^(aarch64|arm).*" "qemu-\\1" _tinyai_qemu ${CMAKE_SYSTEM_PROCESSOR})
find_program(TINYAI_QEMU_${CMAKE_SYSTEM_PROCESSOR} ${_tinyai_qemu})
if(TINYAI_QEMU_${CMAKE_SYSTEM_PROCESSOR})
  set(CMAKE_CROSSCOMPILING_EMULATOR ${TINYAI_QEMU_${CMAKE_SYSTEM_PROCESSOR}} -L /usr/${TINYAI_CROSS_TRIPLET}
                                    -E LD_LIBRARY_PATH=/usr/${TINYAI_CROSS_TRIPLET}/lib)
else()
  message(WARNING "${_tinyai_qemu} not found (Debian package qemu-user): the target's programs cannot run here, "
                  "so neither the build's model generation nor the tests will")
endif()
