/* runwait.c: runs a program with a time limit and reports how it ended, for bless.sh.
 *
 * Usage: runwait SECONDS STATUSFILE PROGRAM ARGS...
 * Writes to STATUSFILE one line: "exit N" (normal exit), "signal N" (killed by a signal) or
 * "timeout" (killed after SECONDS). A shell cannot tell exit(139) from a SIGSEGV death; this can.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv) {
    pid_t pid;
    int status;
    int waited;
    FILE *out;

    if (argc < 4) {
        fprintf(stderr, "usage: runwait SECONDS STATUSFILE PROGRAM ARGS...\n");
        return 2;
    }
    pid = fork();
    if (pid < 0) {
        perror("runwait: fork");
        return 2;
    }
    if (pid == 0) {
        execv(argv[3], argv + 3);
        perror("runwait: exec");
        _exit(127);
    }
    out = fopen(argv[2], "w");
    if (out == NULL) {
        perror("runwait: status file");
        return 2;
    }
    for (waited = 0; waited < atoi(argv[1]) * 100; waited++) {
        if (waitpid(pid, &status, WNOHANG) == pid) {
            if (WIFEXITED(status)) {
                fprintf(out, "exit %d\n", WEXITSTATUS(status));
            } else {
                fprintf(out, "signal %d\n", WTERMSIG(status));
            }
            fclose(out);
            return 0;
        }
        usleep(10000);
    }
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    fprintf(out, "timeout\n");
    fclose(out);
    return 0;
}
