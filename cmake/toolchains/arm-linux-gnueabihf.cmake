# Cross build for 32-bit ARM Linux, hard-float ABI (Debian armhf, ARMv7-A),
# with Debian's cross compiler (g++-arm-linux-gnueabihf; scripts/bootstrap.sh
# installs it and the armhf libraries). Tests run under qemu-user.
#
# TINYAI_ARM_FPU is the -mfpu value (always -mfloat-abi=hard):
#   neon (default)  VFPv3 + NEON: the NEON kernels are built and dispatched
#   vfpv3-d16       Debian's armhf baseline, no NEON: the reference kernels only
#   neon-vfpv4, vfpv4-d16, ...   any other -mfpu value GCC accepts
# It sets the initial compiler flags, so pick it when configuring a fresh
# build folder:
#   cmake -S . -B build/armhf -G Ninja -DCMAKE_TOOLCHAIN_FILE=cmake/toolchains/arm-linux-gnueabihf.cmake \
#         -DTINYAI_ARM_FPU=vfpv3-d16 -DCMAKE_BUILD_TYPE=Release -DTINYAI_BUILD_BENCH=OFF
# or scripts/cross-test.sh armhf / armhf-nofpu-neon.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR arm)
set(TINYAI_CROSS_TRIPLET arm-linux-gnueabihf)

set(TINYAI_ARM_FPU neon CACHE STRING "-mfpu value of the armhf build (neon, vfpv3-d16, ...)")
set_property(CACHE TINYAI_ARM_FPU PROPERTY STRINGS neon neon-vfpv4 vfpv3-d16 vfpv4-d16)
# try_compile projects (compiler checks, check_cxx_source_compiles) read this
# file again: hand them the same choice.
list(APPEND CMAKE_TRY_COMPILE_PLATFORM_VARIABLES TINYAI_ARM_FPU)
set(CMAKE_C_FLAGS_INIT "-mfpu=${TINYAI_ARM_FPU} -mfloat-abi=hard")
# -Wno-psabi: GCC notes on every std::vector<double> iterator that GCC 7.1
# changed how such arguments are passed; nothing here links against pre-7.1 code.
set(CMAKE_CXX_FLAGS_INIT "-mfpu=${TINYAI_ARM_FPU} -mfloat-abi=hard -Wno-psabi")

include(${CMAKE_CURRENT_LIST_DIR}/debian-multiarch.cmake)
