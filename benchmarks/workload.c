/* The benchmark workload: one-byte read(2)s of /dev/zero, as a static binary.
 *
 *   workload rounds N R   print "ready", then R times: wait for SIGUSR1, do N
 *                         reads, print the round's duration in ns
 *   workload tick         print "ready", then one read per ms until SIGUSR1,
 *                         then reads as fast as possible until killed (a flood)
 *   workload direct PATH N R
 *                         as rounds, but each read is a 4096-byte pread(2) of
 *                         PATH (a block device) opened O_DIRECT, into an
 *                         aligned buffer, at offsets 0, 4096, ... wrapping at
 *                         the device's end: past the page cache, one block
 *                         request each (the spans benchmark: one pair each)
 *   workload churn RATE   print "ready", then RATE short-lived processes a
 *                         second until killed, each with a pid and a task name
 *                         (`churnN`) never seen before, doing 4 reads of
 *                         1..4096 bytes of /dev/zero (the exporter's hour: keys
 *                         that keep coming, so its count maps fill)
 *
 * It waits with sigwait/sigtimedwait (no read(2)), and reports with write(2),
 * so the traced pid does exactly the reads counted here and nothing else: a
 * tool filtering on its pid must see N*R vfs_read calls.  The pause before each
 * round lets the harness start a tool on this pid and wait until it is live.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static long long now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void say(const char *text)
{
    size_t len = strlen(text);
    if (write(1, text, len) != (ssize_t)len)
        exit(3);
}

#define BLOCK 4096

static int direct(const char *path, long n, long rounds, sigset_t *usr1)
{
    char line[64];
    void *buf;
    int sig, fd = open(path, O_RDONLY | O_DIRECT);
    off_t blocks = fd < 0 ? 0 : lseek(fd, 0, SEEK_END) / BLOCK;

    if (blocks <= 0 || posix_memalign(&buf, BLOCK, BLOCK) != 0)
        return 2;
    say("ready\n");
    for (long r = 0; r < rounds; r++) {
        sigwait(usr1, &sig);
        long long t0 = now_ns();
        for (long i = 0; i < n; i++)
            if (pread(fd, buf, BLOCK, (off_t)(i % blocks) * BLOCK) != BLOCK)
                return 4;
        snprintf(line, sizeof line, "%lld\n", now_ns() - t0);
        say(line);
    }
    return 0;
}

static int churn(long rate, int zero)
{
    static char buf[BLOCK];
    struct timespec gap = {0, 1000000000L / rate};

    say("ready\n");
    for (long i = 0;; i++) {
        pid_t pid = fork();
        if (pid == 0) {
            char name[32];  /* the kernel keeps the first 15 bytes */
            snprintf(name, sizeof name, "churn%ld", i);
            prctl(PR_SET_NAME, name);
            for (long k = 0; k < 4; k++)  /* sizes spread over the log2 slots */
                if (read(zero, buf, 1 + (i * 37 + k * 1021) % BLOCK) < 0)
                    _exit(4);
            _exit(0);
        }
        if (pid > 0)
            waitpid(pid, NULL, 0);
        nanosleep(&gap, NULL);
    }
}

int main(int argc, char **argv)
{
    char byte, line[64];
    sigset_t usr1;
    int zero = open("/dev/zero", O_RDONLY);

    if (zero < 0 || argc < 2)
        return 2;
    sigemptyset(&usr1);
    sigaddset(&usr1, SIGUSR1);
    sigprocmask(SIG_BLOCK, &usr1, NULL);

    if (strcmp(argv[1], "rounds") == 0 && argc == 4) {
        long n = atol(argv[2]), rounds = atol(argv[3]);
        int sig;
        say("ready\n");
        for (long r = 0; r < rounds; r++) {
            sigwait(&usr1, &sig);
            long long t0 = now_ns();
            for (long i = 0; i < n; i++)
                if (read(zero, &byte, 1) != 1)
                    return 4;
            snprintf(line, sizeof line, "%lld\n", now_ns() - t0);
            say(line);
        }
        return 0;
    }
    if (strcmp(argv[1], "tick") == 0) {
        struct timespec ms = {0, 1000000};
        say("ready\n");
        while (sigtimedwait(&usr1, NULL, &ms) < 0)
            if (read(zero, &byte, 1) != 1)
                return 4;
        for (;;)
            if (read(zero, &byte, 1) != 1)
                return 4;
    }
    if (strcmp(argv[1], "direct") == 0 && argc == 5)
        return direct(argv[2], atol(argv[3]), atol(argv[4]), &usr1);
    if (strcmp(argv[1], "churn") == 0 && argc == 3 && atol(argv[2]) > 0)
        return churn(atol(argv[2]), zero);
    return 2;
}
