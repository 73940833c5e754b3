"""fentry/fexit or a kprobe: which way each probe enters the kernel, and why.

fentry/fexit (BPF trampolines) cost less than an int3 kprobe and an fexit
sees every return (a kretprobe drops the returns past its maxactive), but
they need what a kprobe does not:

- the generic engine (ktui loads its tracing variant per probe with bpf(2),
  kernel/generic/loader.py: bcc 0.26 would attach every kfunc__ function of
  a program inside BPF(), switched-off probes too);
- a kernel whose fentry/fexit work (the `fentry` feature, probed: see
  kernel/machine/features.py) and its BTF, with the function in vmlinux's BTF (a
  module's function, a compiler copy `.isra.N` or an inlined one is not)
  and only once there (static functions sharing a name: kprobes take
  kallsyms' first, the BTF id could be another);
- no more arguments than the kernel's trampolines take (`trace_args`,
  probed: 6, or 12 where a trampoline took a 7-argument function), none a
  struct by value;
- a function off the verifier's BTF deny list (btf_id_deny);
- a probe text that reads no register, at no offset or address
  (lang/attach_rules).

`choose` answers from those facts alone (host tests give it a built BTF
and given features); the kernel may still refuse a load or an attach
(EBUSY, ENOTSUPP, the verifier), and then the session falls back to a
kprobe with the reason. A feature the probes could not check (no
privilege) does not stop fentry: the kernel answers at the attach.
"""

from __future__ import annotations

from dataclasses import dataclass

from ktui.btf.decode import BtfError
from ktui.lang.attach_rules import text_obstacle
from ktui.lang.model import Probe

FENTRY = "fentry"
KPROBE = "kprobe"

# kernel/bpf/verifier.c btf_id_deny (6.1 to 6.12): trampolines on these
# would recurse into the BPF machinery itself.
DENY_LIST = frozenset({
    "migrate_disable", "migrate_enable", "rcu_read_unlock_strict",
    "preempt_count_add", "preempt_count_sub", "__rcu_read_lock", "__rcu_read_unlock",
})

_STRUCT, _UNION, _TYPEDEF, _VOLATILE, _CONST, _RESTRICT, _TYPE_TAG = 4, 5, 8, 9, 10, 11, 18


@dataclass(frozen=True)
class Choice:
    """`via` is FENTRY or KPROBE; `btf_id` and `nargs` say what a fentry
    copy is loaded for. `reason`: why not fentry, where it was wanted
    ("" when it goes by fentry, or by kprobe because it was told to).
    `refused`: `attach: fentry` was forced and cannot be had."""

    via: str
    reason: str = ""
    btf_id: int = 0
    nargs: int = 0
    refused: bool = False


AUTO = "auto"

# Why an `auto` probe goes by kprobe when fentry would do, but its program
# is not to be had without a compile: a kprobe counts through the
# dispatcher from the first moment; an fentry probe would count nothing
# until the compile ends (tens of seconds on a first start).
NOT_COMPILED = ("the fentry/fexit variant is not compiled yet: a kprobe counts now; "
                "it compiles in the background and later starts use fentry")
NO_CACHE = "--no-cache: the fentry/fexit variant would be compiled first; a kprobe counts now"


def without_compile(choice: Choice, mode: str, *, variant_ready: bool, cache: bool) -> Choice:
    """`choice`, unless it is fentry under `auto` and the tracing variant is
    neither loaded nor cached (`variant_ready`): then a kprobe, saying why.
    `attach: fentry` waits for the compile instead (it was asked for)."""
    if choice.via != FENTRY or mode != AUTO or variant_ready:
        return choice
    return Choice(KPROBE, NOT_COMPILED if cache else NO_CACHE)


def fentry_possible(*, features, btf) -> bool:
    """Whether any probe of this kernel could go by fentry/fexit (so the
    tracing variant may have to be compiled): fentry not probed absent,
    and a BTF that reads."""
    return features.has("fentry") is not False and btf is not None and not btf.problem()


SAFE_ARGS = 6  # what every trampoline takes: the limit where the kernel's could not be probed


