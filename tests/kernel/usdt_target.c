/* A process with USDT probe points ktui probes (tests/kernel/test_usdt.py).
 * It prints "ready", then for each line on stdin fires its probe points N
 * times (argv[1]) and prints "done". `ktui:tick` passes an int, a long, a
 * string and a constant; `ktui:gated` fires only while its semaphore is
 * raised (a tracer attached: the kernel raises it through the uprobe's
 * ref_ctr_offset), and counts how often it fired. */
#define _SDT_HAS_SEMAPHORES 1
#include <stdio.h>
#include <stdlib.h>
#include <sys/sdt.h>

/* with _SDT_HAS_SEMAPHORES every probe point has one; tick fires whatever its says */
__attribute__((section(".probes"))) unsigned short ktui_tick_semaphore, ktui_gated_semaphore;

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 1;
    char line[16];
    const char *word = "ktui-usdt";
    long gated = 0;

    setvbuf(stdout, NULL, _IONBF, 0);
    printf("ready\n");
    while (fgets(line, sizeof line, stdin)) {
        for (int i = 0; i < n; i++) {
            long big = 1000000000000L + i;
            DTRACE_PROBE4(ktui, tick, i, big, word, 7);
            if (ktui_gated_semaphore) {
                gated++;
                DTRACE_PROBE1(ktui, gated, i * 2);
            }
        }
        printf("done %ld\n", gated);
    }
    return 0;
}
