/* ktui's generic probe program: one program for every probe, compiled once
 * per kernel and ktui version, then loaded from the cache.
 *
 * Every attachment carries a cookie (bpf_get_attach_cookie, 5.15+): the
 * probe's slot in ktui_plans and a generation, plus KTUI_COOKIE_ENTRY on
 * the entry half of a return probe. The plan says what to fetch (registers,
 * saved arguments, dereference chains, strings), the filter (comparisons
 * and a truth table over their results) and the sampling. Adding or editing
 * a probe writes a plan and attaches: no compiler runs.
 *
 * Written for the verifier of 6.1: no loops (fetches, pointer hops and
 * comparisons are written out by macros: a loop whose latch falls through
 * into its header is refused by 6.1's check_cfg), and no array indexed by
 * comparison results (the verifier would then track every combination).
 * The plan, config and limits come from abi.py, pasted above this text. */
#include <uapi/linux/ptrace.h>
#include <linux/version.h>

/* bpf_get_func_arg/ret (the tracing variant's arguments): KTUI_FUNC_ARG_HELPERS
 * 0 or 1, defined by the loader from the kernel's probed features
 * (kernel/features.py: func_arg), not from its version. */
#ifndef KTUI_FUNC_ARG_HELPERS
#error "KTUI_FUNC_ARG_HELPERS: the loader defines it (generic/loader.py program_text)"
#endif

struct ktui_event_header {
    u64 ts;
    u64 latency;
    u32 probe;
    u32 cpu;
    u32 pid;
    u32 tid;
    char comm[16];
};

struct ktui_errno_key {
    u32 probe;
    u32 err;
};

struct ktui_comm_key {
    u32 probe;
    char comm[16];
};

struct ktui_window {
    u64 start;
    u64 count;
};

struct ktui_hist {
    u64 slots[KTUI_HIST_SLOTS];
};

/* who made the hit: the task, and its comm once a filter, the comm sample
 * or an event asks for it (one helper call, at most once per hit) */
struct ktui_who {
    u64 pid_tgid;
    u32 have_comm;
    u32 pad;
    char comm[16];
};

/* everything one hit works on, per CPU */
struct ktui_state {
    /* first: a string comparison reads comm word by word up to its count,
     * and the verifier must see every word it may read inside this value
     * (e and the payload after it are one record: nothing between them) */
    struct ktui_who who;
    struct ktui_event_header e;
    u8 payload[KTUI_PAYLOAD_MAX];
    u64 regs[KTUI_NREGS];
    u64 args[6];
#if !KTUI_FUNC_ARG_HELPERS
    u64 targs[KTUI_TRACE_ARGS + 1]; /* tracing: the arguments, then the return value */
#endif
    u64 vals[KTUI_MAX_FETCHES];
    u64 retval;
    u64 cpu;
};

BPF_RINGBUF_OUTPUT(ktui_events, 2048);
BPF_ARRAY(ktui_plans, struct ktui_plan, KTUI_MAX_PROBES);
BPF_ARRAY(ktui_config, struct ktui_config, 1);
BPF_PERCPU_ARRAY(ktui_hits, u64, KTUI_MAX_PROBES);
BPF_PERCPU_ARRAY(ktui_emitted, u64, KTUI_MAX_PROBES);
BPF_PERCPU_ARRAY(ktui_lost, u64, KTUI_MAX_PROBES);
BPF_PERCPU_ARRAY(ktui_sampled, u64, KTUI_MAX_PROBES);
BPF_PERCPU_ARRAY(ktui_window, struct ktui_window, KTUI_MAX_PROBES);
BPF_PERCPU_ARRAY(ktui_hist, struct ktui_hist, KTUI_MAX_PROBES);
/* exact sum of a return probe's latencies (ns): a histogram's _sum */
BPF_PERCPU_ARRAY(ktui_lat_sum, u64, KTUI_MAX_PROBES);
BPF_HASH(ktui_errnos, struct ktui_errno_key, u64, 1024);
BPF_HASH(ktui_comms, struct ktui_comm_key, u64, 4096);
BPF_PERCPU_ARRAY(ktui_comms_dropped, u64, KTUI_MAX_PROBES);
BPF_PERCPU_ARRAY(ktui_state, struct ktui_state, 1);
BPF_ARRAY(ktui_entries, struct ktui_entry, KTUI_ENTRY_BLOCKS * KTUI_ENTRY_SLOTS);

