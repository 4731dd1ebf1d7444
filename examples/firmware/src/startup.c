/*
 * Start-up for an Armv7-M / Armv8-M core: the vector table, the reset
 * handler (FPU on, .data copied from flash, .bss zeroed, the stack painted,
 * C++ constructors run, main called) and fault handlers that print where
 * the fault was and stop instead of hanging. The symbols come from
 * firmware.ld.
 */
#include <stdint.h>

#include "board.h"

extern uint32_t __data_load[], __data_start[], __data_end[];
extern uint32_t __bss_start[], __bss_end[];
extern uint32_t __stack_limit[], __stack_top[];

int main(void);
void __libc_init_array(void);
/* No crt0 (-nostartfiles): the constructors' _init and _fini are empty. */
void _init(void) {}
void _fini(void) {}
/* What crtbegin would define: the C++ runtime registers static destructors against it. */
void* __dso_handle = 0;

#define STACK_PAINT 0xC5C5C5C5u

/* The stack's words below the reset handler's frame are painted so that
 * board_stack_used() can find the deepest one ever written. */
__attribute__((noinline)) static void paint_stack(void) {
    uint32_t* here;
    __asm volatile("mov %0, sp" : "=r"(here));
    for (uint32_t* p = __stack_limit; p < here - 16; ++p) *p = STACK_PAINT;
}

size_t board_stack_used(void) {
    const uint32_t* p = __stack_limit;
    while (p < __stack_top && *p == STACK_PAINT) ++p;
    return (size_t)((const char*)__stack_top - (const char*)p);
}

void Reset_Handler(void) {
#if defined(__ARM_FP) || defined(__ARM_FEATURE_MVE)
    /* CP10 and CP11 (the FPU, and Helium on a Cortex-M55): full access. */
    volatile uint32_t* cpacr = (volatile uint32_t*)0xE000ED88u;
    *cpacr |= 0xFu << 20;
    __asm volatile("dsb\n\tisb" ::: "memory");
#endif
    for (uint32_t *src = __data_load, *dst = __data_start; dst < __data_end;) *dst++ = *src++;
    for (uint32_t* dst = __bss_start; dst < __bss_end;) *dst++ = 0;
    paint_stack();
    __libc_init_array();
    board_exit(main());
}

/* A fault: the registers the core stacked, the fault status, and exit 2. */
void fault_report(const uint32_t* frame, uint32_t exc_return) {
    static const char* const kRegs[] = {"r0", "r1", "r2", "r3", "r12", "lr", "pc", "xpsr"};
    (void)exc_return;
    board_log("tinyai-firmware: fault:");
    for (int i = 0; i < 8; ++i) {
        board_log(" ");
        board_log(kRegs[i]);
        board_log("=");
        board_log_u64(frame[i]);
    }
    board_log(" cfsr=");
    board_log_u64(*(volatile uint32_t*)0xE000ED28u);
    board_log(" hfsr=");
    board_log_u64(*(volatile uint32_t*)0xE000ED2Cu);
    board_log("\n");
    board_exit(2);
}

__attribute__((naked)) void Fault_Handler(void) {
    __asm volatile(
        "tst lr, #4\n\t"
        "ite eq\n\t"
        "mrseq r0, msp\n\t"
        "mrsne r0, psp\n\t"
        "mov r1, lr\n\t"
        "b fault_report\n\t");
}

void SysTick_Handler(void);

typedef void (*Vector)(void);
__attribute__((section(".vectors"), used)) const Vector vectors[16] = {
    (Vector)__stack_top, Reset_Handler,
    Fault_Handler,  /* NMI */
    Fault_Handler,  /* HardFault */
    Fault_Handler,  /* MemManage */
    Fault_Handler,  /* BusFault */
    Fault_Handler,  /* UsageFault */
    Fault_Handler,  /* SecureFault (Armv8-M) */
    0, 0, 0,
    Fault_Handler,  /* SVCall */
    Fault_Handler,  /* DebugMonitor */
    0,
    Fault_Handler,  /* PendSV */
    SysTick_Handler,
};
