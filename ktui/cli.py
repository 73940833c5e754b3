"""The `ktui` command line.

    ktui [PROBESET.yaml...] [-e SPEC...]     the dashboard (default: probesets/default.yaml)
    ktui check FILE...                       validate probe sets
    ktui list [PATTERN...]                   kernel functions, prototypes, probe-able or why not;
                                             tracepoints and their fields (CATEGORY/EVENT)
    ktui compile FILE | -e SPEC...           print the generated BPF program
    ktui stream FILE | -e SPEC... | --from REC   NDJSON events + stats on stdout
    ktui record FILE | -e SPEC... -o OUT [-f]  raw batches to a recording (-f overwrites)
    ktui replay REC                          the dashboard on a recording
    ktui export FILE... [--listen ADDR:PORT]   the sets' counters as Prometheus metrics
        [--web-config FILE]                  (TLS and basic auth)
    ktui doctor [--json]                     what this kernel has, and what ktui does with it
    ktui vm [ARGS...]                        ktui ARGS inside a throwaway VM (default: the dashboard)

Exit statuses: ktui/exits.py (0 ok, 1 invalid input, 2 usage, 3 the
environment cannot run probes, 4 a runtime failure, 130 stopped before the
probes were attached). Every error is one line, `ktui: ...`; numbers are
bounded where they are parsed (cli_args). See docs/bad-inputs.md.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import sys
from pathlib import Path

import click

from ktui import __version__
from ktui.cli_args import Bounded, one_line
from ktui.exits import EXIT_ENVIRONMENT, EXIT_INTERRUPTED, EXIT_INVALID, EXIT_OK, EXIT_RUNTIME, EXIT_USAGE
from ktui.lang import limits
from ktui.lang.model import KtuiError, ProbeSet

EXAMPLES = """\b
Examples:
  ktui                                   the dashboard with the default probe set
  ktui probesets/vfs.yaml                the dashboard with a shipped set
  ktui -e reads=vfs_read:c:a3 -e 'read_ret=vfs_read:r:retval:s64'
  ktui -e 'vfs_read:c:a3 if a3 > 4096 && comm == "dd"'
  ktui check probesets/*.yaml
  ktui list 'vfs_*' 'tcp_*send*'          prototypes and whether each can be probed
  ktui list 'syscalls/sys_enter_open*'   tracepoints and their fields
  ktui compile -e do_sys_openat2:c:fname=+0(a2):ustring
  ktui stream -e 'tcp_sendmsg:c:size=a3:u64' | jq .
  ktui record probesets/vfs.yaml -o vfs.ktrec   (Ctrl-C stops)
  ktui replay vfs.ktrec
  ktui stream --from vfs.ktrec > vfs.ndjson
  ktui export probesets/vfs.yaml         Prometheus metrics on http://127.0.0.1:9436/metrics
  ktui doctor                            what this kernel can do, what ktui does with it

\b
Probe spec: [LABEL=]TARGET:KIND[:FETCH,...]  KIND c = call (kprobe), r = return (kretprobe)
  FETCH: a1..a6, rax..r15, retval, comm, pid, tid, cpu, func, cgroup, +OFF(FETCH), name=FETCH,
         with :u8..u64 :s8..s64 :x8..x64 :string :ustring :symbol
"""


# The ranges of the numbers options take (see cli_args): screen updates a
# second, seconds between stats, a run's length, ring buffer pages (1 GiB
# at most), replay speed (0 = as fast as possible).
REFRESH = Bounded(0.1, 60.0)
INTERVAL = Bounded(0.05, 86_400.0)
DURATION = Bounded(0.01, 1e7)
BUFFER_PAGES = Bounded(1, 1 << 18, integer=True, power_of_two=True)
SPEED = Bounded(0.0, 1e6)
PID = Bounded(limits.PID_MIN, limits.PID_MAX, integer=True)


class _DefaultGroup(click.Group):
    """`ktui ARGS` with no subcommand name runs the dashboard; every usage
    error is one line, `ktui: ...`, exit 2."""

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode, **extra)
        try:
            # Not standalone: click raises its errors to us instead of printing
            # them in three lines; --help and --version return their status.
            status = super().main(args, prog_name, complete_var, False, **extra)
        except click.exceptions.Abort:  # Ctrl-C (or end of input) outside a command's own handling
            _fail("interrupted", EXIT_INTERRUPTED)
        except click.ClickException as err:
            _fail(one_line(err) + _usage_hint(err), err.exit_code)
        sys.exit(status if isinstance(status, int) else EXIT_OK)

    def parse_args(self, ctx, args):
        if args and args[0] not in self.commands and args[0] not in ("--help", "-h", "--version"):
            args = ["run", *args]
        elif not args and not ctx.resilient_parsing:
            # (Completing the first word parses resiliently: it stays with
            # the group, which offers the commands, see shell_complete.)
            args = ["run"]
        return super().parse_args(ctx, args)

    def shell_complete(self, ctx, incomplete):
        """The first word: the commands that match, else a file (`ktui
        probesets/vfs.yaml` is the dashboard)."""
        from click.shell_completion import CompletionItem

        items = super().shell_complete(ctx, incomplete)
        if not items and not incomplete.startswith("-"):
            return [CompletionItem(incomplete, type="file")]
        return items


def _usage_hint(err: click.ClickException) -> str:
    """For an argument or option missing or unknown (`ktui check` with no
    file), what the command takes, on the same line: ` Usage: ktui check
    [OPTIONS] FILES... (ktui check --help)`."""
    ctx = getattr(err, "ctx", None)
    if not isinstance(err, (click.MissingParameter, click.NoSuchOption)) or ctx is None:
        return ""
    prog = "ktui" if ctx.parent is None else f"ktui {ctx.command.name}"
    return f" Usage: {prog} {' '.join(ctx.command.collect_usage_pieces(ctx))} ({prog} --help)"


def _fail(message: str, code: int) -> "NoReturn":  # noqa: F821
    click.echo(f"ktui: {message}", err=True)
    sys.exit(code)


def load_inputs(files: tuple[str, ...], specs: tuple[str, ...], pid: int | None = None,
                comm: str | None = None, default: bool = False, bind: bool = True,
                tracepoints: bool = True, cgroup: str | None = None) -> ProbeSet:
    """Files and -e specs -> one ProbeSet. Raises KtuiError.

    With bind=False, names (`count`, `file->f_pos`) are left unbound: what
    can be checked without the running kernel's BTF (`ktui vm`, on a host
    whose kernel is not the guest's)."""
    from ktui.lang.model import ProbeSetError, SpecError
    from ktui.lang.bind import bind_probe
    from ktui.lang.spec import parse_probe_text

    if comm is not None:
        _check_comm_option(comm)
    if cgroup is not None:
        _check_cgroup_option(cgroup)
    if not files and not specs and default:
        from ktui.lang.shipped import default_set

        files = (str(default_set()),)
    if not files and not specs:
        raise KtuiError("nothing to probe: give a probe set file or -e SPEC")
    probes = []
    name, description, source = "command line", "", None
    kernel = _kernel_names() if bind else None
    if kernel is not None and not tracepoints:
        kernel = _BtfOnly(kernel)
    set_attach = ""
    if files:
        # (YAML, a second under emulation, is kept off the launch path of -e specs)
        from ktui.lang.probeset import load_probeset
    for f in files:
        ps = load_probeset(f, kernel)
        if len(files) == 1:
            set_attach = ps.attach  # kept on the set: it saves back as it was
            probes.extend(ps.probes)
        else:  # each file's `attach:` goes with its own probes (not to a user function's)
            probes.extend(p if p.attach or p.target.is_user else dataclasses.replace(p, attach=ps.attach)
                          for p in ps.probes)
        name, description, source = ps.name, ps.description, ps.source
        pid = pid if pid is not None else ps.pid
        comm = comm if comm is not None else ps.comm
        cgroup = cgroup if cgroup is not None else ps.cgroup
    for i, text in enumerate(specs, 1):
        try:
            probe = parse_probe_text(text)
            probes.append(bind_probe(probe, kernel, text=text) if bind else probe)
        except SpecError as exc:  # its column counts in the -e text as typed
            raise SpecError(exc.message, source=f"-e #{i}", col=exc.col) from None
    if bind:  # (not for `ktui vm`: the files are the guest's)
        _check_user_targets(files, specs, probes, pid)
    seen: dict[str, int] = {}
    for i, p in enumerate(probes):
        if p.name in seen:
            raise ProbeSetError(f"two probes are named {p.name!r}: "
                                "give one a label (label: in a file, -e 'LABEL=SPEC')")
        seen[p.name] = i
    if len(files) > 1 or specs:
        name = name if not specs else "command line"
    return ProbeSet(name=name, description=description, probes=tuple(probes), pid=pid,
                    comm=comm, cgroup=cgroup, source=source if len(files) == 1 and not specs else None,
                    attach=set_attach)


def _check_user_targets(files, specs, probes, pid: int | None) -> None:
    """Each user function's probe looked up in its file (`uprobe_target`),
    its first refusal raised at file:line:col or `-e #N:col`. The notes
    (a library without --pid...) are the session's to log, as it attaches."""
    if not any(probe.target.is_user for probe in probes):
        return  # the ELF readers are kept off the launch path of kernel probes
    from ktui.kernel.symbols.uprobe_target import UprobeTargetError, check_probe_target
    from ktui.lang.grammar import parse_raw

    spec_probes = probes[len(probes) - len(specs):] if specs else []
    for probe in probes[: len(probes) - len(specs)]:
        if probe.target.is_user:
            try:
                check_probe_target(probe, pid)
            except UprobeTargetError as err:
                raise _in_file(err, files, probe) from None
    for i, (text, probe) in enumerate(zip(specs, spec_probes), 1):
        if probe.target.is_user:
            try:
                check_probe_target(probe, pid)
            except UprobeTargetError as err:
                span = parse_raw(text.partition(" if ")[0])[1]  # (it parsed: it is a probe here)
                col = span.symbol if err.part == "function" and span.symbol else span.target
                raise UprobeTargetError(err.message, source=f"-e #{i}", col=col) from None


def _in_file(err, files, probe):
    """A file's probe's refusal at its line and column in the file that holds it."""
    from ktui.lang.locate import probe_targets

    for f in files:
        for target in probe_targets(f):
            if target.user == probe.target:
                col = target.user_col if err.part == "function" and target.user_col else target.col
                return type(err)(err.message, source=f, line=target.line, col=col)
    return err


def _kernel_names():
    """The running kernel's BTF, for probes that name parameters (opened
    only when one does)."""
    from ktui.lang.kernel_names import KernelNames

    return KernelNames()


def _check_comm_option(comm: str) -> None:
    """--comm obeys the rules of `filter: {comm: ...}` in a probe set."""
    from ktui.lang.limits import check_comm
    from ktui.lang.model import SpecError

    try:
        check_comm(comm)
    except SpecError as err:
        raise KtuiError(f"--comm: {err.message}") from None


def _check_cgroup_option(cgroup: str) -> None:
    """--cgroup obeys the rules of `filter: {cgroup: ...}` in a probe set."""
    from ktui.lang.limits import check_cgroup
    from ktui.lang.model import SpecError

    try:
        check_cgroup(cgroup)
    except SpecError as err:
        raise KtuiError(f"--cgroup: {err.message}") from None


def _inputs_or_exit(files, specs, pid=None, comm=None, default=False, tracepoints=True, cgroup=None) -> ProbeSet:
    """load_inputs, or exit 2 with its one line; `tracepoints` False: their
    names are left unbound (no tracefs read)."""
    from ktui.lang.model import KtuiError

    try:
        return load_inputs(files, specs, pid, comm, default, tracepoints=tracepoints, cgroup=cgroup)
    except KtuiError as exc:
        _fail(str(exc), EXIT_INVALID)


def _preflight_or_exit(print_warnings: bool = False) -> None:
    """Exit 3 with one line per problem if this machine cannot run probes.

    Warnings go to stderr only for headless commands: the dashboard shows
    them in its status line instead (preflight_warnings -> SystemInfo.notes)."""
    from ktui.kernel.machine.preflight import check_environment

    findings = check_environment()
    problems = [p for p in findings if p.fatal]
    for p in problems:
        click.echo(f"ktui: {p.message}", err=True)
    if problems:
        sys.exit(EXIT_ENVIRONMENT)
    if print_warnings:
        for p in findings:
            click.echo(f"ktui: warning: {p.message}", err=True)


# Every command that takes --buffer takes it alike (compile too).
_buffer_option = click.option(
    "--buffer", type=click.Choice(["auto", "ringbuf", "perf"]), default="auto", show_default=True,
    help="Event buffer: BPF ring buffer (5.8+) or perf buffers; auto picks by the running kernel.")

_spec_option = click.option("-e", "--spec", "specs", multiple=True, metavar="SPEC",
                            help="A probe in the compact form (repeatable): `[LABEL=]SPEC [AGGREGATIONS] "
                                 "[if FILTER]`; AGGREGATIONS count in the kernel: hist(a3) hist(latency, comm) "
                                 "count(comm) sum(retval) max_keys(N) stack(kernel|user|both); since(START) makes "
                                 "it a span from START, within(FUNC) counts it only inside FUNC.")

_common_probe_options = [
    _spec_option,
    click.option("--pid", type=PID, default=None, help="Only this process (in the kernel)."),
    click.option("--comm", default=None, help="Only tasks with this name (in the kernel)."),
    click.option("--cgroup", default=None, metavar="PATH",
                 help="Only tasks in this cgroup v2 directory or below it (a container's, a unit's): "
                      "a path under /sys/fs/cgroup, or relative to it (in the kernel)."),
    _buffer_option,
    click.option("--buffer-pages", type=BUFFER_PAGES, default=2048, show_default=True,
                 help="Ring buffer size in 4 KiB pages (a power of two)."),
    click.option("--log", "log_path", type=click.Path(dir_okay=False), default=None,
                 help="Log file (default ~/.local/state/ktui/ktui.log)."),
    click.option("--engine", type=click.Choice(["auto", "generic", "compiled"]), default="auto",
                 show_default=True,
                 help="generic: one program, shipped prebuilt, runs every probe, so probes "
                      "start, and are added or edited, without a compile (where the kernel has attach "
                      "cookies on kprobe links, 5.15+: `ktui doctor` says); compiled: "
                      "a program compiled for this set; auto: generic where the kernel allows."),
    click.option("--attach", type=click.Choice(["kprobe", "auto", "fentry"]), default="auto",
                 show_default=True,
                 help="How probes enter the kernel where their set does not say (attach:): auto: "
                      "fentry/fexit where the kernel allows (cheaper; fexit misses no return), else a "
                      "kprobe; fentry: fentry/fexit or the probe fails."),
    click.option("--no-cache", is_flag=True,
                 help="Compile the generic program and probe the kernel's features even if "
                      "~/.cache/ktui holds them, and keep nothing."),
    click.option("--cost", is_flag=True,
                 help="Each probe's own cost (ns per hit, share of a CPU) from the kernel's BPF run-time "
                      "statistics (5.8+). They time only the BPF program, not the kprobe trap or return "
                      "hook, and slow every BPF program on the machine while ktui runs."),
]


def probe_options(f):
    for opt in reversed(_common_probe_options):
        f = opt(f)
    return f


def _session_options(buffer, buffer_pages, log_path, *, engine="auto", attach="auto", no_cache=False,
                     cost=False):
    # Keyword-only: every command shares probe_options, and a positional call
    # once passed --no-cache where --attach belonged.
    from ktui.kernel.session import SessionOptions

    return SessionOptions(buffer=buffer, ringbuf_pages=buffer_pages,
                          perf_pages=max(8, min(1024, buffer_pages // 8)),
                          log_path=Path(log_path) if log_path else None,
                          engine=engine, attach=attach, cache=not no_cache, wait_loaded=False,
                          timing=cost)


@click.group(cls=_DefaultGroup, epilog=EXAMPLES, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="ktui")
def main() -> None:
    """ktui: a live dashboard for kprobes and kretprobes (through bcc)."""
    if os.geteuid() != os.getuid() or os.getegid() != os.getgid():
        _fail("refusing to run set-uid/set-gid: run it as root directly", EXIT_ENVIRONMENT)


@main.command("run", epilog=EXAMPLES)
@click.argument("files", nargs=-1, type=click.Path())
@probe_options
@click.option("--refresh", type=REFRESH, default=15.0, show_default=True, help="Screen updates per second.")
def run_cmd(files, specs, pid, comm, cgroup, buffer, buffer_pages, log_path, engine, attach, no_cache, cost,
            refresh):
    """The full-screen dashboard (the default command)."""
    ps = _inputs_or_exit(files, specs, pid, comm, default=True, cgroup=cgroup)
    _preflight_or_exit()
    _stderr_apart()
    from ktui.dashboard import run_live

    options = _session_options(buffer, buffer_pages, log_path, engine=engine, attach=attach,
                               no_cache=no_cache, cost=cost)
    sys.exit(run_live(ps, options, refresh))


@main.command("check")
@click.argument("files", nargs=-1, required=True, type=click.Path())
@click.option("--syntax-only", is_flag=True,
              help="Do not check function names against the running kernel.")
def check_cmd(files, syntax_only):
    """Validate probe sets; print every error as file:line:col: message.

    Function names are checked against the running kernel's symbols where
    /proc/kallsyms is readable; a function in a module that is not loaded
    is a warning."""
    from ktui.kernel.symbols.namecheck import FunctionCheck

    names = FunctionCheck()
    with _warnings_on_stderr():
        bad = _check_files(files, names, syntax_only)
    sys.exit(EXIT_INVALID if bad else EXIT_OK)


def _check_files(files, names, syntax_only: bool) -> int:
    """`ktui check`'s loop; the number of files that failed. Each file's
    errors and its functions' problems are printed together, in file order:
    a misspelt function is reported even when another probe has an error."""
    from ktui.lang.bind import needs_binding
    from ktui.lang.probeset import check_probeset

    bad = 0
    kernel = None if syntax_only else _kernel_names()
    no_btf = kernel.problem() if kernel is not None else None
    no_tracefs = kernel.tracefs_problem() if kernel is not None else None
    for f in files:
        ps, errors = check_probeset(f, _binding_kernel(kernel, no_btf, no_tracefs))
        problems = [] if syntax_only else (_name_problems(f, names, ps, errors) + _user_target_problems(f, ps)
                                           + _gate_problems(f, names, ps))
        if not syntax_only and ps is not None:
            problems += _errno_problems(f, ps) + _cgroup_problems(f, ps)
        if ps is not None:
            problems += _user_string_notes(f, ps)
        found = sorted([(e.line or 0, e.col or 0, str(e), True) for e in errors] + problems,
                       key=lambda p: p[:2])
        for _line, _col, text, _fatal in found:
            click.echo(text)
        if any(fatal for *_where, fatal in found):
            bad += 1
            continue
        unchecked = [] if syntax_only else [names.unchecked()]
        if no_btf and any(needs_binding(p) and p.target.tracepoint is None for p in ps.probes):
            unchecked.append("parameter names not checked: no BTF")
        if no_tracefs and any(p.target.tracepoint is not None for p in ps.probes):
            unchecked.append(f"tracepoints not checked: {no_tracefs}")
        if no_btf:
            unchecked.extend(_errno_notes(ps))
        note = "".join(f"; {u}" for u in unchecked if u)
        click.echo(f"{f}: ok ({len(ps.probes)} probe{'s' if len(ps.probes) != 1 else ''}{note})")
    return bad


def _binding_kernel(kernel, no_btf: str | None, no_tracefs: str | None):
    """What `ktui check` binds names with: the kernel, less what it cannot
    read. Without BTF nothing is bound (as before tracepoints); without
    tracefs, tracepoints are left unbound, and the file's `ok` line says
    so: the host that checks is not always the one that runs."""
    if kernel is None or no_btf:
        return None
    return _BtfOnly(kernel) if no_tracefs else kernel


class _BtfOnly:
    """A kernel's BTF without its tracepoint formats (`bind_probe` leaves
    tracepoints unbound with such a kernel)."""

    def __init__(self, kernel) -> None:
        self.problem, self.prototype = kernel.problem, kernel.prototype
        self.close_functions = kernel.close_functions


def _name_problems(path: str, names, ps, errors) -> list[tuple[int, int, str, bool]]:
    """`FILE:LINE:COL: probe N (SPEC): message` for each probe whose function
    the running kernel cannot probe, as (line, col, text, fatal). Every
    probe whose function can be read is asked, whatever else is wrong in
    the set; not twice where binding its names already found no such
    function (`errors`, the reader's). A probe is named by its spec, or
    where the set did not load by what the file says, as those errors do."""
    from ktui.lang.locate import probe_targets
    from ktui.lang.model import WILDCARD_CHARS

    out = []
    for number, target in enumerate(probe_targets(path), 1):
        if target.alternatives:  # one of them is enough
            found = names.alternatives_problem(target.alternatives)
            said = "this kernel has none of the functions"
        elif target.symbol is not None and any(c in target.symbol for c in WILDCARD_CHARS):
            found = names.pattern_problem(target.symbol)  # a wildcard: its matches
            said = "matches no kernel functions"
        elif target.symbol is not None:
            found = names.problem(target.symbol)
            said = f"unknown kernel function {target.symbol!r}"
        else:
            continue
        if found is None:
            continue
        if any(e.line in target.lines and said in e.message for e in errors):
            continue
        kind = "" if found.fatal else "warning: "
        spec = ps.probes[number - 1].spec_text if ps is not None else target.written
        out.append((target.line, target.col,
                    f"{path}:{target.line}:{target.col}: {kind}probe {number} ({spec}): {found.message}",
                    found.fatal))
    return out


def _gate_problems(path: str, names, ps) -> list[tuple[int, int, str, bool]]:
    """The kernel functions a probe's hidden slots attach to, where the
    running kernel cannot probe them, at its probe's target: a `within:`
    gate's function and a span's start (`since:`; each attaches where the
    probe does)."""
    from ktui.lang.locate import probe_targets

    if ps is None:
        return []
    out = []
    for number, (probe, target) in enumerate(zip(ps.probes, probe_targets(path)), 1):
        for what, function in _hidden_functions(probe):
            found = names.problem(function)
            if found is None:
                continue
            kind = "" if found.fatal else "warning: "
            out.append((target.line, target.col, f"{path}:{target.line}:{target.col}: {kind}probe {number} "
                        f"({probe.spec_text}): {what}: {found.message}", found.fatal))
    return out


def _hidden_functions(probe) -> list[tuple[str, str]]:
    """(what to call it, kernel function) of each hidden slot the probe brings."""
    from ktui.lang.model import GateSpan

    out = []
    if isinstance(probe.within, GateSpan):
        out += [(f"within {probe.within}", end.target.symbol) for end in (probe.within.start, probe.within.end)
                if _kernel_function(end)]
    elif probe.within is not None:
        out.append((f"within {probe.within}", probe.within))
    start = probe.since
    if start is not None and _kernel_function(start):
        out.append((f"since {start.spec_text}", start.target.symbol))
    return out


def _kernel_function(probe) -> bool:
    """Whether a hidden slot's probe is on one kernel function by name."""
    return bool(probe.target.symbol and not probe.target.is_user and probe.target.tracepoint is None
                and not probe.target.is_wildcard)


def _user_target_problems(path: str, ps) -> list[tuple[int, int, str, bool]]:
    """Each user function's probe checked in its own file (never against
    kallsyms): an error where the file or the function cannot be probed
    (at the path or at the function), its notes as warnings. Where the set
    did not load, the targets that read are still looked up in their files."""
    from ktui.kernel.symbols.uprobe_target import UprobeTargetError, check_probe_target, resolve
    from ktui.lang.locate import probe_targets
    from ktui.lang.model import WILDCARD_CHARS

    out = []
    for number, target in enumerate(probe_targets(path), 1):
        if target.user is None:
            continue
        probe = ps.probes[number - 1] if ps is not None and number <= len(ps.probes) else None
        spec = probe.spec_text if probe is not None else target.written
        notes = []
        try:
            if probe is not None:
                notes = check_probe_target(probe, ps.pid)[1]
            elif target.user.usdt is not None:
                from ktui.kernel.symbols.usdt import resolve_usdt

                user = target.user
                resolve_usdt(user.path, user.usdt_provider, user.usdt_name)
            else:
                user = target.user
                resolve(user.path, user.symbol, user.offset, user.address)
        except UprobeTargetError as err:
            at_function = err.part == "function" and target.user_col
            col = target.user_col if at_function else target.col
            line = (target.user_line or target.line) if at_function else target.line
            out.append((line, col, f"{path}:{line}:{col}: probe {number} ({spec}): {err.message}", True))
        for note in notes:
            out.append((target.line, target.col,
                        f"{path}:{target.line}:{target.col}: warning: probe {number} ({spec}): {note}", False))
    return out


def _user_string_notes(path: str, ps) -> list[tuple[int, int, str, bool]]:
    """A warning for each sys_enter tracepoint that reads a user string:
    one not paged in yet reads as empty there (lang.tracepoints)."""
    from ktui.lang.locate import target_positions
    from ktui.lang.tracepoints import sys_enter_user_string_note

    out = []
    positions = None
    for number, probe in enumerate(ps.probes, 1):
        note = sys_enter_user_string_note(probe)
        if note is None:
            continue
        positions = positions if positions is not None else target_positions(path)
        line, col = positions[number - 1] if number <= len(positions) else (None, None)
        out.append((line or 0, col or 0,
                    f"{path}:{line}:{col}: warning: probe {number} ({probe.spec_text}): {note}", False))
    return out


def _cgroup_problems(path: str, ps) -> list[tuple[int, int, str, bool]]:
    """An error for each filter's `cgroup == "PATH"` that names no cgroup v2
    directory on this machine, as a start would refuse it (one line at the
    probe). Where no cgroup v2 is mounted, the path is left unchecked and
    the probe gets a warning saying so."""
    from ktui.kernel.attach.cgroup_scope import CgroupError, cgroup2_root, cgroup_id
    from ktui.lang.cgroups import filter_paths
    from ktui.lang.locate import target_positions

    out = []
    positions = None
    for number, probe in enumerate(ps.probes, 1):
        paths = filter_paths(probe)
        if not paths:
            continue
        positions = positions if positions is not None else target_positions(path)
        line, col = positions[number - 1] if number <= len(positions) else (None, None)
        where = ":".join(str(p) for p in (path, line, col) if p is not None)
        if cgroup2_root() is None:
            out.append((line or 0, col or 0, f"{where}: warning: probe {number} ({probe.spec_text}): cgroup paths "
                        "not checked: no cgroup v2 hierarchy is mounted here", False))
            continue
        for one in paths:
            try:
                cgroup_id(one)
            except CgroupError as err:
                out.append((line or 0, col or 0, f"{where}: probe {number} ({probe.spec_text}): {err}", True))
    return out


def _errno_problems(path: str, ps) -> list[tuple[int, int, str, bool]]:
    """A warning for each `errno: on` that counts nothing: BTF says the
    function returns no errno (void, unsigned...), as _name_problems' are."""
    from ktui.lang.errnos import returns_words
    from ktui.lang.locate import target_positions

    out = []
    for number, probe in enumerate(ps.probes, 1):
        if probe.errno != "on" or probe.errno_width != 0:
            continue
        positions = target_positions(path)
        line, col = positions[number - 1] if number <= len(positions) else (None, None)
        where = ":".join(str(p) for p in (path, line, col) if p is not None)
        out.append((line or 0, col or 0,
                    f"{where}: warning: probe {number} ({probe.spec_text}): errno: on counts nothing: "
                    f"BTF says {probe.target.symbol} returns {returns_words(probe.return_class)}", False))
    return out


def _errno_notes(ps) -> list[str]:
    """What the ok line says, on a kernel without BTF, of its return probes' errnos."""
    from ktui.lang.errnos import GUESSED, OFF_NO_BTF, probe_errno_mode

    texts = {probe_errno_mode(p).text for p in ps.probes}
    notes = {OFF_NO_BTF: "errnos not counted: no BTF", GUESSED: "errnos guessed as int: no BTF"}
    return [note for text, note in notes.items() if text in texts]


@contextlib.contextmanager
def _warnings_on_stderr():
    """Log lines of a headless command (a corrupt cache entry...) as
    `ktui: warning: ...` on stderr, for as long as the command runs."""
    import logging

    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("ktui: warning: %(message)s"))
    handler.setLevel(logging.WARNING)
    logger = logging.getLogger("ktui")
    propagate, logger.propagate = logger.propagate, False
    logger.addHandler(handler)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.propagate = propagate


@main.command("list")
@click.argument("patterns", nargs=-1)
@click.option("--json", "as_json", is_flag=True, help="One JSON document (for scripts).")
@click.option("-w", "--wide", is_flag=True, help="Never cut lines at the terminal's width.")
@click.option("--no-cache", is_flag=True, help="Do not read or write ~/.cache/ktui.")
@click.option("--usdt", "usdt_file", type=click.Path(), metavar="PATH",
              help="List the USDT probe points of the binary or library PATH instead.")
def list_cmd(patterns, as_json, wide, no_cache, usdt_file):
    """Kernel functions matching shell globs (default '*'), each with its
    prototype (from BTF) and whether it can be probed, or why not; and
    tracepoints (a pattern with a slash), each with its fields and the type
    each reads as.

    \b
    PATTERN: a glob (vfs_*, tcp_*send*), or MODULE:GLOB for one module,
    loaded or not (xfs:*). No root needed where the files are readable.
    CATEGORY/EVENT globs list tracepoints (sched/*, 'syscalls/sys_enter_open*');
    their formats are in tracefs, which needs root. PATH:GLOB lists a
    binary's or library's functions, with their addresses, file offsets
    and sizes (/usr/lib/x86_64-linux-gnu/libc.so.6:'mall*').
    """
    if usdt_file is not None:
        sys.exit(_list_usdt(usdt_file, patterns, as_json))
    from ktui.listing import run_list
    from ktui.vm.boot import default_kernel

    with _warnings_on_stderr():
        code = run_list(list(patterns) or ["*"], as_json=as_json, wide=wide, cache=not no_cache,
                        vm_kernel=default_kernel())
    sys.exit(code)


def _list_usdt(path: str, patterns, as_json: bool) -> int:
    """`ktui list --usdt PATH`: its probe points (`usdt_text`), each written
    PATH:PROVIDER:NAME:usdt in a spec. Exit 1 when it has none."""
    import json

    from ktui.kernel.symbols.uprobe_target import UprobeTargetError
    from ktui.kernel.symbols.usdt import usdt_probes
    from ktui.kernel.symbols.usdt_text import usdt_data, usdt_lines

    if patterns:
        _fail("list --usdt PATH takes no patterns: it lists every probe point of PATH", EXIT_USAGE)
    try:
        probes = usdt_probes(path)
    except UprobeTargetError as err:  # the file cannot be read (UsdtError is one)
        _fail(err.message, EXIT_INVALID)
    if as_json:
        click.echo(json.dumps(usdt_data(path, probes), separators=(",", ":")))
    else:
        click.echo(usdt_lines(probes), nl=False)
    if not probes:
        click.echo(f"ktui: {path} has no USDT probes (no .note.stapsdt notes)", err=True)
        return 1
    click.echo(f"ktui: {len({p.full_name for p in probes})} USDT probes in {path}; probe one with "
               f"{path}:PROVIDER:NAME:usdt[:a1,...]", err=True)
    return 0


@main.command("doctor")
@click.option("--json", "as_json", is_flag=True, help="One JSON document (for scripts).")
@click.option("--no-cache", is_flag=True, help="Probe the kernel again, and keep nothing.")
def doctor_cmd(as_json, no_cache):
    """What this kernel has (asked of it with tiny BPF programs, once per
    kernel, then cached), what ktui does with it, and what could not be
    checked and why. Exit 0 whatever it finds."""
    from ktui.doctor import run_doctor

    try:
        code = run_doctor(as_json=as_json, use_cache=not no_cache)
    except Exception as exc:  # noqa: BLE001 - one line, never a traceback
        _fail(f"doctor: {' '.join(str(exc).split()) or type(exc).__name__}", EXIT_RUNTIME)
    sys.exit(code)


@main.command("compile")
@click.argument("files", nargs=-1, type=click.Path())
@_spec_option
@_buffer_option
def compile_cmd(files, specs, buffer):
    """Print the BPF C program ktui would load (no root needed)."""
    from ktui.kernel.buffers.buffer_choice import resolve_buffer
    from ktui.kernel.codegen import NOT_COMPILED, compiled_part, generate
    from ktui.lang.model import KtuiError

    # tracepoints are left out of the C (and so need no tracefs to read here)
    ps = _inputs_or_exit(files, specs, tracepoints=False)
    compiled, tracepoints = compiled_part(ps)
    left_out = "".join(f"/* {p.name}: {NOT_COMPILED} */\n" for p in tracepoints)
    if not compiled:
        click.echo(left_out, nl=False)
        return
    ps = dataclasses.replace(ps, probes=compiled)
    has_ringbuf = None
    if buffer == "auto":
        from ktui.kernel.machine.features import kernel_features

        has_ringbuf = kernel_features().has("ringbuf")
    try:
        click.echo(left_out + generate(ps, buffer=resolve_buffer(buffer, has_ringbuf)).text, nl=False)
    except KtuiError as exc:
        _fail(str(exc), EXIT_INVALID)


