/* runrss.c: runs one command and reports its wall time and peak resident set size, for
 * interleave.py (which compiles it on the fly).
 *
 * Usage: runrss PROGRAM ARGS...
 * The command runs with stdout and stderr on /dev/null (stdin inherited); PROGRAM is looked up
 * in PATH. runrss prints one line on its stdout: "STATUS SECONDS MAXRSS_KIB", STATUS being the
 * raw wait status, SECONDS the wall time from just before fork to the end of wait4, MAXRSS_KIB
 * the ru_maxrss of wait4's rusage for that child alone.
 *
 * Why not wait4 in Python itself: Linux carries a process's peak RSS across execve (the
 * pre-exec memory's high-water mark is kept in ru_maxrss), and a child forked from Python is a
 * copy of a ~15 MiB interpreter, so `true` would report 15 MiB. A child forked from this small
 * program starts from well under 1 MiB, below any dynamically linked program's own peak.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv) {
    struct timespec t0, t1;
    struct rusage ru;
    pid_t pid;
    int status;

    if (argc < 2) {
        fprintf(stderr, "usage: runrss PROGRAM ARGS...\n");
        return 2;
    }
    fflush(stdout);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    pid = fork();
    if (pid < 0) {
        perror("runrss: fork");
        return 2;
    }
    if (pid == 0) {
        int null = open("/dev/null", O_WRONLY);
        if (null < 0 || dup2(null, 1) < 0 || dup2(null, 2) < 0) {
            _exit(126);
        }
        close(null);
        execvp(argv[1], argv + 1);
        _exit(127);
    }
    if (wait4(pid, &status, 0, &ru) != pid) {
        perror("runrss: wait4");
        return 2;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    printf("%d %.9f %ld\n", status,
           (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9,
           ru.ru_maxrss);
    return 0;
}
