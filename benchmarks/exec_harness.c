/* The timing harness of benchmarks/shim_overhead.py: argv[1] a spec file (per variant:
 * 'R' raw execve or 'L' libc execve, then its argv NUL-separated, then an empty string),
 * argv[2] rounds, argv[3] a seed. One line per run: variant, wall ns, child CPU us. The
 * variants run in a new random order each round, each by vfork + execve; only 'L' goes
 * through libc's execve, where a preloaded Snoopy sees it. The children's environment is
 * the harness's without LD_PRELOAD and SNOOPY_INI. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
extern char **environ;
static char **env;
static int devnull;
static void one(char mode, char **argv, long long *ns, long *us) {
    struct timespec a, b; struct rusage ru; int st;
    clock_gettime(CLOCK_MONOTONIC, &a);
    pid_t pid = vfork();
    if (pid == 0) {
        dup2(devnull, 1);
        if (mode == 'L') execve(argv[0], argv, env);
        else syscall(SYS_execve, argv[0], argv, env);
        _exit(127);
    }
    wait4(pid, &st, 0, &ru);
    clock_gettime(CLOCK_MONOTONIC, &b);
    *ns = (b.tv_sec - a.tv_sec) * 1000000000LL + (b.tv_nsec - a.tv_nsec);
    *us = ru.ru_utime.tv_sec * 1000000L + ru.ru_utime.tv_usec
        + ru.ru_stime.tv_sec * 1000000L + ru.ru_stime.tv_usec;
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        fprintf(stderr, "%s failed\n", argv[0]);
        exit(3);
    }
}
int main(int argc, char **argv) {
    static char buf[1 << 20]; char *argvs[64][64]; char modes[64]; int nv = 0, n, i, k = 0;
    FILE *f = fopen(argv[1], "rb"); size_t len = fread(buf, 1, sizeof buf - 2, f); fclose(f);
    for (char *p = buf; p < buf + len && nv < 64; nv++) {
        modes[nv] = *p++; int j = 0;
        while (*p && j < 63) { argvs[nv][j++] = p; p += strlen(p) + 1; }
        argvs[nv][j] = 0; p++;
    }
    for (char **e = environ; *e; e++) k++;
    env = calloc(k + 1, sizeof *env); k = 0;
    for (char **e = environ; *e; e++)
        if (strncmp(*e, "LD_PRELOAD=", 11) && strncmp(*e, "SNOOPY_INI=", 11)) env[k++] = *e;
    devnull = open("/dev/null", O_WRONLY);
    n = atoi(argv[2]); srand(atoi(argv[3]));
    long long ns; long us; int order[64];
    for (i = 0; i < nv; i++) { order[i] = i; one(modes[i], argvs[i], &ns, &us); }
    for (int r = 0; r < n; r++) {
        for (i = nv - 1; i > 0; i--) {
            int j = rand() % (i + 1), t = order[i];
            order[i] = order[j];
            order[j] = t;
        }
        for (i = 0; i < nv; i++) {
            one(modes[order[i]], argvs[order[i]], &ns, &us);
            printf("%d %lld %ld\n", order[i], ns, us);
        }
    }
    return 0;
}