def _stderr_apart() -> None:
    """ktui's own stderr lines stay on the terminal while libbcc's output
    is diverted (quiet.keep_stderr_apart)."""
    from ktui.kernel.quiet import keep_stderr_apart

    keep_stderr_apart()


def _leave(code: int) -> None:
    """End `stream`/`record` once their session is closed: flush, then
    os._exit. The probes are gone and the files written by then; the
    interpreter's teardown (bcc's atexit hooks, numpy, module cleanup) only
    delayed the exit, by 0.6 s after a SIGINT under emulation. Not when
    stdout is not a real file (click's in-process test runner)."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass  # a closed pipe: headless already sent stdout to /dev/null
    try:
        sys.stdout.fileno()
    except (OSError, ValueError):  # io.UnsupportedOperation is both
        sys.exit(code)
    os._exit(code)


STREAM_EPILOG = """\b
Aggregations are counted in the kernel and come in the stats lines
("top_values", "value_hist", "key_hists", "stacks"), not as one event each:
  ktui stream -e 'vfs_read:r count(comm) sum(retval)'   bytes read per process
  ktui stream -e 'vfs_read:c hist(a3)'                  read sizes, a log2 histogram
  ktui stream -e 'vfs_read:r hist(latency, comm)'       a latency histogram per process
  ktui stream -e 'vfs_read:c stack(kernel)' --folded vfs.folded   who calls it
  ktui stream -e 'vfs_read:c count(a3) max_keys(64)'    the sizes seen, at most 64