def max_args(features) -> int:
    """Arguments a trampoline takes on this kernel (features.trace_args:
    6, or 12), 6 where the probes could not tell."""
    return features.trace_args or SAFE_ARGS


def choose(probe: Probe, mode: str, *, features, btf, generic: bool) -> Choice:
    """How `probe` (its effective `attach:` mode) should enter the kernel.
    `features`: the kernel's (kernel/machine/features.Features); `btf`: a
    ktui.btf.index.KernelBtf (None: none could be opened); `generic`: the
    probe runs in the generic engine."""
    if mode == KPROBE:
        return Choice(KPROBE)
    why = _obstacle(probe, features=features, btf=btf, generic=generic)
    if isinstance(why, str):
        return Choice(KPROBE, why, refused=mode == FENTRY)
    btf_id, nargs = why
    return Choice(FENTRY, btf_id=btf_id, nargs=nargs)


def _obstacle(probe: Probe, *, features, btf, generic: bool):
    """Why not fentry (a string), or (FUNC id, argument count)."""
    why = text_obstacle(probe)
    if why:
        return why
    if not generic:
        return "fentry goes through the generic engine, and this probe is compiled"
    if features.has("fentry") is False:
        return f"this kernel's fentry/fexit do not work ({features['fentry'].detail})"
    if btf is None or btf.problem():
        return (btf.problem() if btf is not None else None) or "no BTF"
    name = str(probe.target.symbol)
    if name in DENY_LIST:
        return f"{name} is on the kernel's BTF deny list for trampolines"
    try:
        shape = function_shape(btf, name)
    except (BtfError, OSError) as exc:  # a BTF that does not read: kprobes still work
        return f"BTF unreadable: {exc}"
    if isinstance(shape, str):
        return shape
    btf_id, nargs = shape
    limit = max_args(features)
    if nargs > limit:
        unsure = "" if features.trace_args else " (more could not be checked)"
        return f"{name} has {nargs} arguments; trampolines take {limit} on this kernel{unsure}"
    return btf_id, nargs


def function_shape(btf, name: str) -> tuple[int, int] | str:
    """(FUNC id, argument count) of vmlinux's one function `name`, or why a
    trampoline cannot take it whatever the kernel (not in BTF, twice in it,
    variable arguments, a struct by value)."""
    ids = btf.function_ids(name)
    if not ids:
        return f"{name} is not in vmlinux's BTF (a module's function, a compiler copy, or inlined)"
    if len(ids) > 1:
        return f"{len(ids)} functions are called {name} in BTF; a kprobe takes kallsyms' first"
    raw = btf.vmlinux()
    proto = raw.head(ids[0])[3]
    _, vlen, _, _ = raw.head(proto)
    params = _params(raw, proto, vlen)
    if params and params[-1] == (0, 0):
        return f"{name} takes variable arguments"
    for _, type_id in params:
        if _kind(raw, type_id) in (_STRUCT, _UNION):
            return f"{name} takes a struct by value"
    return ids[0], len(params)


# Functions of more than 6 arguments, rarely called, to try a trampoline on
# (feature_probes): the first one this kernel has in that shape.
MANY_ARGS_CANDIDATES = ("do_mmap", "__kmalloc_node_track_caller", "copy_process")


def many_args_target(btf, limit: int) -> tuple[str, int, int] | None:
    """(name, FUNC id, argument count) of a function of 7..`limit` plain
    arguments, or None."""
    for name in MANY_ARGS_CANDIDATES:
        shape = function_shape(btf, name)
        if not isinstance(shape, str) and SAFE_ARGS < shape[1] <= limit and name not in DENY_LIST:
            return name, shape[0], shape[1]
    return None


def _params(raw, proto: int, vlen: int) -> list[tuple[int, int]]:
    blob, at, _ = raw.items(proto)
    return [(blob.words[at + 2 * j], blob.words[at + 2 * j + 1]) for j in range(vlen)]


def _kind(raw, type_id: int) -> int:
    """The kind under typedefs and qualifiers."""
    for _ in range(64):
        kind, _, _, target = raw.head(type_id)
        if kind not in (_TYPEDEF, _VOLATILE, _CONST, _RESTRICT, _TYPE_TAG):
            return kind
        type_id = target
    return 0
