# Arm MPS3 with the AN547 image: a Cortex-M55 (Armv8.1-M with Helium, the M-profile vector
# extension; double-precision FPU) at 32 MHz, running Secure. QEMU: -M mps3-an547. The vector
# table in the ITCM (0x10000000), code and the model in the 8 MB QSPI flash (0x38000000,
# read-only), 4 MB of SRAM at 0x31000000, DDR at 0x60000000.
set(FIRMWARE_CPU_FLAGS "-mcpu=cortex-m55 -mfloat-abi=hard")
set(FIRMWARE_QEMU_MACHINE mps3-an547)
set(FIRMWARE_CLOCK_HZ 32000000)
set(FIRMWARE_UART0 0x59303000)
set(FIRMWARE_UART1 0x59304000)
set(FIRMWARE_VECTORS 0x10000000 0x80000)
set(FIRMWARE_FLASH 0x38000000 0x800000)
set(FIRMWARE_RAM 0x31000000 0x400000)
set(FIRMWARE_PSRAM 0x60000000 0x1000000)