A probe with aggregations and no fetches streams no events: only its counts.
"""


@main.command("stream", epilog=STREAM_EPILOG)
@click.argument("files", nargs=-1, type=click.Path())
@probe_options
@click.option("--from", "from_rec", type=click.Path(dir_okay=False), default=None,
              help="Convert a recording to NDJSON instead of probing.")
@click.option("--interval", type=INTERVAL, default=1.0, show_default=True, help="Seconds between stats lines.")
@click.option("--duration", type=DURATION, default=None, help="Stop after this many seconds.")
@click.option("--no-stats", is_flag=True, help="Only event lines (and the summary).")
@click.option("--folded", "folded", type=click.Path(dir_okay=False), default=None,
              help="On exit, write the stack: probes' stacks to this file as folded lines "
                   "(flamegraph.pl, speedscope; user frames first, as bcc's stackcount -f).")
def stream_cmd(files, specs, pid, comm, cgroup, buffer, buffer_pages, log_path, engine, attach, no_cache, cost,
               from_rec, interval, duration, no_stats, folded):
    """One JSON object per event on stdout (NDJSON), stats every --interval."""
    from ktui.headless import replay_to_ndjson, run_stream

    if from_rec:
        sys.exit(replay_to_ndjson(from_rec, with_stats=not no_stats))
    ps = _inputs_or_exit(files, specs, pid, comm, cgroup=cgroup)
    if folded is not None and not any(p.agg is not None and p.agg.stack for p in ps.probes):
        _fail("--folded: no probe counts stacks (add stack: kernel|user|both, or stack(kernel) after a spec)", EXIT_USAGE)
    _preflight_or_exit(print_warnings=True)
    _stderr_apart()
    options = _session_options(buffer, buffer_pages, log_path, engine=engine, attach=attach,
                               no_cache=no_cache, cost=cost)
    _leave(run_stream(ps, options, interval, duration, with_stats=not no_stats, folded=folded))


@main.command("record")
@click.argument("files", nargs=-1, type=click.Path())
@probe_options
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False), help="Recording file.")
@click.option("--interval", type=INTERVAL, default=1.0, show_default=True, help="Seconds between stats snapshots.")
@click.option("--duration", type=DURATION, default=None, help="Stop after this many seconds.")
@click.option("-f", "--force", is_flag=True, help="Overwrite the recording file if it exists.")
def record_cmd(files, specs, pid, comm, cgroup, buffer, buffer_pages, log_path, engine, attach, no_cache, cost,
               output, interval, duration, force):
    """Record raw event batches and stats to a file (replay with `ktui replay`).

    An existing file is refused unless --force is given."""
    from ktui.headless import run_record

    ps = _inputs_or_exit(files, specs, pid, comm, cgroup=cgroup)
    _preflight_or_exit(print_warnings=True)
    _stderr_apart()
    options = _session_options(buffer, buffer_pages, log_path, engine=engine, attach=attach,
                               no_cache=no_cache, cost=cost)
    _leave(run_record(ps, options, output, interval, duration, force=force))


def _parse_listen(ctx, param, value):
    from ktui.exporter import parse_listen

    try:
        return parse_listen(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


def _export_loader(files, specs, pid, comm, cgroup=None):
    """What `ktui export` loads, now and on each SIGHUP: the set, and the
    name of the set each probe comes from (its `set` label). Raises KtuiError."""

    def load():
        sets = {}
        for f in files:
            one = load_inputs((f,), (), pid, comm, cgroup=cgroup)
            for p in one.probes:
                sets.setdefault(p.name, one.name)
        combined = load_inputs(files, specs, pid, comm, cgroup=cgroup)
        return combined, {p.name: sets.get(p.name, "command line") for p in combined.probes}

    return load


@main.command("export")
@click.argument("files", nargs=-1, type=click.Path())
@probe_options
@click.option("--listen", default="127.0.0.1:9436", show_default=True, callback=_parse_listen,
              metavar="ADDR:PORT",
              help="Where to serve /metrics ([ADDR]:PORT for IPv6). Loopback by default: "
                   "--listen 0.0.0.0:PORT serves every network, and the metrics reveal the names "
                   "of the processes that hit the probes (the comm label) and which kernel "
                   "functions this host traces.")
@click.option("--web-config", "--web.config.file", "web_config", type=click.Path(), default=None, metavar="FILE",
              help="TLS and basic auth, from a web config file in the format of Prometheus' exporter "
                   "toolkit (node_exporter's --web.config.file): the subset docs/export.md lists; "
                   "any other key is refused by name. SIGHUP reads it again.")
def export_cmd(files, specs, pid, comm, cgroup, buffer, buffer_pages, log_path, engine, attach, no_cache, cost,
               listen, web_config):
    """Serve the probe sets' in-kernel counters as Prometheus metrics.

    Each scrape of http://ADDR:PORT/metrics reads the BPF maps once: hits,
    emitted and lost events, missed returns, errno counts, the latency
    histogram of return probes and the top task names (docs/export.md). SIGTERM or SIGINT detach every probe and exit 0;
    SIGHUP reloads the files (a file that does not load keeps the running
    set and logs why), the web config too."""
    from ktui.exporter import run_export
    from ktui.web_config import load_web_config

    load = _export_loader(files, specs, pid, comm, cgroup)
    try:
        loaded = load()
        web = load_web_config(web_config) if web_config is not None else None
    except KtuiError as exc:
        _fail(str(exc), EXIT_INVALID)
    _preflight_or_exit(print_warnings=True)
    _stderr_apart()
    options = _session_options(buffer, buffer_pages, log_path, engine=engine, attach=attach,
                               no_cache=no_cache, cost=cost)
    _leave(run_export(loaded, load, options, listen, web=web))


@main.command("replay")
@click.argument("recording", type=click.Path())  # (what is not a recording: the reader's one line, exit 1)
@click.option("--speed", type=SPEED, default=1.0, show_default=True,
              help="Playback speed: 1 = as recorded, 2 = twice as fast, 0 = as fast as possible "
                   "(+ and - change it while playing).")
@click.option("--refresh", type=REFRESH, default=15.0, show_default=True, help="Screen updates per second.")
@click.option("--log", "log_path", type=click.Path(dir_okay=False), default=None,
              help="Log file (default ~/.local/state/ktui/ktui.log); nothing is printed while the screen is up.")
def replay_cmd(recording, speed, refresh, log_path):
    """The dashboard on a recording: no root, no kernel."""
    from ktui.dashboard import run_replay

    sys.exit(run_replay(recording, speed, refresh, Path(log_path) if log_path else None))


@main.command("vm", context_settings={"ignore_unknown_options": True})
@click.option("--kernel", default=None, help="Kernel version under /boot (default: newest 6.1).")
@click.option("--no-workload", is_flag=True, help="Do not start the demo workload in the VM.")
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def vm_cmd(kernel, no_workload, args):
    """ktui inside a throwaway VM with a stock Debian kernel.

    ARGS are a ktui command line (default: the dashboard): `ktui vm
    probesets/vfs.yaml`, `ktui vm stream -e vfs_read:c --duration 5`. What
    ktui prints there and its exit status come back here. For machines
    whose own kernel has no kprobes or is locked down."""
    from ktui.vm import run_in_vm

    argv = _guest_argv(list(args))
    _check_before_boot(argv, kernel)
    sys.exit(run_in_vm(argv, kernel=kernel, workload=not no_workload))


def _guest_argv(args: list[str]) -> list[str]:
    """The ktui command line the guest runs, its command named (`run`
    when none is, as `ktui ARGS` itself does)."""
    if args and args[0] in main.commands:
        return args
    return ["run", *args]


def _check_before_boot(argv: list[str], kernel: str | None = None) -> None:
    """Refuse on the host, before a minute of booting, what ktui in the
    guest would refuse anyway: its command line (one line, exit 2), a probe
    set or -e spec that does not parse (exit 1), and names (`count`) the
    guest kernel does not have: its BTF is read here from its image
    (vm/guest_btf.py), not this machine's own."""
    from ktui.lang.model import KtuiError

    command, rest = argv[0], argv[1:]
    if command == "vm":
        _fail("vm: ktui vm cannot run inside ktui vm", EXIT_USAGE)
    # click's own parser for that command: the same errors, the same words
    params = main.commands[command].make_context(command, rest, parent=click.get_current_context()).params
    if command == "check":
        _check_syntax_or_exit(params["files"], kernel)
    elif "specs" in params and not params.get("from_rec"):
        try:
            ps = load_inputs(params["files"], params["specs"], params.get("pid"), params.get("comm"),
                             default=command == "run", bind=False, cgroup=params.get("cgroup"))
        except KtuiError as exc:
            _fail(str(exc), EXIT_INVALID)
        files = params["files"] or ((ps.source,) if ps.source else ())
        problems = _guest_name_problems(files, params["specs"], kernel)
        if problems:
            _fail(problems[0], EXIT_INVALID)