static __always_inline void ktui_bump(void *p)
{
    u64 *v = p;
    if (v)
        (*v)++;
}

static __always_inline char *ktui_comm(struct ktui_who *who)
{
    if (!who->have_comm) {
        bpf_get_current_comm(&who->comm, sizeof(who->comm));
        who->have_comm = 1;
    }
    return who->comm;
}

static __always_inline u64 ktui_extend(u64 v, u8 width, u8 sign)
{
    if (width == 1)
        return sign ? (u64)(s64)(s8)v : (u64)(u8)v;
    if (width == 2)
        return sign ? (u64)(s64)(s16)v : (u64)(u16)v;
    if (width == 4)
        return sign ? (u64)(s64)(s32)v : (u64)(u32)v;
    return v;
}

static __always_inline u64 ktui_source(struct ktui_state *st, u8 src, u32 reg)
{
    switch (src) {
    case SRC_REG:
        if (reg >= KTUI_NREGS)
            return 0;
        return st->regs[reg];
    case SRC_ARG:
        if (reg >= 6)
            return 0;
        return st->args[reg];
    case SRC_RETVAL:
        return st->retval;
    case SRC_PID:
        return st->who.pid_tgid >> 32;
    case SRC_TID:
        return (u32)st->who.pid_tgid;
    case SRC_CPU:
        return st->cpu;
    }
    return 0;
}

/* n - 1 pointer hops, then the final offset (kprobe_events' +OFF(...)) */
#define KTUI_HOP(d)                                                           \
    if ((d) + 1 < n) {                                                        \
        u64 next = 0;                                                         \
        bpf_probe_read_kernel(&next, sizeof(next), (void *)(addr + f->offs[d])); \
        addr = next;                                                          \
    }

/* One fetch: its source, its pointer chain, its value into the payload. */
static __always_inline int ktui_fetch_one(u32 i, struct ktui_state *st, struct ktui_plan *plan)
{
    if (i >= KTUI_MAX_FETCHES)
        return 1;
    struct ktui_fetch *f = &plan->fetch[i];
    if (f->kind == K_HEADER)
        return 0;
    u64 v = ktui_source(st, f->src, f->reg);
    u32 n = f->nderef;
    if (n > KTUI_MAX_DEREF)
        return 1;
    u64 addr = v;
    if (n) {
        KTUI_HOP(0) KTUI_HOP(1) KTUI_HOP(2) KTUI_HOP(3) KTUI_HOP(4) KTUI_HOP(5) KTUI_HOP(6)
        addr += f->offs[(n - 1) & (KTUI_MAX_DEREF - 1)];
    }
    u32 dest = f->dest;
    if (dest > KTUI_PAYLOAD_MAX - KTUI_STRING_MAX)
        return 1;
    if (f->kind == K_KSTR) {
        bpf_probe_read_kernel_str(&st->payload[dest], KTUI_STRING_MAX, (void *)addr);
        return 0;
    }
    if (f->kind == K_USTR) {
        bpf_probe_read_user_str(&st->payload[dest], KTUI_STRING_MAX, (void *)addr);
        return 0;
    }
    u8 width = f->width;
    if (n) {
        v = 0;
        if (width == 1)
            bpf_probe_read_kernel(&v, 1, (void *)addr);
        else if (width == 2)
            bpf_probe_read_kernel(&v, 2, (void *)addr);
        else if (width == 4)
            bpf_probe_read_kernel(&v, 4, (void *)addr);
        else
            bpf_probe_read_kernel(&v, 8, (void *)addr);
    }
    v = ktui_extend(v, width, f->kind == K_SINT);
    st->vals[i] = v;
    __builtin_memcpy(&st->payload[dest], &v, 8);
    return 0;
}

#define KTUI_FETCH(i)                                                         \
    if ((i) < n && ktui_fetch_one((i), st, plan))                             \
        return 0;

static __always_inline u64 ktui_operand(struct ktui_state *st, u8 src, u16 reg, u64 imm)
{
    if (src == SRC_CONST)
        return imm;
    if (src == SRC_VAL)
        return st->vals[reg & (KTUI_MAX_FETCHES - 1)];
    return ktui_source(st, src, reg);
}

