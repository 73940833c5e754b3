/* ktui's generic probe program: one program for every probe, built ahead
 * of time and shipped (scripts/build-generic.sh; compiled on the machine
 * only where a kernel refuses the shipped bytes).
 *
 * Every attachment carries a cookie (bpf_get_attach_cookie, 5.15+): the
 * probe's slot in ktui_plans and a generation, plus KTUI_COOKIE_ENTRY on
 * the entry half of a return probe. The plan says what to fetch (registers,
 * saved arguments, dereference chains, strings), the filter (comparisons
 * and a truth table over their results), the sampling and the in-kernel
 * aggregations (hist, count and sum by key, stacks). Adding or editing a
 * probe writes a plan and attaches: no compiler runs.
 *
 * Numbers that hold on a busy machine: a return pairs with its own call's
 * entry by the whole thread id and the call's frame (entry_stack.c, pasted
 * above this text), nested calls included; each hit works in a scratch
 * area no other hit on its CPU holds (KTUI_NEST_LEVELS of them, claimed
 * with a compare-and-swap: fentry/fexit programs nest, and under
 * preemption they interleave); counters are bumped atomically for the same
 * reason. Whatever cannot be done is counted: an unpaired return, an entry
 * not stored, a hit with no free scratch area. A record holds exactly its
 * probe's header and payload, and only bytes written for this hit.
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

/* who made a probe's sampled hits: its comm and its cgroup v2 id in one
 * key, so one update per sampled hit gives both views (ktui sums over the
 * other half: top comms, top cgroups) */
struct ktui_comm_key {
    u32 probe;
    u32 pad; /* zeroed: the key is hashed as bytes */
    u64 cgroup;
    char comm[16];
};

struct ktui_window {
    u64 start;
    u64 count;
};

struct ktui_hist {
    u64 slots[KTUI_HIST_SLOTS];
};

/* who made the hit: the task, and its comm (or its cgroup id) once a
 * filter, the comm sample or an event asks for it (one helper call each,
 * at most once per hit) */
struct ktui_who {
    u64 pid_tgid;
    u32 have_comm;
    u32 have_cgroup;
    char comm[16];
    u64 cgroup;
};

/* Spans (`END since(START)`): each start that passed the set-wide filters
 * stores when and who under its key: the END's slot and generation, then
 * the key's values (START's first fetches; the thread where it has none),
 * with the values its END reads of it (`start.X`: its fetches after the
 * key). An end that finds its start takes it (pid, comm and cgroup are the
 * start's: an end often runs in an interrupt or a kworker; the values, for
 * its filter, aggregations and event: SRC_START) and counts the time since.
 * Counted: starts not kept (the map full: the START slot's ktui_unstored),
 * starts that replaced one still waiting (a requeue; ktui_replaced), ends
 * with no start (ktui_unmatched: apart from a return end's own unpaired
 * returns) and ends that took one (ktui_matched): what still waits is the
 * rest. */
struct ktui_span_key {
    u32 span;
    u32 gen;
    u64 k[KTUI_SPAN_KEYS];
};

struct ktui_span_start {
    u64 ts;
    u64 pid_tgid;
    u64 cgroup;
    char comm[16];
    u64 v[KTUI_SPAN_VALS]; /* values the start read for its end (`start.X`: SRC_START there) */
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
    /* the keys an aggregation builds: too big for the BPF stack */
    struct ktui_aggkey akey;
    struct ktui_stackkey skey;
    struct ktui_ustackkey ukey;
    u64 retval;
    u64 record; /* a tracepoint's record (SRC_RECORD): its fields are read at offsets from it */
    u64 cpu;
    u64 func; /* a wildcard's hit: which of its functions (SRC_FUNC) */
    u64 latency; /* a return's or a span end's latency (SRC_LATENCY), before its filter */
    struct ktui_span_key spkey; /* a span's key (too big for the BPF stack) */
    u64 spanvals[KTUI_SPAN_VALS]; /* a span end's values of its start (SRC_START), taken with it */
    u64 busy; /* held by a hit (ktui_claim); 64 bits: the atomics bcc's target has */
};

BPF_RINGBUF_OUTPUT(ktui_events, 2048);
BPF_ARRAY(ktui_plans, struct ktui_plan, KTUI_MAX_PROBES);
BPF_ARRAY(ktui_config, struct ktui_config, 1);
/* --cgroup: the cgroup v2 directory whose tasks (and its descendants') count */
BPF_CGROUP_ARRAY(ktui_cgroup, 1);
BPF_PERCPU_ARRAY(ktui_hits, u64, KTUI_MAX_PROBES);
BPF_PERCPU_ARRAY(ktui_emitted, u64, KTUI_MAX_PROBES);
BPF_PERCPU_ARRAY(ktui_lost, u64, KTUI_MAX_PROBES);
BPF_PERCPU_ARRAY(ktui_sampled, u64, KTUI_MAX_PROBES);
BPF_PERCPU_ARRAY(ktui_window, struct ktui_window, KTUI_MAX_PROBES);
BPF_PERCPU_ARRAY(ktui_hist, struct ktui_hist, KTUI_MAX_PROBES);
/* exact sum of a return probe's latencies (ns): a histogram's _sum */
BPF_PERCPU_ARRAY(ktui_lat_sum, u64, KTUI_MAX_PROBES);
/* each probe's own errno counts (see ktui_errno_bucket), and those that fit none */
BPF_ARRAY(ktui_errnos, u64, KTUI_MAX_PROBES * KTUI_ERRNO_BUCKETS);
BPF_PERCPU_ARRAY(ktui_errno_rest, u64, KTUI_MAX_PROBES);
BPF_HASH(ktui_comms, struct ktui_comm_key, u64, KTUI_COMM_KEYS);
BPF_PERCPU_ARRAY(ktui_comms_dropped, u64, KTUI_MAX_PROBES);
/* returns that found no entry of their own; entries that could not be kept */
BPF_PERCPU_ARRAY(ktui_unpaired, u64, KTUI_MAX_PROBES);
BPF_PERCPU_ARRAY(ktui_unstored, u64, KTUI_MAX_PROBES);
/* hits dropped: every scratch area of the CPU (or the thread's entry stack) held */
BPF_PERCPU_ARRAY(ktui_nested, u64, KTUI_MAX_PROBES);
BPF_PERCPU_ARRAY(ktui_state, struct ktui_state, KTUI_NEST_LEVELS);
/* A wildcard's hits (and a return probe's latencies) by function: each
 * function the pattern matched is attached with a site of its own in the
 * cookie (0: not a wildcard), counted where the probe's hits are. */
