"""The `ktui` command line.

    ktui [PROBESET.yaml...] [-e SPEC...]     the dashboard (default: probesets/default.yaml)
    ktui check FILE...                       validate probe sets
    ktui list [PATTERN...]                   kernel functions, prototypes, probe-able or why not
    ktui compile FILE | -e SPEC...           print the generated BPF program
    ktui stream FILE | -e SPEC... | --from REC   NDJSON events + stats on stdout
    ktui record FILE | -e SPEC... -o OUT [-f]  raw batches to a recording (-f overwrites)
    ktui replay REC                          the dashboard on a recording
    ktui vm [ARGS...]                        the dashboard inside a throwaway VM

Exit status: 0 ok; 1 invalid input (probe set, spec, filter, recording);
2 usage; 3 the environment cannot run probes (not root, no kprobes, no bcc,
lockdown...); 4 a runtime failure; 130 stream/record stopped by a signal
before its probes were attached. See docs/bad-inputs.md.
"""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from ktui import __version__

if TYPE_CHECKING:
    from ktui.lang.model import ProbeSet

EXIT_INVALID = 1
EXIT_USAGE = 2
EXIT_ENVIRONMENT = 3
EXIT_RUNTIME = 4

DEFAULT_SET = Path(__file__).resolve().parent.parent / "probesets" / "default.yaml"

EXAMPLES = """\b
Examples:
  ktui                                   the dashboard with the default probe set
  ktui probesets/vfs.yaml                the dashboard with a shipped set
  ktui -e vfs_read:c:a3 -e 'vfs_read:r:retval:s64'
  ktui -e 'vfs_read:c:a3 if a3 > 4096 && comm == "dd"'
  ktui check probesets/*.yaml
  ktui list 'vfs_*' 'tcp_*send*'          prototypes and whether each can be probed
  ktui compile -e do_sys_openat2:c:fname=+0(a2):ustring
  ktui stream -e 'tcp_sendmsg:c:size=a3:u64' | jq .
  ktui record probesets/vfs.yaml -o vfs.ktrec   (Ctrl-C stops)
  ktui replay vfs.ktrec
  ktui stream --from vfs.ktrec > vfs.ndjson

\b
Probe spec: TARGET:KIND[:FETCH,...]  KIND c = call (kprobe), r = return (kretprobe)
  FETCH: a1..a6, rax..r15, retval, comm, pid, tid, cpu, +OFF(FETCH), name=FETCH,
         with :u8..u64 :s8..s64 :x8..x64 :string :ustring :symbol
"""


class _DefaultGroup(click.Group):
    """`ktui ARGS` with no subcommand name runs the dashboard."""

    def parse_args(self, ctx, args):
        if args and args[0] not in self.commands and args[0] not in ("--help", "-h", "--version"):
            args = ["run", *args]
        elif not args:
            args = ["run"]
        return super().parse_args(ctx, args)


def _fail(message: str, code: int) -> "NoReturn":  # noqa: F821
    click.echo(f"ktui: {message}", err=True)
    sys.exit(code)


def _split_filter(text: str) -> tuple[str, str | None]:
    """`SPEC if FILTER` on the command line."""
    head, sep, tail = text.partition(" if ")
    return (head.strip(), tail.strip()) if sep else (text.strip(), None)