/* A string operand: the words of a fetched string, or of comm. */
static __always_inline u64 *ktui_words(struct ktui_state *st, u8 src, u16 off)
{
    if (src == SRC_COMM_STR)
        return (u64 *)ktui_comm(&st->who);
    if (off > KTUI_PAYLOAD_MAX - KTUI_STRING_MAX)
        return 0;
    return (u64 *)&st->payload[off & ~7];
}

#define KTUI_WORD(w)                                                          \
    if ((w) < c->nwords &&                                                    \
        ((s[w] ^ c->str[w]) & ((w) + 1 == c->nwords ? c->last_mask : ~0ULL))) \
        eq = 0;

/* The result (0 or 1) of comparison i of the plan. */
static __always_inline u32 ktui_compare(struct ktui_state *st, struct ktui_plan *plan, u32 i)
{
    struct ktui_cmp *c = &plan->cmps[i % KTUI_MAX_CMPS];
    if (c->kind == CMP_STR) {
        u64 *s = ktui_words(st, c->lsrc, c->lreg);
        if (!s)
            return 0;
        u32 eq = 1;
        KTUI_WORD(0) KTUI_WORD(1) KTUI_WORD(2) KTUI_WORD(3)
        KTUI_WORD(4) KTUI_WORD(5) KTUI_WORD(6) KTUI_WORD(7)
        return c->op == 1 ? !eq : eq;
    }
    u64 a = ktui_operand(st, c->lsrc, c->lreg, c->imm);
    u64 b = ktui_operand(st, c->rsrc, c->rreg, c->imm);
    switch (c->op) {
    case 0: return a == b;
    case 1: return a != b;
    case 2: return c->sign ? (s64)a < (s64)b : a < b;
    case 3: return c->sign ? (s64)a <= (s64)b : a <= b;
    case 4: return c->sign ? (s64)a > (s64)b : a > b;
    case 5: return c->sign ? (s64)a >= (s64)b : a >= b;
    }
    return 0;
}

#define KTUI_CMP(i)                                                           \
    if ((i) < n)                                                              \
        bits |= ktui_compare(st, plan, (i)) << (i);

/* The filter: every comparison, then its truth table (one word, shifted by
 * the results: an index into an array would make the verifier track every
 * combination of results separately). */
static __always_inline int ktui_filter(struct ktui_state *st, struct ktui_plan *plan)
{
    u32 n = plan->ncmps;
    if (!n) /* none, or only ones known in advance (a string too long to match) */
        return plan->truth & 1;
    u32 bits = 0;
    KTUI_CMP(0) KTUI_CMP(1) KTUI_CMP(2) KTUI_CMP(3) KTUI_CMP(4) KTUI_CMP(5)
    return (plan->truth >> (bits & 63)) & 1;
}

/* Set-wide filters: ktui itself, --pid, --comm. 1 = the task passes. */
static __always_inline int ktui_set_filter(struct ktui_who *who)
{
    u32 zero = 0;
    struct ktui_config *c = ktui_config.lookup(&zero);
    if (!c)
        return 0;
    u32 pid = who->pid_tgid >> 32;
    if (c->exclude_pid && pid == c->exclude_pid)
        return 0;
    if (c->pid && pid != c->pid)
        return 0;
    if (c->has_comm) {
        u64 *w = (u64 *)ktui_comm(who);
        if ((w[0] ^ c->comm_words[0]) & c->comm_mask[0])
            return 0;
        if ((w[1] ^ c->comm_words[1]) & c->comm_mask[1])
            return 0;
    }
    return 1;
}

/* Count a hit that passed every filter, and who made it: exact for the
 * first KTUI_COMM_EXACT hits per CPU, then 1 in KTUI_COMM_EVERY, weighted
 * (as in the compiled programs). */
static __always_inline void ktui_count(struct ktui_who *who, u32 slot)
{
    u64 *hits = ktui_hits.lookup(&slot);
    if (!hits)
        return;
    u64 seen = (*hits)++;
    u64 weight = 1;
    if (seen >= KTUI_COMM_EXACT) {
        if (seen & (KTUI_COMM_EVERY - 1))
            return;
        weight = KTUI_COMM_EVERY;
    }
    struct ktui_comm_key key = {.probe = slot};
    __builtin_memcpy(key.comm, ktui_comm(who), sizeof(key.comm));
    u64 zero = 0;
    u64 *n = ktui_comms.lookup_or_try_init(&key, &zero);
    if (n)
        __sync_fetch_and_add(n, weight);
    else
        ktui_bump(ktui_comms_dropped.lookup(&slot));
}

