/* A process whose own functions, and libc's malloc, ktui probes
 * (tests/kernel/test_uprobes.py). It prints "ready", then for each line on
 * stdin makes its calls N times (argv[1]) and prints "done". Built -O0 by
 * the test, PIE and -no-pie: a -no-pie binary's addresses are not its file
 * offsets, which hides nothing a missing conversion would get wrong. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct point {
    unsigned x;
    unsigned y;
};

__attribute__((noinline)) int ktui_add(int a, int b)
{
    asm volatile("");
    return a + b;
}

__attribute__((noinline)) size_t ktui_greet(const char *name, struct point *p)
{
    asm volatile("");
    return strlen(name) + p->y;
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 1;
    char line[16];
    struct point p = {7, 40};

    setvbuf(stdout, NULL, _IONBF, 0);
    printf("ready\n");
    while (fgets(line, sizeof line, stdin)) {
        long total = 0;
        for (int i = 0; i < n; i++) {
            total += ktui_add(i, 100);
            total += (long)ktui_greet("ktui-uprobe", &p);
            free(malloc(12345));
        }
        printf("done %ld\n", total);
    }
    return 0;
}