struct ktui_site {
    u64 hits;
    u64 lat_sum;
};
BPF_PERCPU_ARRAY(ktui_sites, struct ktui_site, KTUI_MAX_SITES);
/* Gates (`within: FUNC`): each thread's depth inside FUNC, by the gate's
 * slot (a gate between two events, `within(START .. END)`: between them,
 * by its START's slot); an entry that finds no room is counted in the gate's ktui_unstored,
 * a return that finds no entry (the call began before the gate attached,
 * or its entry was not kept) in its ktui_unpaired. A hit in an interrupt
 * reads the depth of the thread it interrupted. */
struct ktui_gate_key {
    u32 gate;
    u32 tid;
};
BPF_HASH(ktui_gates, struct ktui_gate_key, u64, KTUI_GATE_THREADS);
BPF_HASH(ktui_spans, struct ktui_span_key, struct ktui_span_start, KTUI_SPAN_MAP);
BPF_PERCPU_ARRAY(ktui_replaced, u64, KTUI_MAX_PROBES);
BPF_PERCPU_ARRAY(ktui_matched, u64, KTUI_MAX_PROBES);
BPF_PERCPU_ARRAY(ktui_unmatched, u64, KTUI_MAX_PROBES);
/* In-kernel aggregations (plan.agg), every probe's in the same maps, keyed
 * by its tag: a value histogram per slot; hits (and a sum) by key, and a
 * keyed histogram's slots by (key, slot) (AggKey.bucket), a
 * probe's keys held to its own max_keys by ktui_agg_nkeys; a hit whose new
 * key found no room counted in ktui_agg_drops, and its key remembered in
 * ktui_agg_lost (or, that full too, counted in ktui_lost_full: the
 * number of lost keys is then a lower bound); stacks by their frames. */
BPF_PERCPU_ARRAY(ktui_vhist, struct ktui_hist, KTUI_MAX_PROBES);
/* the exact sum of the values ktui_vhist counts: a Prometheus histogram's _sum */
BPF_PERCPU_ARRAY(ktui_vhist_sum, u64, KTUI_MAX_PROBES);
BPF_HASH(ktui_aggs, struct ktui_aggkey, struct ktui_aggval, KTUI_AGG_MAP_KEYS);
BPF_HASH(ktui_agg_lost, struct ktui_aggkey, u8, KTUI_AGG_MAP_KEYS);
BPF_ARRAY(ktui_agg_nkeys, u64, KTUI_MAX_PROBES);
BPF_PERCPU_ARRAY(ktui_agg_drops, u64, KTUI_MAX_PROBES);
BPF_PERCPU_ARRAY(ktui_lost_full, u64, KTUI_MAX_PROBES);
BPF_HASH(ktui_stacks, struct ktui_stackkey, u64, KTUI_STACK_MAP);
BPF_HASH(ktui_ustacks, struct ktui_ustackkey, u64, KTUI_USTACK_MAP);
BPF_PERCPU_ARRAY(ktui_stack_drop, u64, KTUI_MAX_PROBES);

/* Atomic, per-CPU counter or not: a tracing hit can be preempted in the
 * middle of an increment, and another task's hit on that CPU would be lost. */
static __always_inline void ktui_bump(void *p)
{
    u64 *v = p;
    if (v)
        __sync_fetch_and_add(v, 1);
}

static __always_inline void ktui_count_site(u64 cookie, u64 latency)
{
    u32 site = (cookie >> KTUI_COOKIE_SITE_SHIFT) & KTUI_SITE_MASK;
    if (!site)
        return;
    struct ktui_site *s = ktui_sites.lookup(&site);
    if (!s)
        return;
    __sync_fetch_and_add(&s->hits, 1);
    if (latency)
        __sync_fetch_and_add(&s->lat_sum, latency);
}

static __always_inline char *ktui_comm(struct ktui_who *who)
{
    if (!who->have_comm) {
        bpf_get_current_comm(&who->comm, sizeof(who->comm));
        who->have_comm = 1;
    }
    return who->comm;
}

/* the hit's cgroup v2 id (its directory's inode), taken once: through
 * `who` rather than the helper, so a hit counted as another task's (a
 * span's end, as its start's) is counted under that task's cgroup */
static __always_inline u64 ktui_cgroup_of(struct ktui_who *who)
{
    if (!who->have_cgroup) {
        who->cgroup = bpf_get_current_cgroup_id();
        who->have_cgroup = 1;
    }
    return who->cgroup;
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
    case SRC_RECORD:
        return st->record;
    case SRC_CGROUP:
        return ktui_cgroup_of(&st->who);
    case SRC_FUNC:
        return st->func;
    case SRC_LATENCY:
        return st->latency;
    case SRC_START:
        return st->spanvals[reg & (KTUI_SPAN_VALS - 1)];
    }
    return 0;
}

/* The payload word at offset `dest` (a multiple of 8, at most
 * KTUI_PAYLOAD_MAX - KTUI_STRING_MAX, checked by the caller). The mask is
 * written in asm so clang cannot drop it: it knows the bound, but may keep
 * dest in a stack slot from before the check, where the verifier does not
 * (and refuses a store it cannot bound). */
_Static_assert(KTUI_PAYLOAD_MAX == 512 && KTUI_STRING_MAX == 64, "ktui_payload_word's mask, ktui_string_slot's stores");
static __always_inline u64 *ktui_payload_word(struct ktui_state *st, u64 dest)
{
    asm volatile("%0 &= 0x1ff" : "+r"(dest));
    return (u64 *)&st->payload[dest];
}

