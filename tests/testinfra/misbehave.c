/* misbehave: prints TEXT (and flushes it), then ends the way it is told. The
 * tests of the test infrastructure (tests/testinfra/CMakeLists.txt) run
 * tests/expect.cmake on it to show that a test fails when a program prints the
 * expected line and then crashes, or fails the wrong way.
 *
 * Usage: misbehave exit N TEXT    exits with status N
 *        misbehave abort TEXT     abort(): SIGABRT
 *        misbehave segv TEXT      raise(SIGSEGV): a crash (AddressSanitizer reports it and exits)
 *        misbehave kill TEXT      raise(SIGKILL): nothing can catch it
 *        misbehave hang TEXT      never ends (until killed) */
#define _POSIX_C_SOURCE 200809L /* SIGKILL, pause() */

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char** argv) {
    const char* how = argc > 1 ? argv[1] : "";
    int text = 2;
    int status = 0;
    if (strcmp(how, "exit") == 0 && argc == 4) {
        status = atoi(argv[2]);
        text = 3;
    } else if (!((strcmp(how, "abort") == 0 || strcmp(how, "segv") == 0 || strcmp(how, "kill") == 0 ||
                  strcmp(how, "hang") == 0) &&
                 argc == 3)) {
        fprintf(stderr, "usage: misbehave exit N TEXT | abort TEXT | segv TEXT | kill TEXT | hang TEXT\n");
        return 2;
    }
    printf("%s\n", argv[text]);
    fflush(stdout);
    if (strcmp(how, "abort") == 0) abort();
    if (strcmp(how, "segv") == 0) raise(SIGSEGV);
    if (strcmp(how, "kill") == 0) raise(SIGKILL);
    if (strcmp(how, "hang") == 0) {
        for (;;) pause();
    }
    return status;
}