def _guest_names(kernel: str | None):
    from ktui.vm.boot import default_kernel
    from ktui.vm.guest_btf import guest_names

    return guest_names(kernel or default_kernel(), say=lambda line: click.echo(f"ktui vm: {line}", err=True))


def _guest_name_problems(files, specs, kernel: str | None) -> list[str]:
    """What binding the probes' names to the guest kernel's BTF refuses, as
    ktui in the guest would say it. A function its vmlinux BTF does not
    describe is refused only when it looks like a typo (GuestNames.typo);
    else it may be a module's, left to the guest."""
    from ktui.lang.bind import bind_probe
    from ktui.lang.locate import probe_targets
    from ktui.lang.model import SpecError
    from ktui.lang.probeset import check_probeset
    from ktui.lang.spec import parse_probe_text

    guest = _guest_names(kernel) if files or specs else None
    if guest is None:
        return []
    problems = []
    for f in files:
        errors = check_probeset(f, guest)[1]
        targets = probe_targets(f)
        problems += [_in_guest(str(e), guest) for e in errors if not _left_to_guest(e, targets, guest)]
    for i, text in enumerate(specs, 1):
        probe = parse_probe_text(text)  # (it parsed: load_inputs said so)
        try:
            bind_probe(probe, guest, text=text)
        except SpecError as exc:
            symbol = probe.target.symbol
            if f"unknown kernel function {symbol!r}" in exc.message and not guest.typo(symbol):
                continue
            problems.append(_in_guest(str(SpecError(exc.message, source=f"-e #{i}", col=exc.col)), guest))
    return problems