/* ... a string's slot there, zeroed: a string read stops at its NUL and
 * leaves the bytes after it as they were (another hit's). */
static __always_inline u8 *ktui_string_slot(struct ktui_state *st, u64 dest)
{
    u64 *w = ktui_payload_word(st, dest);
    w[0] = 0; w[1] = 0; w[2] = 0; w[3] = 0;
    w[4] = 0; w[5] = 0; w[6] = 0; w[7] = 0;
    return (u8 *)w;
}

/* Memory a fetch reads: the kernel's, or for a user-space probe (a
 * uprobe: plan Fetch.user) the probed process's. */
static __always_inline void ktui_read(void *dst, u32 size, u64 addr, u8 user)
{
    if (user)
        bpf_probe_read_user(dst, size, (void *)addr);
    else
        bpf_probe_read_kernel(dst, size, (void *)addr);
}

/* n - 1 pointer hops, then the final offset (kprobe_events' +OFF(...)) */
#define KTUI_HOP(d)                                                           \
    if ((d) + 1 < n) {                                                        \
        u64 next = 0;                                                         \
        ktui_read(&next, sizeof(next), addr + f->offs[d], f->user);           \
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
    /* a constant (a USDT argument given as $N): its value in offs[0] */
    u64 v = f->src == SRC_CONST ? (u64)f->offs[0] : ktui_source(st, f->src, f->reg);
    u32 n = f->nderef;
    if (n > KTUI_MAX_DEREF)
        return 1;
    u64 addr = v;
    if (n) {
        KTUI_HOP(0) KTUI_HOP(1) KTUI_HOP(2) KTUI_HOP(3) KTUI_HOP(4) KTUI_HOP(5) KTUI_HOP(6)
        addr += f->offs[(n - 1) & (KTUI_MAX_DEREF - 1)];
    }
    if (f->loc) {
        /* a tracepoint's dynamic field: the u32 at addr is (length << 16 |
         * where), where counting from the record (v) or, __rel_loc, from
         * the end of that u32 */
        u32 loc = 0;
        bpf_probe_read_kernel(&loc, sizeof(loc), (void *)addr);
        addr = (f->loc == LOC_REL ? addr + sizeof(loc) : v) + (loc & 0xffff);
    }
    u32 dest = f->dest;
    if (dest > KTUI_PAYLOAD_MAX - KTUI_STRING_MAX)
        return 1;
    if (f->kind == K_KSTR || f->kind == K_USTR) {
        u8 *slot = ktui_string_slot(st, dest);
        if (f->kind == K_KSTR)
            bpf_probe_read_kernel_str(slot, KTUI_STRING_MAX, (void *)addr);
        else
            bpf_probe_read_user_str(slot, KTUI_STRING_MAX, (void *)addr);
        return 0;
    }
    u8 width = f->width;
    if (n) {
        v = 0;
        if (width == 1)
            ktui_read(&v, 1, addr, f->user);
        else if (width == 2)
            ktui_read(&v, 2, addr, f->user);
        else if (width == 4)
            ktui_read(&v, 4, addr, f->user);
        else
            ktui_read(&v, 8, addr, f->user);
    }
    v = ktui_extend(v, width, f->kind == K_SINT);
    st->vals[i] = v;
    *ktui_payload_word(st, dest) = v;
    return 0;
}

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

/* Set-wide filters: ktui's own processes (itself, its compile helper: 0 is
 * an unused place, and the idle task's hits count), --pid, --comm, --cgroup.
 * 1 = the task passes. */
static __always_inline int ktui_set_filter(struct ktui_who *who)
{
    u32 zero = 0;
    struct ktui_config *c = ktui_config.lookup(&zero);
    if (!c)
        return 0;
    u32 pid = who->pid_tgid >> 32;
    if (pid && (pid == c->exclude_pids[0] || pid == c->exclude_pids[1]))
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
    /* the whole hierarchy below it, not the leaf's id alone (as
     * bpf_get_current_cgroup_id would give) */
    if (c->has_cgroup && ktui_cgroup.check_current_task(0) != 1)
        return 0;
    return 1;
}

/* The context of this hit (interrupt_context.c), from where the config
 * says the preempt count is (0s: not known on this kernel) */
static __always_inline u32 ktui_context(void)
{
    u32 zero = 0;
    struct ktui_config *c = ktui_config.lookup(&zero);
    if (!c)
        return KTUI_CONTEXT_UNKNOWN;
    return ktui_context_of(c->context_cpu_offsets, c->context_preempt_count, c->context_nmi_state);
}

/* Count a hit that passed every filter, and who made it (comm and cgroup,
 * one key): exact for the first KTUI_COMM_EXACT hits per CPU, then a
 * random 1 in KTUI_COMM_EVERY, weighted (a fixed stride would alias with
 * a periodic workload). A sampled hit whose key finds no room is counted
 * in ktui_comms_dropped, for both views. */
static __always_inline void ktui_count(struct ktui_who *who, u32 slot)
{
    u64 *hits = ktui_hits.lookup(&slot);
    if (!hits)
        return;
    u64 seen = __sync_fetch_and_add(hits, 1);
    u64 weight = 1;
    if (seen >= KTUI_COMM_EXACT) {
        if (bpf_get_prandom_u32() & (KTUI_COMM_EVERY - 1))
            return;
        weight = KTUI_COMM_EVERY;
    }
    struct ktui_comm_key key = {.probe = slot};
    key.pad = 0;
    key.cgroup = ktui_cgroup_of(who);
    __builtin_memcpy(key.comm, ktui_comm(who), sizeof(key.comm));
    u64 zero = 0;
    u64 *n = ktui_comms.lookup_or_try_init(&key, &zero);
    if (n)
        __sync_fetch_and_add(n, weight);
    else
        ktui_bump(ktui_comms_dropped.lookup(&slot));
}

/* An errno's place in its probe's table: 1..199 as itself, the kernel's
 * own 512.. (ERESTARTSYS...) after them; -1: it fits none. */