def load_inputs(files: tuple[str, ...], specs: tuple[str, ...], pid: int | None = None,
                comm: str | None = None, default: bool = False) -> ProbeSet:
    """Files and -e specs -> one ProbeSet. Raises KtuiError."""
    import dataclasses

    from ktui.lang.filters import parse_filter
    from ktui.lang.model import KtuiError, ProbeSet, ProbeSetError, SpecError
    from ktui.lang.probeset import load_probeset
    from ktui.lang.spec import parse_spec, validate_probe

    if comm is not None:
        _check_comm_option(comm)
    if not files and not specs and default:
        files = (str(DEFAULT_SET),)
    if not files and not specs:
        raise KtuiError("nothing to probe: give a probe set file or -e SPEC")
    probes = []
    name, description, source = "command line", "", None
    for f in files:
        ps = load_probeset(f)
        probes.extend(ps.probes)
        name, description, source = ps.name, ps.description, ps.source
        pid = pid if pid is not None else ps.pid
        comm = comm if comm is not None else ps.comm
    for i, text in enumerate(specs, 1):
        spec, filt = _split_filter(text)
        try:
            probe = parse_spec(spec)
            if filt is not None:
                probe = dataclasses.replace(probe, filter=parse_filter(filt))
                validate_probe(probe, filter_text=filt)
        except SpecError as exc:
            raise SpecError(exc.message, source=f"-e #{i}", col=exc.col) from None
        probes.append(probe)
    seen: dict[str, int] = {}
    for i, p in enumerate(probes):
        if p.name in seen:
            raise ProbeSetError(f"two probes are named {p.name!r}: give one a label")
        seen[p.name] = i
    if len(files) > 1 or specs:
        name = name if not specs else "command line"
    return ProbeSet(name=name, description=description, probes=tuple(probes), pid=pid,
                    comm=comm, source=source if len(files) == 1 and not specs else None)


def _check_comm_option(comm: str) -> None:
    """--comm obeys the rules of `filter: {comm: ...}` in a probe set."""
    from ktui.lang.chars import first_refused, refused_message
    from ktui.lang.model import KtuiError
    from ktui.lang.probeset import COMM_MAX_BYTES

    odd = first_refused(comm)
    if odd is not None:
        raise KtuiError(f"--comm: {refused_message(comm[odd])}")
    if not comm.strip():
        raise KtuiError("--comm: must not be empty")
    if len(comm.encode("utf-8", "surrogateescape")) > COMM_MAX_BYTES:
        raise KtuiError(f"--comm: longer than {COMM_MAX_BYTES} bytes "
                        "(the kernel keeps only 15 bytes of a command name)")


def _inputs_or_exit(files, specs, pid=None, comm=None, default=False) -> ProbeSet:
    from ktui.lang.model import KtuiError

    try:
        return load_inputs(files, specs, pid, comm, default)
    except KtuiError as exc:
        _fail(str(exc), EXIT_INVALID)


def _preflight_or_exit(print_warnings: bool = False) -> None:
    """Exit 3 with one line per problem if this machine cannot run probes.

    Warnings go to stderr only for headless commands: the dashboard shows
    them in its status line instead (preflight_warnings -> SystemInfo.notes)."""
    from ktui.kernel.preflight import check_environment

    findings = check_environment()
    problems = [p for p in findings if p.fatal]
    for p in problems:
        click.echo(f"ktui: {p.message}", err=True)
    if problems:
        sys.exit(EXIT_ENVIRONMENT)
    if print_warnings:
        for p in findings:
            click.echo(f"ktui: warning: {p.message}", err=True)


_common_probe_options = [
    click.option("-e", "--spec", "specs", multiple=True, metavar="SPEC",
                 help="A probe in the compact form (repeatable); `SPEC if FILTER` adds a filter."),
    click.option("--pid", type=int, default=None, help="Only this process (in the kernel)."),
    click.option("--comm", default=None, help="Only tasks with this name (in the kernel)."),
    click.option("--buffer", type=click.Choice(["auto", "ringbuf", "perf"]), default="auto",
                 show_default=True, help="Event buffer: BPF ring buffer (5.8+) or perf buffers."),
    click.option("--buffer-pages", type=int, default=2048, show_default=True,
                 help="Ring buffer size in 4 KiB pages (a power of two)."),
    click.option("--log", "log_path", type=click.Path(dir_okay=False), default=None,
                 help="Log file (default ~/.local/state/ktui/ktui.log)."),
]


def probe_options(f):
    for opt in reversed(_common_probe_options):
        f = opt(f)
    return f


