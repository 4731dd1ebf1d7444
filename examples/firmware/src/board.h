/*
 * What the application needs from the board (board.c): two UARTs, a clock,
 * the stack's high-water mark and a way to stop. Retargeting to a real board
 * means rewriting board.c (its UART, its clock) and the memory regions in
 * boards/BOARD.cmake; nothing else.
 */
#ifndef FIRMWARE_BOARD_H
#define FIRMWARE_BOARD_H

#include <stddef.h>
#include <stdint.h>

void board_init(void);
/* The console (the generated text): UART0. */
void board_write(const char* s, size_t n);
/* The log (figures, errors): UART1. */
void board_log(const char* s);
void board_log_u64(uint64_t v);
/* Nanoseconds since board_init from SysTick (under QEMU -icount shift=0:
 * instructions). */
uint64_t board_now_ns(void);
/* Bytes of stack ever used: the painted words no longer intact. */
size_t board_stack_used(void);
/* Stops the program with an exit code (semihosting under QEMU). */
void board_exit(int code) __attribute__((noreturn));

#endif /* FIRMWARE_BOARD_H */