static __always_inline int ktui_errno_bucket(u64 err)
{
    if (err < KTUI_ERRNO_LOW)
        return err;
    if (err >= KTUI_ERRNO_HIGH_BASE && err < KTUI_ERRNO_HIGH_BASE + KTUI_ERRNO_BUCKETS - KTUI_ERRNO_LOW)
        return KTUI_ERRNO_LOW + err - KTUI_ERRNO_HIGH_BASE;
    return -1;
}

/* A paired return: its latency, and its errno where the function can
 * return one (`mode`: 4, a 32-bit int; 8, a long or an ERR_PTR; 0, none:
 * a void function's rax, or a comparator's -1, is no error). */
static __always_inline void ktui_account_return(u32 slot, u64 latency, u64 rc, u32 mode)
{
    struct ktui_hist *h = ktui_hist.lookup(&slot);
    if (h) {
        u32 s = ktui_log2_slot(latency);
        if (s < KTUI_HIST_SLOTS)
            __sync_fetch_and_add(&h->slots[s], 1);
    }
    u64 *sum = ktui_lat_sum.lookup(&slot);
    if (sum)
        __sync_fetch_and_add(sum, latency);
    if (!mode)
        return;
    s64 err = (s64)rc;
    if (mode == 4 || (mode == KTUI_ERRNO_GUESS && (rc >> 32) == 0))
        err = (s32)(u32)rc; /* an int leaves the upper half of rax as it likes */
    if (err >= 0 || err < -KTUI_MAX_ERRNO)
        return;
    int bucket = ktui_errno_bucket((u64)(-err));
    if (bucket < 0) {
        ktui_bump(ktui_errno_rest.lookup(&slot));
        return;
    }
    u32 key = slot * KTUI_ERRNO_BUCKETS + (u32)bucket;
    ktui_bump(ktui_errnos.lookup(&key));
}

/* Sampling (1 in N) and a per-CPU events/s cap: 1 = emit. */
static __always_inline int ktui_admit(u32 slot, u64 sample, u64 limit, u64 now)
{
    if (sample > 1) {
        u64 *n = ktui_sampled.lookup(&slot);
        if (!n)
            return 0;
        u64 seen = __sync_fetch_and_add(n, 1);
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
        if (__sync_fetch_and_add(&w->count, 1) >= limit)
            return 0;
    }
    return 1;
}

/* The two halves of a return probe, shared by ktui_run and the bare path
 * (who is in the scratch state there, on the stack here). The entry: the
 * set-wide filters, then the call remembered on its thread's stack, with
 * `args` (0: its return reads none). What could not be kept is counted. */
static __always_inline void ktui_enter(struct ktui_who *who, struct ktui_plan *plan, u32 slot, u64 frame,
                                       u64 *args)
{
    if (!ktui_set_filter(who))
        return;
    int rc = ktui_push(slot, plan->gen, (u32)who->pid_tgid, frame, bpf_ktime_get_ns(), args);
    if (rc == KTUI_UNSTORED)
        ktui_bump(ktui_unstored.lookup(&slot));
    else if (rc == KTUI_NESTED)
        ktui_bump(ktui_nested.lookup(&slot));
}

/* The return: 1 when it paired with its call's entry (*now, *latency, and
 * the entry's arguments into args, if not 0). A return of a task the
 * set-wide filters leave out is nobody's business: 0, uncounted. One
 * whose entry is not there (entered before the probe attached, not kept,
 * or its stack busy) is counted as unpaired. */
static __always_inline int ktui_leave(struct ktui_who *who, struct ktui_plan *plan, u32 slot, u64 frame,
                                      u64 *now, u64 *latency, u64 *args)
{
    if (!ktui_set_filter(who))
        return 0;
    u64 ts = 0;
    int rc = ktui_pop(slot, plan->gen, (u32)who->pid_tgid, frame, &ts, args);
    if (rc != KTUI_PAIRED) {
        if (rc == KTUI_NESTED)
            ktui_bump(ktui_nested.lookup(&slot));
        ktui_bump(ktui_unpaired.lookup(&slot));
        return 0;
    }
    *now = bpf_ktime_get_ns();
    *latency = *now - ts;
    return 1;
}

/* The value of fetch i, as extended from its width (ktui_fetch_one). */
static __always_inline u64 ktui_val(struct ktui_state *st, u8 i)
{
    return st->vals[i & (KTUI_MAX_FETCHES - 1)];
}

/* Count this hit's kernel stack. One that could not be taken or stored
 * (its map full) is counted in ktui_stack_drop. A kprobe's stack is
 * unwound from the probed function's registers; a tracing program's
 * (bpf_get_stack's raw-tracepoint form) starts at the probed function
 * too: no frame of the program or its trampoline (tests/kernel/
 * test_aggregations.py, on 6.1 and 6.12). */
static __always_inline void ktui_kernel_stack(void *ctx, struct ktui_state *st, u32 slot, u32 tag)
{
    struct ktui_stackkey *sk = &st->skey;
    sk->tag = tag;
    long n = bpf_get_stack(ctx, sk->ip, sizeof(sk->ip), 0);
    u64 *count = 0;
    if (n > 0) {
        sk->nframes = (u32)(n / 8);
        u64 zero = 0;
        count = ktui_stacks.lookup_or_try_init(sk, &zero);
    }
    if (count)
        __sync_fetch_and_add(count, 1);
    else
        ktui_bump(ktui_stack_drop.lookup(&slot));
}

/* ... its user stack under its process, after its kernel stack if the
 * plan wants both. A kernel thread has no user frames: a stack of its own,
 * not a drop. The user frames come from the frame-pointer chain (the
 * kernel's perf callchain walk): code without frame pointers stops early. */