def _session_options(buffer, buffer_pages, log_path):
    from ktui.kernel.session import SessionOptions

    if buffer_pages < 1 or buffer_pages & (buffer_pages - 1):
        _fail("--buffer-pages must be a power of two", EXIT_USAGE)
    return SessionOptions(buffer=buffer, ringbuf_pages=buffer_pages,
                          perf_pages=max(8, min(1024, buffer_pages // 8)),
                          log_path=Path(log_path) if log_path else None)


@click.group(cls=_DefaultGroup, epilog=EXAMPLES, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="ktui")
def main() -> None:
    """ktui: a live dashboard for kprobes and kretprobes (through bcc)."""
    if os.geteuid() != os.getuid() or os.getegid() != os.getgid():
        _fail("refusing to run set-uid/set-gid: run it as root directly", EXIT_ENVIRONMENT)


@main.command("run", epilog=EXAMPLES)
@click.argument("files", nargs=-1, type=click.Path())
@probe_options
@click.option("--refresh", type=float, default=15.0, show_default=True, help="Screen updates per second.")
def run_cmd(files, specs, pid, comm, buffer, buffer_pages, log_path, refresh):
    """The full-screen dashboard (the default command)."""
    ps = _inputs_or_exit(files, specs, pid, comm, default=True)
    _preflight_or_exit()
    from ktui.dashboard import run_live

    sys.exit(run_live(ps, _session_options(buffer, buffer_pages, log_path), refresh))


@main.command("check")
@click.argument("files", nargs=-1, required=True, type=click.Path())
@click.option("--syntax-only", is_flag=True,
              help="Do not check function names against the running kernel.")
def check_cmd(files, syntax_only):
    """Validate probe sets; print every error as file:line:col: message.

    Function names are checked against the running kernel's symbols where
    /proc/kallsyms is readable; a function in a module that is not loaded
    is a warning."""
    from ktui.kernel.namecheck import FunctionCheck

    names = FunctionCheck()
    with _warnings_on_stderr():
        bad = _check_files(files, names, syntax_only)
    sys.exit(EXIT_INVALID if bad else 0)


def _check_files(files, names, syntax_only: bool) -> int:
    """`ktui check`'s loop; the number of files that failed."""
    from ktui.lang.model import KtuiError
    from ktui.lang.probeset import load_probeset

    bad = 0
    for f in files:
        try:
            ps = load_probeset(f)
        except KtuiError as exc:
            click.echo(str(exc))
            bad += 1
            continue
        problems = [] if syntax_only else _name_problems(f, ps, names)
        for line, fatal in problems:
            click.echo(line)
        if any(fatal for _line, fatal in problems):
            bad += 1
            continue
        unchecked = None if syntax_only else names.unchecked()
        note = f"; {unchecked}" if unchecked else ""
        click.echo(f"{f}: ok ({len(ps.probes)} probe{'s' if len(ps.probes) != 1 else ''}{note})")
    return bad


def _name_problems(path: str, ps, names) -> list[tuple[str, bool]]:
    """`FILE:LINE:COL: probe N (SPEC): message` for each probe whose function
    the running kernel cannot probe; (line, fatal)."""
    from ktui.lang.locate import target_positions

    out = []
    positions = None
    for number, probe in enumerate(ps.probes, 1):
        symbol = probe.target.symbol
        if symbol is None:
            continue
        found = names.problem(symbol)
        if found is None:
            continue
        if positions is None:
            positions = target_positions(path)
        line, col = positions[number - 1] if number <= len(positions) else (None, None)
        where = ":".join(str(p) for p in (path, line, col) if p is not None)
        kind = "" if found.fatal else "warning: "
        out.append((f"{where}: {kind}probe {number} ({probe.spec_text}): {found.message}", found.fatal))
    return out


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
def list_cmd(patterns, as_json, wide, no_cache):
    """Kernel functions matching shell globs (default '*'), each with its
    prototype (from BTF) and whether it can be probed, or why not.

    \b
    PATTERN: a glob (vfs_*, tcp_*send*), or MODULE:GLOB for one module,
    loaded or not (xfs:*). No root needed where the files are readable.
    """
    from ktui.listing import run_list

    with _warnings_on_stderr():
        code = run_list(list(patterns) or ["*"], as_json=as_json, wide=wide, cache=not no_cache)
    sys.exit(code)


@main.command("compile")
@click.argument("files", nargs=-1, type=click.Path())
@click.option("-e", "--spec", "specs", multiple=True, metavar="SPEC", help="A probe (repeatable).")
@click.option("--buffer", type=click.Choice(["ringbuf", "perf"]), default="ringbuf", show_default=True)
def compile_cmd(files, specs, buffer):
    """Print the BPF C program ktui would load (no root needed)."""
    from ktui.kernel.codegen import generate
    from ktui.lang.model import KtuiError

    ps = _inputs_or_exit(files, specs)
    try:
        click.echo(generate(ps, buffer=buffer).text, nl=False)
    except KtuiError as exc:
        _fail(str(exc), EXIT_INVALID)


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


@main.command("stream")
@click.argument("files", nargs=-1, type=click.Path())
@probe_options
@click.option("--from", "from_rec", type=click.Path(dir_okay=False), default=None,
              help="Convert a recording to NDJSON instead of probing.")
@click.option("--interval", type=float, default=1.0, show_default=True, help="Seconds between stats lines.")
@click.option("--duration", type=float, default=None, help="Stop after this many seconds.")
@click.option("--no-stats", is_flag=True, help="Only event lines (and the summary).")
def stream_cmd(files, specs, pid, comm, buffer, buffer_pages, log_path, from_rec, interval,
               duration, no_stats):
    """One JSON object per event on stdout (NDJSON), stats every --interval."""
    from ktui.headless import replay_to_ndjson, run_stream

    if from_rec:
        sys.exit(replay_to_ndjson(from_rec, with_stats=not no_stats))
    ps = _inputs_or_exit(files, specs, pid, comm)
    _preflight_or_exit(print_warnings=True)
    _leave(run_stream(ps, _session_options(buffer, buffer_pages, log_path), interval,
                      duration, with_stats=not no_stats))


@main.command("record")
@click.argument("files", nargs=-1, type=click.Path())
@probe_options
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False), help="Recording file.")
@click.option("--interval", type=float, default=1.0, show_default=True, help="Seconds between stats snapshots.")
@click.option("--duration", type=float, default=None, help="Stop after this many seconds.")
@click.option("-f", "--force", is_flag=True, help="Overwrite the recording file if it exists.")
def record_cmd(files, specs, pid, comm, buffer, buffer_pages, log_path, output, interval, duration,
               force):
    """Record raw event batches and stats to a file (replay with `ktui replay`).

    An existing file is refused unless --force is given."""
    from ktui.headless import run_record

    ps = _inputs_or_exit(files, specs, pid, comm)
    _preflight_or_exit(print_warnings=True)
    _leave(run_record(ps, _session_options(buffer, buffer_pages, log_path), output, interval,
                      duration, force=force))


@main.command("replay")
@click.argument("recording", type=click.Path(dir_okay=False))
@click.option("--speed", type=float, default=1.0, show_default=True, help="0 = as fast as possible.")
@click.option("--refresh", type=float, default=15.0, show_default=True)
@click.option("--log", "log_path", type=click.Path(dir_okay=False), default=None)
def replay_cmd(recording, speed, refresh, log_path):
    """The dashboard on a recording: no root, no kernel."""
    from ktui.dashboard import run_replay

    sys.exit(run_replay(recording, speed, refresh, Path(log_path) if log_path else None))


@main.command("vm", context_settings={"ignore_unknown_options": True})
@click.option("--kernel", default=None, help="Kernel version under /boot (default: newest 6.1).")
@click.option("--no-workload", is_flag=True, help="Do not start the demo workload in the VM.")
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def vm_cmd(kernel, no_workload, args):
    """The dashboard inside a throwaway VM with a stock Debian kernel.

    For machines whose own kernel has no kprobes or is locked down."""
    from ktui.vm import run_in_vm

    sys.exit(run_in_vm(list(args), kernel=kernel, workload=not no_workload))


if __name__ == "__main__":
    main()