static __always_inline void ktui_account_return(u32 slot, u64 latency, u64 rc)
{
    struct ktui_hist *h = ktui_hist.lookup(&slot);
    if (h) {
        u32 s = ktui_log2_slot(latency);
        if (s < KTUI_HIST_SLOTS)
            h->slots[s]++;
    }
    u64 *sum = ktui_lat_sum.lookup(&slot);
    if (sum)
        *sum += latency;
    s64 err = (s64)rc;
    /* int-returning functions leave the upper half of rax zero */
    if (err >= 0 && (rc >> 32) == 0)
        err = (s32)(u32)rc;
    if (err < 0 && err >= -KTUI_MAX_ERRNO) {
        struct ktui_errno_key key = {.probe = slot, .err = (u32)(-err)};
        u64 zero = 0;
        u64 *n = ktui_errnos.lookup_or_try_init(&key, &zero);
        if (n)
            __sync_fetch_and_add(n, 1);
    }
}

/* Sampling (1 in N) and a per-CPU events/s cap: 1 = emit. */
static __always_inline int ktui_admit(u32 slot, u64 sample, u64 limit, u64 now)
{
    if (sample > 1) {
        u64 *n = ktui_sampled.lookup(&slot);
        if (!n)
            return 0;
        u64 seen = (*n)++;
        if (seen % sample)
            return 0;
    }
    if (limit) {
        struct ktui_window *w = ktui_window.lookup(&slot);
        if (!w)
            return 0;
        if (now - w->start >= 1000000000ULL) {
            w->start = now;
            w->count = 0;
        }
        if (w->count >= limit)
            return 0;
        w->count++;
    }
    return 1;
}

static __always_inline struct ktui_entry *ktui_entry_of(struct ktui_plan *plan, u64 pid_tgid)
{
    u32 idx = (plan->entry_block % KTUI_ENTRY_BLOCKS) * KTUI_ENTRY_SLOTS
              + ((u32)pid_tgid & (KTUI_ENTRY_SLOTS - 1));
    return ktui_entries.lookup(&idx);
}

/* The two halves of a return probe, shared by ktui_run and the bare path
 * (who is in the scratch state there, on the stack here). The entry: the
 * set-wide filters, then the thread's slot stamped (who, the plan's
 * generation, when). The slot, or 0 when filtered out or none. */
static __always_inline struct ktui_entry *ktui_enter(struct ktui_who *who, struct ktui_plan *plan)
{
    if (!ktui_set_filter(who))
        return 0;
    struct ktui_entry *entry = ktui_entry_of(plan, who->pid_tgid);
    if (!entry)
        return 0;
    entry->tid = (u32)who->pid_tgid;
    entry->gen = plan->gen;
    entry->ts = bpf_ktime_get_ns();
    return entry;
}

/* The return: the slot's stamp taken (*now, *latency) and cleared, if this
 * thread's entry made it under this plan. 0 when it was entered before we
 * attached, filtered out, or is another thread's. */
static __always_inline struct ktui_entry *ktui_leave(struct ktui_who *who, struct ktui_plan *plan,
                                                     u64 *now, u64 *latency)
{
    struct ktui_entry *entry = ktui_entry_of(plan, who->pid_tgid);
    if (!entry || !entry->ts || entry->tid != (u32)who->pid_tgid || entry->gen != plan->gen)
        return 0;
    *now = bpf_ktime_get_ns();
    *latency = *now - entry->ts;
    entry->ts = 0;
    return entry;
}

/* What both variants share, once the variant has filled st: the
 * arguments (entry half and tracing, if F_ARGS), the return value, the
 * registers (F_REGS). Each hit gathers only what its plan's flags ask
 * for (plan.work_flags): a counting probe takes no time stamp, no CPU id
 * and no arguments. */