static __always_inline void ktui_user_stack(void *ctx, struct ktui_state *st, u32 slot, u32 tag, u32 both)
{
    struct ktui_ustackkey *uk = &st->ukey;
    uk->tag = tag;
    uk->tgid = st->who.pid_tgid >> 32;
    long kn = 0;
    if (both) {
        kn = bpf_get_stack(ctx, uk->kip, sizeof(uk->kip), 0);
    } else {
        __builtin_memset(uk->kip, 0, sizeof(uk->kip));
    }
    long un = bpf_get_stack(ctx, uk->uip, sizeof(uk->uip), BPF_F_USER_STACK);
    u64 *count = 0;
    if ((both ? kn > 0 : 1) && un >= 0) {
        uk->nkframes = (u32)(kn / 8);
        uk->nuframes = (u32)(un / 8);
        u64 zero = 0;
        count = ktui_ustacks.lookup_or_try_init(uk, &zero);
    }
    if (count)
        __sync_fetch_and_add(count, 1);
    else
        ktui_bump(ktui_stack_drop.lookup(&slot));
}

/* The probe's key of this hit (agg_key's values, comm), bucket 0: a
 * count's entry; a keyed histogram's sets the bucket after. */
static __always_inline void ktui_agg_key(struct ktui_state *st, struct ktui_plan *plan, u32 tag)
{
    struct ktui_aggkey *k = &st->akey;
    __builtin_memset(k, 0, sizeof(*k));
    k->tag = tag;
    u32 nkeys = plan->agg_nkeys;
    if (nkeys > 0)
        k->k[0] = ktui_val(st, plan->agg_key[0]);
    if (nkeys > 1)
        k->k[1] = ktui_val(st, plan->agg_key[1]);
    if (nkeys > 2)
        k->k[2] = ktui_val(st, plan->agg_key[2]);
    if (nkeys > 3)
        k->k[3] = ktui_val(st, plan->agg_key[3]);
    if (plan->agg_comm)
        __builtin_memcpy(k->comm, ktui_comm(&st->who), sizeof(k->comm));
}

/* The entry of st->akey in ktui_aggs. A key not seen before takes one of
 * the probe's max_keys first (claimed atomically, given back if the insert
 * fails: another hit inserted the same key, or the shared map is full).
 * 0: no room; the key is remembered in ktui_agg_lost (*unkept set when
 * that map is full too), and the caller counts the hit as dropped. */
static __always_inline struct ktui_aggval *ktui_agg_entry(struct ktui_state *st, struct ktui_plan *plan,
                                                          u32 slot, u32 *unkept)
{
    struct ktui_aggkey *k = &st->akey;
    struct ktui_aggval *v = ktui_aggs.lookup(k);
    if (!v) {
        u64 *used = ktui_agg_nkeys.lookup(&slot);
        if (used) {
            if (__sync_fetch_and_add(used, 1) < plan->agg_max_keys) {
                struct ktui_aggval zero = {};
                if (ktui_aggs.insert(k, &zero))
                    __sync_fetch_and_add(used, -1);
                v = ktui_aggs.lookup(k);
            } else {
                __sync_fetch_and_add(used, -1);
            }
        }
    }
    if (!v) {
        u8 none = 0;
        if (!ktui_agg_lost.lookup_or_try_init(k, &none))
            *unkept = 1;
    }
    return v;
}

/* Count the hit under its key (and add its value to the key's sum), and
 * its value's slot under (key, slot) for hist(VALUE, KEY...); a hit that
 * found no room for either is counted once in ktui_agg_drops (and once in
 * ktui_lost_full if a lost key could not be remembered): never dropped
 * silently. */
static __always_inline void ktui_count_key(struct ktui_state *st, struct ktui_plan *plan, u32 slot, u32 tag)
{
    u32 dropped = 0, unkept = 0;
    ktui_agg_key(st, plan, tag);
    if (plan->agg & AGG_COUNT) {
        struct ktui_aggval *v = ktui_agg_entry(st, plan, slot, &unkept);
        if (v) {
            __sync_fetch_and_add(&v->count, 1);
            if (plan->agg & AGG_SUM) {
                u64 add = ktui_val(st, plan->agg_sum);
                if ((plan->agg_signed & AGG_SIGNED_SUM) && (s64)add < 0)
                    add = 0; /* an errno: counted under its key, not summed ("bytes read" must not shrink) */
                __sync_fetch_and_add(&v->sum, add);
            }
        } else {
            dropped = 1;
        }
    }
    if (plan->agg & AGG_KHIST) {
        u64 val = ktui_val(st, plan->agg_hist);
        u32 s = ktui_log2_slot(val);
        /* a negative value of a signed fetch (an errno) is in no histogram */
        if (!((plan->agg_signed & AGG_SIGNED_HIST) && (s64)val < 0) && s < KTUI_HIST_SLOTS) {
            st->akey.bucket = s + 1;
            struct ktui_aggval *v = ktui_agg_entry(st, plan, slot, &unkept);
            if (v) {
                __sync_fetch_and_add(&v->count, 1);
                __sync_fetch_and_add(&v->sum, val); /* the key's exact _sum */
            } else {
                dropped = 1;
            }
        }
    }
    if (dropped)
        ktui_bump(ktui_agg_drops.lookup(&slot));
    if (unkept)
        ktui_bump(ktui_lost_full.lookup(&slot));
}

/* A hit that passed the filter, into its probe's aggregations. */
static __always_inline void ktui_aggregate(void *ctx, struct ktui_state *st, struct ktui_plan *plan, u32 slot,
                                           u32 tag)
{
    u32 agg = plan->agg;
    if (agg & AGG_HIST) {
        u64 v = ktui_val(st, plan->agg_hist);
        struct ktui_hist *h = ktui_vhist.lookup(&slot);
        if (h && !((plan->agg_signed & AGG_SIGNED_HIST) && (s64)v < 0)) {
            u32 s = ktui_log2_slot(v);
            if (s < KTUI_HIST_SLOTS) {
                __sync_fetch_and_add(&h->slots[s], 1);
                u64 *sum = ktui_vhist_sum.lookup(&slot);
                if (sum)
                    __sync_fetch_and_add(sum, v);
            }
        }
    }
    if (agg & (AGG_COUNT | AGG_KHIST))
        ktui_count_key(st, plan, slot, tag);
    if (agg & AGG_USTACK)
        ktui_user_stack(ctx, st, slot, tag, agg & AGG_KSTACK);
    else if (agg & AGG_KSTACK)
        ktui_kernel_stack(ctx, st, slot, tag);
}

