# Arm MPS2 with the AN505 image: a Cortex-M33 (Armv8-M, TrustZone; single-precision FPU, DSP
# extension) at 20 MHz, running Secure as it boots. QEMU: -M mps2-an505. The Secure aliases:
# 4 MB of SSRAM at 0x10000000 for flash (the vector table must be there), 4 MB at 0x38000000 for
# SRAM; the 16 MB of PSRAM through its Non-secure address 0x80000000 (no SAU set up: it works).
set(FIRMWARE_CPU_FLAGS "-mcpu=cortex-m33 -mfpu=fpv5-sp-d16 -mfloat-abi=hard")
set(FIRMWARE_QEMU_MACHINE mps2-an505)
set(FIRMWARE_CLOCK_HZ 20000000)
set(FIRMWARE_UART0 0x50200000)
set(FIRMWARE_UART1 0x50201000)
set(FIRMWARE_FLASH 0x10000000 0x400000)
set(FIRMWARE_RAM 0x38000000 0x400000)
set(FIRMWARE_PSRAM 0x80000000 0x1000000)
