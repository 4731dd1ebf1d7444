# Arm MPS2 with the AN386 image: a Cortex-M4 (single-precision FPU, DSP extension) at 25 MHz.
# QEMU: -M mps2-an386. 4 MB of SSRAM at 0x0 stands for flash, 4 MB at 0x20000000 for SRAM,
# 16 MB of PSRAM at 0x21000000.
set(FIRMWARE_CPU_FLAGS "-mcpu=cortex-m4 -mfpu=fpv4-sp-d16 -mfloat-abi=hard")
set(FIRMWARE_QEMU_MACHINE mps2-an386)
set(FIRMWARE_CLOCK_HZ 25000000)
set(FIRMWARE_UART0 0x40004000)
set(FIRMWARE_UART1 0x40005000)
set(FIRMWARE_FLASH 0x00000000 0x400000)
set(FIRMWARE_RAM 0x20000000 0x400000)
set(FIRMWARE_PSRAM 0x21000000 0x1000000)