/* A gate's own hit: its function entered (the thread one deeper) or
 * returned (one less; the entry goes at 0). A gate between two events
 * (`within(START .. END)`) has a slot on each: their plan.gate names the
 * START's slot, which keys the depths and holds the counters; the END's
 * has F_GATE_END; a return end's entry half does nothing. The set-wide
 * filters apply to both halves alike, so a return finds its entry unless
 * it was not kept. */
static __always_inline int ktui_gate_step(struct ktui_who *who, struct ktui_plan *plan, u32 slot, u64 cookie)
{
    if (!ktui_set_filter(who))
        return 0;
    u32 gate = slot;
    u32 open = (cookie & KTUI_COOKIE_ENTRY) != 0;
    if (plan->gate) {
        if (open)
            return 0;
        gate = plan->gate - 1;
        open = !(plan->flags & F_GATE_END);
    }
    struct ktui_gate_key k = {.gate = gate, .tid = (u32)who->pid_tgid};
    u64 *depth = ktui_gates.lookup(&k);
    if (open) {
        ktui_count(who, slot);
        if (depth) {
            __sync_fetch_and_add(depth, 1);
            return 0;
        }
        u64 one = 1;
        if (ktui_gates.insert(&k, &one))
            ktui_bump(ktui_unstored.lookup(&gate));
        return 0;
    }
    if (!depth) {
        ktui_bump(ktui_unpaired.lookup(&gate));
        return 0;
    }
    if (*depth <= 1)
        ktui_gates.delete(&k);
    else
        __sync_fetch_and_add(depth, -1);
    return 0;
}

/* Whether the thread is inside the plan's gate (1 without one). */
static __always_inline int ktui_inside(struct ktui_plan *plan, struct ktui_who *who)
{
    u32 gate = plan->gate;
    if (!gate)
        return 1;
    struct ktui_gate_key k = {.gate = gate - 1, .tid = (u32)who->pid_tgid};
    u64 *depth = ktui_gates.lookup(&k);
    return depth && *depth > 0;
}

/* A span's key, from this hit's fetches (the plan's first span_nkeys) or
 * its thread, into st->spkey. */
static __always_inline struct ktui_span_key *ktui_span_key_of(struct ktui_state *st, struct ktui_plan *plan)
{
    struct ktui_span_key *k = &st->spkey;
    __builtin_memset(k, 0, sizeof(*k));
    k->span = plan->span - 1;
    k->gen = plan->span_gen;
    u32 n = plan->span_nkeys;
    if (!n)
        k->k[0] = st->who.pid_tgid;
    if (n > 0)
        k->k[0] = st->vals[0];
    if (n > 1)
        k->k[1] = st->vals[1];
    if (n > 2)
        k->k[2] = st->vals[2];
    if (n > 3)
        k->k[3] = st->vals[3];
    return k;
}

/* A span's start: counted as its slot's hit, then stored (when, who). */
static __always_inline void ktui_span_begin(struct ktui_state *st, struct ktui_plan *plan, u32 slot)
{
    struct ktui_span_key *k = ktui_span_key_of(st, plan);
    ktui_count(&st->who, slot);
    struct ktui_span_start v = {};
    v.pid_tgid = st->who.pid_tgid;
    v.cgroup = ktui_cgroup_of(&st->who);
    __builtin_memcpy(v.comm, ktui_comm(&st->who), sizeof(v.comm));
    /* the values its end reads (`start.X`): the fetches after the key */
    u32 nk = plan->span_nkeys, nv = plan->span_nvals;
    if (nv > 0)
        v.v[0] = st->vals[nk & (KTUI_MAX_FETCHES - 1)];
    if (nv > 1)
        v.v[1] = st->vals[(nk + 1) & (KTUI_MAX_FETCHES - 1)];
    if (nv > 2)
        v.v[2] = st->vals[(nk + 2) & (KTUI_MAX_FETCHES - 1)];
    if (nv > 3)
        v.v[3] = st->vals[(nk + 3) & (KTUI_MAX_FETCHES - 1)];
    v.ts = bpf_ktime_get_ns();
    if (ktui_spans.lookup(k))
        ktui_bump(ktui_replaced.lookup(&slot));
    if (ktui_spans.update(k, &v))
        ktui_bump(ktui_unstored.lookup(&slot));
}

/* A span's end: 1 when it took its start (*now, *latency; the hit is then
 * the start's task's). One whose start is not there (made before the span
 * attached, not kept, left out by the set-wide filters, or taken by
 * another end of the same key first) is counted as unmatched. */
static __always_inline int ktui_span_end(struct ktui_state *st, struct ktui_plan *plan, u32 slot, u64 *now,
                                         u64 *latency)
{
    struct ktui_span_key *k = ktui_span_key_of(st, plan);
    struct ktui_span_start *v = ktui_spans.lookup(k);
    if (!v) {
        ktui_bump(ktui_unmatched.lookup(&slot));
        return 0;
    }
    u64 ts = v->ts;
    st->who.pid_tgid = v->pid_tgid;
    st->who.cgroup = v->cgroup;
    st->who.have_cgroup = 1;
    __builtin_memcpy(st->who.comm, v->comm, sizeof(st->who.comm));
    st->who.have_comm = 1;
    __builtin_memcpy(st->spanvals, v->v, sizeof(st->spanvals));
    /* read, then taken: of two ends racing for one start, the one whose
     * delete fails did not take it */
    if (ktui_spans.delete(k)) {
        ktui_bump(ktui_unmatched.lookup(&slot));
        return 0;
    }
    ktui_bump(ktui_matched.lookup(&slot));
    *now = bpf_ktime_get_ns();
    *latency = *now - ts;
    return 1;
}

/* Fetch i if it is in `todo`, a mask of fetches (a bit test: a range
 * test on two bounds would split the verifier's states at every fetch). */
