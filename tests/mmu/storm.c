/* A signal storm for tests/mmu.rs, loaded into a C-- program with LD_PRELOAD: an interval
 * timer raises SIGALRM every 100 microseconds, handled on the alternate signal stack
 * (SA_ONSTACK, as every handler in a program with the MMU convention must be: it keeps live
 * data below the stack pointer). At exit it prints how many signals arrived, on stderr. */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>

static volatile sig_atomic_t storm_count;

static void on_alarm(int sig) {
    (void)sig;
    storm_count++;
}

__attribute__((constructor)) static void storm_start(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm;
    sa.sa_flags = SA_ONSTACK | SA_RESTART;
    sigaction(SIGALRM, &sa, NULL);
    struct itimerval it = {{0, 100}, {0, 100}};
    setitimer(ITIMER_REAL, &it, NULL);
}

__attribute__((destructor)) static void storm_stop(void) {
    struct itimerval off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_REAL, &off, NULL);
    fprintf(stderr, "storm: %d signals\n", (int)storm_count);
}
