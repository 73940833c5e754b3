/* Return probes: where a call's entry waits for its return. Shared by the
 * generic program (kernel/generic/program.c) and the compiled programs
 * (kernel/codegen), pasted after KTUI_ENTRY_DEPTH, KTUI_ENTRY_THREADS and
 * KTUI_ENTRY_GUARD.
 *
 * Each (probe, thread) has a small stack of entries, keyed by the whole
 * thread id: two threads never share one, however their ids collide. A
 * call nested in another of the same probe on the same thread (recursion,
 * or an interrupt that calls the function again) pushes a level of its
 * own. Each level remembers its call's frame: the stack pointer at entry
 * for a kprobe (the return sees it 8 bytes higher, its return address
 * popped), the trampoline's argument area for fentry (the same address in
 * fexit). A return pairs with the topmost level whose frame is its own,
 * and drops the levels above it: calls whose returns the kernel missed (a
 * kretprobe out of instances counts those itself). No level with its
 * frame: the return is unpaired (entered before the probe attached, its
 * entry not stored, or deeper than the stack), and the caller counts it.
 *
 * The map is an LRU hash: a thread that died inside a function, or one
 * not seen for long, gives its place to a new one. An entry pushed out
 * that way shows up as an unpaired return, counted. A full or busy map
 * (an update refused), or a stack at its depth, is counted by the caller
 * as an entry not stored.
 *
 * The stack is only ever touched by its own thread, but that thread may
 * be interrupted in the middle of a push or a pop by a hit of the same
 * probe (fentry/fexit programs nest; a kprobe hit never runs inside
 * another BPF program on the same CPU). Where hits can nest
 * (KTUI_ENTRY_GUARD 1: the generic program, whose fentry/fexit copies
 * share it), a busy word taken with a compare-and-swap (5.12+) keeps the
 * two apart: the nested hit counts itself as nested and leaves the stack
 * alone. The compiled programs are kprobes only, which never nest, and
 * load on kernels older than the kernel's atomics: no guard there. */

struct ktui_entry_key {
    u32 probe;
    u32 tid;
};

struct ktui_entry_level {
    u64 frame;
    u64 ts;
    u64 args[6];
};

struct ktui_entry_stack {
    u32 depth;
    u32 gen;  /* the probe's generation: a reused probe slot starts empty */
    u64 busy; /* 64 bits: the atomics bcc's target has */
    struct ktui_entry_level level[KTUI_ENTRY_DEPTH];
};

BPF_TABLE("lru_hash", struct ktui_entry_key, struct ktui_entry_stack, ktui_entries, KTUI_ENTRY_THREADS);
/* never written: what a new thread's stack starts as */
BPF_ARRAY(ktui_entry_zero, struct ktui_entry_stack, 1);

static __always_inline void ktui_barrier(void)
{
    asm volatile("" ::: "memory");
}

/* 1: this hit holds the stack (or nothing can nest: no guard) */
static __always_inline int ktui_stack_take(struct ktui_entry_stack *s)
{
#if KTUI_ENTRY_GUARD
    return !__sync_val_compare_and_swap(&s->busy, 0, 1);
#else
    return 1;
#endif
}

static __always_inline void ktui_stack_release(struct ktui_entry_stack *s)
{
    ktui_barrier(); /* x86 keeps stores in order: the compiler must too */
#if KTUI_ENTRY_GUARD
    s->busy = 0;
#endif
}

#define KTUI_PUSHED 0
#define KTUI_UNSTORED 1 /* map full or busy, or the stack at its depth */
#define KTUI_NESTED 2   /* the stack was busy: a hit inside another of this probe */

#define KTUI_PAIRED 0
#define KTUI_UNPAIRED 1

/* Remember an entry: its frame, when, and the arguments (args may be 0). */
static __always_inline int ktui_push(u32 probe, u32 gen, u32 tid, u64 frame, u64 ts, u64 *args)
{
    struct ktui_entry_key key = {.probe = probe, .tid = tid};
    u32 zero = 0;
    struct ktui_entry_stack *empty = ktui_entry_zero.lookup(&zero);
    if (!empty)
        return KTUI_UNSTORED;
    struct ktui_entry_stack *s = ktui_entries.lookup_or_try_init(&key, empty);
    if (!s)
        return KTUI_UNSTORED;
    if (!ktui_stack_take(s))
        return KTUI_NESTED;
    if (s->gen != gen) {
        s->gen = gen;
        s->depth = 0;
    }
    u32 d = s->depth;
    int rc = KTUI_UNSTORED;
    if (d < KTUI_ENTRY_DEPTH) {
        struct ktui_entry_level *lv = &s->level[d & (KTUI_ENTRY_DEPTH - 1)];
        lv->frame = frame;
        lv->ts = ts;
        if (args)
            __builtin_memcpy(lv->args, args, sizeof(lv->args));
        s->depth = d + 1;
        rc = KTUI_PUSHED;
    }
    ktui_stack_release(s);
    return rc;
}

#define KTUI_FIND(k)                                                          \
    if ((k) < KTUI_ENTRY_DEPTH && found < 0 && (k) < d &&                     \
        s->level[(k) % KTUI_ENTRY_DEPTH].frame == frame)                      \
        found = (k);

/* The entry of the call returning from `frame`: its time into *ts and its
 * arguments into args (if not 0); that level and the ones above it go. */
static __always_inline int ktui_pop(u32 probe, u32 gen, u32 tid, u64 frame, u64 *ts, u64 *args)
{
    struct ktui_entry_key key = {.probe = probe, .tid = tid};
    struct ktui_entry_stack *s = ktui_entries.lookup(&key);
    if (!s || s->gen != gen || !s->depth)
        return KTUI_UNPAIRED;
    if (!ktui_stack_take(s))
        return KTUI_NESTED;
    u32 d = s->depth;
    int found = -1;
    /* topmost first: a recursive call's frame is below its caller's */
    KTUI_FIND(7) KTUI_FIND(6) KTUI_FIND(5) KTUI_FIND(4)
    KTUI_FIND(3) KTUI_FIND(2) KTUI_FIND(1) KTUI_FIND(0)
    int rc = KTUI_UNPAIRED;
    if (found >= 0) {
        struct ktui_entry_level *lv = &s->level[found & (KTUI_ENTRY_DEPTH - 1)];
        *ts = lv->ts;
        if (args)
            __builtin_memcpy(args, lv->args, sizeof(lv->args));
        s->depth = found;
        rc = KTUI_PAIRED;
    }
    ktui_stack_release(s);
    return rc;
}