static __always_inline int ktui_run(struct ktui_state *st, struct ktui_plan *plan, u64 cookie, u32 slot)
{
    u32 flags = plan->flags;
    if (cookie & KTUI_COOKIE_ENTRY) {
        /* the entry half of a return probe: when, and the arguments (only
         * this thread's return reads them, after this entry is done) */
        struct ktui_entry *entry = ktui_enter(&st->who, plan);
        if (entry && (flags & F_ARGS))
            __builtin_memcpy(entry->args, st->args, sizeof(entry->args));
        return 0;
    }
    u64 now = 0, latency = 0;
    if (flags & F_RETURN) {
        struct ktui_entry *entry = ktui_leave(&st->who, plan, &now, &latency);
        if (!entry)
            return 0;
        if (flags & F_ARGS)
            __builtin_memcpy(st->args, entry->args, sizeof(st->args));
    } else {
        if (!ktui_set_filter(&st->who))
            return 0;
        if (flags & F_TIME)
            now = bpf_ktime_get_ns();
    }
    if (flags & F_CPU)
        st->cpu = bpf_get_smp_processor_id();
    if (flags & F_EMITS) {
        u32 n = plan->nfetch;
        if (n > KTUI_MAX_FETCHES)
            return 0;
        /* one block per fetch, written out */
        KTUI_FETCH(0) KTUI_FETCH(1) KTUI_FETCH(2) KTUI_FETCH(3)
        KTUI_FETCH(4) KTUI_FETCH(5) KTUI_FETCH(6) KTUI_FETCH(7)
    }
    if (!ktui_filter(st, plan))
        return 0;
    ktui_count(&st->who, slot);
    if (flags & F_RETURN)
        ktui_account_return(slot, latency, st->retval);
    if (!(flags & F_EMITS))
        return 0;
    if (!ktui_admit(slot, plan->sample, plan->rate_limit, now))
        return 0;
    __builtin_memcpy(st->e.comm, ktui_comm(&st->who), sizeof(st->e.comm));
    st->e.ts = now;
    st->e.latency = latency;
    st->e.probe = (u32)cookie;
    st->e.cpu = st->cpu;
    st->e.pid = st->who.pid_tgid >> 32;
    st->e.tid = (u32)st->who.pid_tgid;
    /* a u64 and one bound: the verifier must see the size it checked */
    u64 size = plan->record_size;
    if (size > KTUI_RECORD_MAX)
        return 0;
    if (ktui_events.ringbuf_output(&st->e, size, 0) == 0)
        ktui_bump(ktui_emitted.lookup(&slot));
    else
        ktui_bump(ktui_lost.lookup(&slot));
    return 0;
}

/* F_BARE: a probe without filter, fetch, event or rate limit. Its hit
 * needs no per-CPU scratch state, whose lookup on 6.1 is a helper call
 * (the verifier inlines only plain arrays' there) in a hit that makes few
 * others: who made it is kept on the stack. A call probe only counts. */
static __always_inline int ktui_count_only(u32 slot)
{
    struct ktui_who who = {};
    who.pid_tgid = bpf_get_current_pid_tgid();
    if (ktui_set_filter(&who))
        ktui_count(&who, slot);
    return 0;
}

/* ... a return probe counts and times: its entry stamps the time (after
 * the set-wide filters), its return takes the latency and `rc` (its errno)
 * into the stats, as ktui_run does for any return probe. */
static __always_inline int ktui_time_only(struct ktui_plan *plan, u64 cookie, u32 slot, u64 rc)
{
    struct ktui_who who = {};
    who.pid_tgid = bpf_get_current_pid_tgid();
    if (cookie & KTUI_COOKIE_ENTRY) {
        ktui_enter(&who, plan);
        return 0;
    }
    u64 now = 0, latency = 0;
    if (!ktui_leave(&who, plan, &now, &latency))
        return 0;
    ktui_count(&who, slot);
    ktui_account_return(slot, latency, rc);
    return 0;
}

