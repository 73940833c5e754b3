/* A process whose user stacks are known, for test_user_stacks.py. Built by
 * the test with `gcc -O0 -fno-omit-frame-pointer` (a PIE, as Debian's gcc
 * makes by default, so symbolizing goes through the load offset).
 *
 *     ustack_target NA NB
 *
 * Opens /dev/zero, prints "ready", waits for SIGUSR1 (waiting reads
 * nothing), then reads NA times through ktui_path_a and NB times through
 * ktui_path_b, prints "done" (a write, not a read) and waits for a second
 * SIGUSR1 before exiting, so its maps are there while the stacks are read.
 *
 * read(2) is made from ktui_leaf_read itself (inline syscall, no libc
 * wrapper): glibc is built without frame pointers, and a frame-pointer walk
 * started inside its wrapper would skip the wrapper's caller. */
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

static char buf[64];

__attribute__((noinline)) long ktui_leaf_read(int fd)
{
    long ret;
    __asm__ volatile("syscall"
                     : "=a"(ret)
                     : "0"(0L /* SYS_read */), "D"((long)fd), "S"(buf), "d"(8L)
                     : "rcx", "r11", "memory");
    return ret;
}

__attribute__((noinline)) void ktui_path_a(int fd, int n)
{
    for (int i = 0; i < n; i++)
        ktui_leaf_read(fd);
}

__attribute__((noinline)) void ktui_path_b(int fd, int n)
{
    for (int i = 0; i < n; i++)
        ktui_leaf_read(fd);
}

int main(int argc, char **argv)
{
    if (argc != 3)
        return 2;
    int na = atoi(argv[1]), nb = atoi(argv[2]);
    int fd = open("/dev/zero", O_RDONLY);
    sigset_t set;
    int sig;
    sigemptyset(&set);
    sigaddset(&set, SIGUSR1);
    sigprocmask(SIG_BLOCK, &set, NULL);
    if (fd < 0 || write(1, "ready\n", 6) != 6)
        return 1;
    sigwait(&set, &sig);
    ktui_path_a(fd, na);
    ktui_path_b(fd, nb);
    if (write(1, "done\n", 5) != 5)
        return 1;
    sigwait(&set, &sig);
    return 0;
}