#define KTUI_FETCH(i)                                                         \
    if ((todo & (1U << (i))) && ktui_fetch_one((i), st, plan))               \
        return 0;

/* What both variants share, once the variant has filled st: the
 * arguments (entry half and tracing, if F_ARGS), the return value, the
 * registers (F_REGS). Each hit gathers only what its plan's flags ask
 * for (plan.work_flags): a counting probe takes no time stamp, no CPU id
 * and no arguments. `frame` identifies the call for its return (see
 * entry_stack.c). */
static __always_inline int ktui_run(void *ctx, struct ktui_state *st, struct ktui_plan *plan, u64 cookie,
                                    u32 slot, u64 frame)
{
    u32 flags = plan->flags;
    if (flags & F_GATE)
        return ktui_gate_step(&st->who, plan, slot, cookie);
    if (cookie & KTUI_COOKIE_ENTRY) {
        /* the entry half of a return probe: when, and the arguments (only
         * this call's return reads them) */
        ktui_enter(&st->who, plan, slot, frame, (flags & F_ARGS) ? st->args : 0);
        return 0;
    }
    u64 now = 0, latency = 0;
    if (flags & F_RETURN) {
        if (!ktui_leave(&st->who, plan, slot, frame, &now, &latency, (flags & F_ARGS) ? st->args : 0))
            return 0;
    } else if (!(flags & F_SPAN_END) || !plan->span_nkeys) {
        /* (a span's end joined by a key: its start's task passed them, or
         * no start is there; one joined by the thread is that task) */
        if (!ktui_set_filter(&st->who))
            return 0;
        if (flags & F_TIME)
            now = bpf_ktime_get_ns();
    }
    if (!ktui_inside(plan, &st->who))
        return 0; /* `within:` its thread is not inside the gate's function now */
    if (flags & F_CPU)
        st->cpu = bpf_get_smp_processor_id();
    st->func = ((cookie >> KTUI_COOKIE_SITE_SHIFT) & KTUI_SITE_MASK) - plan->site_base;
    /* first the fetches the filter reads ... */
    u32 todo = plan->fetch_before;
    KTUI_FETCH(0) KTUI_FETCH(1) KTUI_FETCH(2) KTUI_FETCH(3)
    KTUI_FETCH(4) KTUI_FETCH(5) KTUI_FETCH(6) KTUI_FETCH(7)
    if (flags & F_SPAN_START) {
        ktui_span_begin(st, plan, slot);
        return 0;
    }
    /* a span's end takes its start whether or not its filter passes */
    if ((flags & F_SPAN_END) && !ktui_span_end(st, plan, slot, &now, &latency))
        return 0;
    /* known here for a return and a span's end alike: the filter and the
     * aggregations' fetches (after it) read it */
    st->latency = latency;
    if (!ktui_filter(st, plan))
        return 0;
    ktui_count(&st->who, slot);
    ktui_count_site(cookie, latency);
    if (flags & (F_RETURN | F_SPAN_END))
        ktui_account_return(slot, latency, st->retval, plan->errno_mode);
    if (plan->agg) {
        /* the fetches only the aggregations read, then the aggregations */
        todo = plan->fetch_agg;
        KTUI_FETCH(0) KTUI_FETCH(1) KTUI_FETCH(2) KTUI_FETCH(3)
        KTUI_FETCH(4) KTUI_FETCH(5) KTUI_FETCH(6) KTUI_FETCH(7)
        ktui_aggregate(ctx, st, plan, slot, (u32)cookie);
    }
    if (!(flags & F_EMITS))
        return 0;
    if (!ktui_admit(slot, plan->sample, plan->rate_limit, now))
        return 0;
    /* ... then the rest, only for a hit that is written out */
    todo = plan->fetch_after;
    KTUI_FETCH(0) KTUI_FETCH(1) KTUI_FETCH(2) KTUI_FETCH(3)
    KTUI_FETCH(4) KTUI_FETCH(5) KTUI_FETCH(6) KTUI_FETCH(7)
    __builtin_memcpy(st->e.comm, ktui_comm(&st->who), sizeof(st->e.comm));
    st->e.ts = now;
    st->e.latency = latency;
    st->e.probe = (u32)cookie;
    /* the context it ran in, in the top bits: a CPU number fits in 24 */
    st->e.cpu = st->cpu | (ktui_context() << KTUI_CONTEXT_SHIFT);
    st->e.pid = st->who.pid_tgid >> 32;
    st->e.tid = (u32)st->who.pid_tgid;
    /* through who, as pid and comm: a span's end carries its start's */
    st->e.cgroup = ktui_cgroup_of(&st->who);
    /* this probe's own size: its header and payload, every byte written
     * above. A u64 and one bound: the verifier must see the size it checked */
    u64 size = plan->record_size;
    if (size > KTUI_RECORD_MAX)
        return 0;
    if (ktui_events.ringbuf_output(&st->e, size, BPF_RB_NO_WAKEUP) == 0)
        ktui_bump(ktui_emitted.lookup(&slot));
    else
        ktui_bump(ktui_lost.lookup(&slot));
    return 0;
}

/* F_BARE: a probe without filter, fetch, event or rate limit. Its hit
 * needs no per-CPU scratch state, whose lookup on 6.1 is a helper call
 * (the verifier inlines only plain arrays' there) in a hit that makes few
 * others: who made it is kept on the stack. A call probe only counts. */
static __always_inline int ktui_count_only(u32 slot, u64 cookie)
{
    struct ktui_who who = {};
    who.pid_tgid = bpf_get_current_pid_tgid();
    if (ktui_set_filter(&who)) {
        ktui_count(&who, slot);
        ktui_count_site(cookie, 0);
    }
    return 0;
}

/* ... a return probe counts and times: its entry remembers the call (after
 * the set-wide filters), its return takes the latency and `rc` (its errno)
 * into the stats, as ktui_run does for any return probe. */