#ifndef KTUI_TRACING
/* The kprobe variant: pt_regs, and the slot in the attach cookie. */
int ktui_generic(struct pt_regs *ctx)
{
    u64 cookie = bpf_get_attach_cookie(ctx);
    u32 slot = cookie & 0xffff;
    u32 zero = 0;
    struct ktui_plan *plan = ktui_plans.lookup(&slot);
    if (!plan)
        return 0;
    if (plan->flags & F_BARE) {
        if (plan->flags & F_RETURN)
            return ktui_time_only(plan, cookie, slot, PT_REGS_RC(ctx));
        return ktui_count_only(slot);
    }
    struct ktui_state *st = ktui_state.lookup(&zero);
    if (!st)
        return 0;
    st->who.pid_tgid = bpf_get_current_pid_tgid();
    st->who.have_comm = 0;
    if (cookie & KTUI_COOKIE_ENTRY) {
        /* a return probe's entry: the arguments, if its return reads them */
        if (plan->flags & F_ARGS) {
            st->args[0] = ctx->di;
            st->args[1] = ctx->si;
            st->args[2] = ctx->dx;
            st->args[3] = ctx->cx;
            st->args[4] = ctx->r8;
            st->args[5] = ctx->r9;
        }
    } else {
        if (plan->flags & F_RETURN)
            st->retval = PT_REGS_RC(ctx);
        if (plan->flags & F_REGS)
            KTUI_COPY_REGS(st, ctx);
    }
    return ktui_run(st, plan, cookie, slot);
}
#else
/* The fentry/fexit variant (BPF_PROG_TYPE_TRACING): ctx is the array of
 * the function's arguments as the trampoline saved them, the return value
 * after them (fexit). The kernel verifies a tracing program for one target
 * function, so each probe loads its own copy of these instructions; a copy
 * learns its slot from its own one-element map, ktui_self, because attach
 * cookies for tracing links only came in 5.19 (2fcc82411e74). The verifier refuses a ctx
 * read past the target's argument count, which one text for every target
 * cannot know: arguments and return value come through bpf_get_func_arg
 * and bpf_get_func_ret (5.17+), which the verifier inlines as a few loads
 * checked against the count the trampoline stores, so no helper call
 * (before 5.17: one probe read of the nargs + 1 words). */
struct ktui_self {
    u64 cookie;
    u32 nargs; /* the function's argument count (before 5.17: what to read) */
    u32 pad;
};

/* argument i (0 past the function's own) */
#define KTUI_TARG(i)                                                          \
    {                                                                         \
        u64 v = 0;                                                            \
        bpf_get_func_arg(ctx, (i), &v);                                       \
        st->args[i] = v;                                                      \
    }
BPF_ARRAY(ktui_self, struct ktui_self, 1);

int ktui_generic(u64 *ctx)
{
    u32 zero = 0;
    struct ktui_self *me = ktui_self.lookup(&zero);
    if (!me)
        return 0;
    u64 cookie = me->cookie;
    u32 slot = cookie & 0xffff;
    struct ktui_plan *plan = ktui_plans.lookup(&slot);
    if (!plan)
        return 0;
    u32 flags = plan->flags;
    if ((flags & F_BARE) && !(flags & F_RETURN))
        return ktui_count_only(slot);
#if KTUI_FUNC_ARG_HELPERS
    if (flags & F_BARE) { /* before 5.17 the return value needs the probe read below */
        u64 rc = 0;
        if (!(cookie & KTUI_COOKIE_ENTRY))
            bpf_get_func_ret(ctx, &rc);
        return ktui_time_only(plan, cookie, slot, rc);
    }
#endif
    struct ktui_state *st = ktui_state.lookup(&zero);
    if (!st)
        return 0;
    st->who.pid_tgid = bpf_get_current_pid_tgid();
    st->who.have_comm = 0;
#if !KTUI_FUNC_ARG_HELPERS
    /* before 5.17: one probe read of nargs + 1 words, when the plan needs any */
    u32 nargs = me->nargs;
    if (nargs > KTUI_TRACE_ARGS)
        return 0;
    if (flags & (F_ARGS | F_RETURN)) {
        bpf_probe_read_kernel(st->targs, (nargs + 1) * 8, ctx);
        __builtin_memcpy(st->args, st->targs, sizeof(st->args));
        st->retval = st->targs[nargs];
    }
#else
    if (!(flags & F_RETURN) || (cookie & KTUI_COOKIE_ENTRY)) {
        /* a call, or a return probe's entry (its return half takes the
         * arguments its entry saved) */
        if (flags & F_ARGS) {
            KTUI_TARG(0) KTUI_TARG(1) KTUI_TARG(2) KTUI_TARG(3) KTUI_TARG(4) KTUI_TARG(5)
        }
    } else {
        u64 rc = 0;
        bpf_get_func_ret(ctx, &rc);
        st->retval = rc;
    }
#endif
    return ktui_run(st, plan, cookie, slot);
}
#endif
