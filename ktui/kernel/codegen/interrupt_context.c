/* The context a hit ran in, for its record (the top 8 bits of the header's
 * cpu field, KTUI_CONTEXT_SHIFT): a hit in an interrupt shows the
 * interrupted task's pid and comm, and the event must say so. Read from the
 * CPU's preempt count as in_nmi()/in_hardirq()/in_serving_softirq() do;
 * where the count lives is found by ktui (kernel/symbols/interrupt_context.py)
 * and given as addresses, 0 = not known on this kernel. Shared by the
 * generic program and the compiled ones. */
#define KTUI_CONTEXT_SHIFT 24
#define KTUI_CONTEXT_UNKNOWN 0
#define KTUI_CONTEXT_TASK 1
#define KTUI_CONTEXT_SOFTIRQ 2
#define KTUI_CONTEXT_HARDIRQ 3
#define KTUI_CONTEXT_NMI 4
/* include/linux/preempt.h */
#define KTUI_SOFTIRQ_OFFSET 0x100U
#define KTUI_HARDIRQ_MASK 0xf0000U
#define KTUI_HARDIRQ_OFFSET 0x10000U
#define KTUI_NMI_MASK 0xf00000U
#define KTUI_NMI_OFFSET 0x100000U

static __always_inline u32 ktui_context_of(u64 cpu_offsets, u64 preempt_count, u64 nmi_state)
{
    if (!cpu_offsets || !preempt_count)
        return KTUI_CONTEXT_UNKNOWN;
    u64 cpu = bpf_get_smp_processor_id();
    u64 base = 0;
    if (bpf_probe_read_kernel(&base, sizeof(base), (void *)(cpu_offsets + cpu * 8)))
        return KTUI_CONTEXT_UNKNOWN;
    u32 count = 0;
    if (bpf_probe_read_kernel(&count, sizeof(count), (void *)(base + preempt_count)))
        return KTUI_CONTEXT_UNKNOWN;
    if (count & KTUI_NMI_MASK) {
        /* x86's int3 handler (a kprobe inside a function, not yet a jump)
         * enters as an NMI does: its NMI and hardirq counts are int3's own
         * when no NMI runs on this CPU (nmi_state NMI_NOT_RUNNING, 0).
         * Without nmi_state the two cannot be told apart: not known. */
        if (!nmi_state)
            return KTUI_CONTEXT_UNKNOWN;
        u32 state = 1;
        if (bpf_probe_read_kernel(&state, sizeof(state), (void *)(base + nmi_state)))
            return KTUI_CONTEXT_UNKNOWN;
        if (state == 0)
            count -= KTUI_NMI_OFFSET + KTUI_HARDIRQ_OFFSET;
    }
    if (count & KTUI_NMI_MASK)
        return KTUI_CONTEXT_NMI;
    if (count & KTUI_HARDIRQ_MASK)
        return KTUI_CONTEXT_HARDIRQ;
    if (count & KTUI_SOFTIRQ_OFFSET)
        return KTUI_CONTEXT_SOFTIRQ;
    return KTUI_CONTEXT_TASK;
}