def _left_to_guest(error, targets, guest) -> bool:
    """An error that a function is unknown, about a function the guest's
    vmlinux BTF does not describe and that may be a module's."""
    return any(error.line in t.lines and f"unknown kernel function {t.symbol!r}" in error.message
               and not guest.typo(t.symbol) for t in targets)


def _in_guest(problem: str, guest) -> str:
    """A refusal made here for the guest, saying whose kernel said it (and
    how to probe a module's function anyway)."""
    if "unknown kernel function" in problem:
        return (f"{problem} (in {guest.release}, the kernel ktui vm boots; a function of a module: "
                "fetch its arguments by position, a1..a6)")
    return f"{problem} (in {guest.release}, the kernel ktui vm boots)"


def _check_syntax_or_exit(files, kernel: str | None = None) -> None:
    """`ktui vm check`: every error ktui check in the guest would print
    that can be known here (syntax, and names against the guest kernel's
    BTF), as `ktui check` prints it, exit 1."""
    from ktui.lang.probeset import check_probeset

    errors = [str(error) for f in files for error in check_probeset(f, None)[1]]
    if not errors:
        errors = _guest_name_problems(files, (), kernel)
    for error in errors:
        click.echo(error)
    if errors:
        sys.exit(EXIT_INVALID)


if __name__ == "__main__":
    main()
