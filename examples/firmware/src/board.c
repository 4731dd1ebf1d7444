/*
 * The board: Arm's MPS2/MPS3 FPGA images as QEMU emulates them (their CMSDK
 * APB UARTs, SysTick at the board's clock, semihosting to stop). The
 * addresses and the clock come from boards/BOARD.cmake as BOARD_UART0,
 * BOARD_UART1 and BOARD_CLOCK_HZ. On a real board, replace the UART (the
 * vendor's HAL or registers) and board_exit (a reset, or a loop).
 */
#include "board.h"

#include <errno.h>

/* CMSDK APB UART: DATA, STATE (bit 0: TX buffer full), CTRL (bit 0: TX on), ..., BAUDDIV. */
typedef struct {
    volatile uint32_t data, state, ctrl, intstatus, bauddiv;
} CmsdkUart;
#define UART0 ((CmsdkUart*)BOARD_UART0)
#define UART1 ((CmsdkUart*)BOARD_UART1)

/* SysTick, counting down from 2^24 - 1 at the processor clock; each wrap
 * counted by its interrupt. */
#define SYST_CSR (*(volatile uint32_t*)0xE000E010u)
#define SYST_RVR (*(volatile uint32_t*)0xE000E014u)
#define SYST_CVR (*(volatile uint32_t*)0xE000E018u)
#define SCB_ICSR (*(volatile uint32_t*)0xE000ED04u)
#define ICSR_PENDSTSET (1u << 26)
static volatile uint32_t systick_wraps;

void SysTick_Handler(void) { ++systick_wraps; }

static void uart_init(CmsdkUart* u) {
    u->bauddiv = 16;
    u->ctrl = 1;
}

void board_init(void) {
    uart_init(UART0);
    uart_init(UART1);
    SYST_RVR = 0xFFFFFFu;
    SYST_CVR = 0;
    SYST_CSR = 7; /* enabled, interrupt, processor clock */
}

static void uart_put(CmsdkUart* u, const char* s, size_t n) {
    for (size_t i = 0; i < n; ++i) {
        while (u->state & 1u) {
        }
        u->data = (uint8_t)s[i];
    }
}

void board_write(const char* s, size_t n) { uart_put(UART0, s, n); }

void board_log(const char* s) {
    size_t n = 0;
    while (s[n]) ++n;
    uart_put(UART1, s, n);
}

void board_log_u64(uint64_t v) {
    char buf[24];
    int i = sizeof buf;
    buf[--i] = 0;
    do {
        buf[--i] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    board_log(buf + i);
}

uint64_t board_now_ns(void) {
    uint32_t wraps, count;
    __asm volatile("cpsid i" ::: "memory");
    wraps = systick_wraps;
    count = SYST_CVR;
    if (SCB_ICSR & ICSR_PENDSTSET) { /* wrapped, not yet counted */
        count = SYST_CVR;
        ++wraps;
    }
    __asm volatile("cpsie i" ::: "memory");
    const uint64_t ticks = ((uint64_t)wraps << 24) + (0xFFFFFFu - count);
    return ticks * 1000000000ull / BOARD_CLOCK_HZ;
}

/* Semihosting (QEMU -semihosting-config enable=on): SYS_EXIT with
 * ADP_Stopped_ApplicationExit for 0, SYS_EXIT_EXTENDED with the code
 * otherwise. */
static int semihost(int op, void* arg) {
    register int r0 __asm("r0") = op;
    register void* r1 __asm("r1") = arg;
    __asm volatile("bkpt 0xab" : "+r"(r0) : "r"(r1) : "memory");
    return r0;
}

void board_exit(int code) {
    if (code == 0) {
        semihost(0x18, (void*)0x20026);
    } else {
        uint32_t block[2] = {0x20026u, (uint32_t)code};
        semihost(0x20, block);
        semihost(0x18, (void*)0x20023); /* where SYS_EXIT_EXTENDED is missing: a run-time error */
    }
    for (;;) __asm volatile("wfi");
}

/* No heap: TinyAI allocates from its static arena alone. Were anything to
 * reach for malloc, it gets nothing. */
void* _sbrk(int incr) {
    (void)incr;
    errno = ENOMEM;
    return (void*)-1;
}