static __always_inline int ktui_time_only(struct ktui_plan *plan, u64 cookie, u32 slot, u64 rc, u64 frame)
{
    struct ktui_who who = {};
    who.pid_tgid = bpf_get_current_pid_tgid();
    if (cookie & KTUI_COOKIE_ENTRY) {
        ktui_enter(&who, plan, slot, frame, 0);
        return 0;
    }
    u64 now = 0, latency = 0;
    if (!ktui_leave(&who, plan, slot, frame, &now, &latency, 0))
        return 0;
    ktui_count(&who, slot);
    ktui_count_site(cookie, latency);
    ktui_account_return(slot, latency, rc, plan->errno_mode);
    return 0;
}

/* A scratch area no other hit on this CPU holds: a hit nested in another
 * (or, for a preemptible tracing program, interleaved with one) takes the
 * next. 0: every area is held, and the caller counts the hit as nested.
 * (Written out: bcc takes no map call inside a macro.) */
static __always_inline int ktui_take(struct ktui_state *st)
{
    return st && !__sync_val_compare_and_swap(&st->busy, 0, 1);
}

static __always_inline struct ktui_state *ktui_claim(void)
{
    u32 level = 0;
    struct ktui_state *st = ktui_state.lookup(&level);
    if (ktui_take(st))
        return st;
    level = 1;
    st = ktui_state.lookup(&level);
    if (ktui_take(st))
        return st;
    level = 2;
    st = ktui_state.lookup(&level);
    if (ktui_take(st))
        return st;
    return 0;
}

/* A hit's scratch area, who made the hit noted in it; 0 when every area
 * is held (the hit is then counted as nested). */
static __always_inline struct ktui_state *ktui_begin(u32 slot)
{
    struct ktui_state *st = ktui_claim();
    if (!st) {
        ktui_bump(ktui_nested.lookup(&slot));
        return 0;
    }
    st->who.pid_tgid = bpf_get_current_pid_tgid();
    st->who.have_comm = 0;
    st->who.have_cgroup = 0;
    return st;
}

/* The hit is done with its area: release it, after everything it wrote. */
static __always_inline int ktui_release(struct ktui_state *st, int rc)
{
    ktui_barrier();
    st->busy = 0;
    return rc;
}

#if defined(KTUI_TRACEPOINT)
/* The tracepoint variant (BPF_PROG_TYPE_TRACEPOINT): ctx is the event's
 * record, as tracefs' format file lays it out; the slot comes in the attach
 * cookie of its perf link (5.15+). The verifier lets a tracepoint program
 * read its context only at constant offsets, and one text serves every
 * event: so the record's address is kept (SRC_RECORD) and each field read
 * from it by a probe read at the offset the plan says. No return half, so
 * no frame. */
int ktui_generic(void *ctx)
{
    u64 cookie = bpf_get_attach_cookie(ctx);
    u32 slot = cookie & 0xffff;
    struct ktui_plan *plan = ktui_plans.lookup(&slot);
    if (!plan)
        return 0;
    if (plan->flags & F_BARE)
        return ktui_count_only(slot, cookie);
    struct ktui_state *st = ktui_begin(slot);
    if (!st)
        return 0;
    st->record = (u64)ctx;
    return ktui_release(st, ktui_run(ctx, st, plan, cookie, slot, 0));
}
#elif !defined(KTUI_TRACING)
/* The kprobe variant: pt_regs, and the slot in the attach cookie. A call's
 * frame is its stack pointer at entry, which its return sees 8 bytes
 * higher (the return address popped): entry_stack.c. */
int ktui_generic(struct pt_regs *ctx)
{
    u64 cookie = bpf_get_attach_cookie(ctx);
    u32 slot = cookie & 0xffff;
    struct ktui_plan *plan = ktui_plans.lookup(&slot);
    if (!plan)
        return 0;
    u64 frame = (cookie & KTUI_COOKIE_ENTRY) ? ctx->sp : ctx->sp - 8;
    if (plan->flags & F_BARE) {
        if (plan->flags & F_RETURN)
            return ktui_time_only(plan, cookie, slot, PT_REGS_RC(ctx), frame);
        return ktui_count_only(slot, cookie);
    }
    struct ktui_state *st = ktui_begin(slot);
    if (!st)
        return 0;
    /* pt_regs is read in one place only: with two copies of the reads
     * (the entry's arguments, the registers) clang merged their tails into
     * a read through ctx + 64, which the verifier refuses ("dereference of
     * modified ctx ptr") */
    u32 entry = (cookie & KTUI_COOKIE_ENTRY) != 0;
    if (entry ? (plan->flags & F_ARGS) : (plan->flags & F_REGS))
        KTUI_COPY_REGS(st, ctx);
    if (entry && (plan->flags & F_ARGS)) {
        /* a return probe's entry: the arguments, if its return reads them */
        KTUI_ARGS_FROM_REGS(st);
    } else if (!entry && (plan->flags & F_RETURN)) {
        st->retval = PT_REGS_RC(ctx);
    }
    return ktui_release(st, ktui_run(ctx, st, plan, cookie, slot, frame));
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
    /* a call's frame: the trampoline's argument area, which its fentry and
     * its fexit programs both get as ctx (entry_stack.c) */
    u64 frame = (u64)ctx;
    u32 flags = plan->flags;
    if ((flags & F_BARE) && !(flags & F_RETURN))
        return ktui_count_only(slot, cookie);
#if KTUI_FUNC_ARG_HELPERS
    if (flags & F_BARE) { /* before 5.17 the return value needs the probe read below */
        u64 rc = 0;
        if (!(cookie & KTUI_COOKIE_ENTRY))
            bpf_get_func_ret(ctx, &rc);
        return ktui_time_only(plan, cookie, slot, rc, frame);
    }
#endif
    struct ktui_state *st = ktui_begin(slot);
    if (!st)
        return 0;
#if !KTUI_FUNC_ARG_HELPERS
    /* before 5.17: one probe read of nargs + 1 words, when the plan needs any */
    u32 nargs = me->nargs;
    if (nargs > KTUI_TRACE_ARGS)
        return ktui_release(st, 0);
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
    return ktui_release(st, ktui_run(ctx, st, plan, cookie, slot, frame));
}
#endif
