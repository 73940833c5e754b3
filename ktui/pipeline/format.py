"""Text for what the dashboard shows: fetched values, times, latencies, counts.

Pure functions over the data model; no Textual or Rich here, so the stream
and record commands can print exactly what the dashboard shows.
"""

from __future__ import annotations

import errno
from typing import Callable, Sequence

from ktui.lang.limits import MAX_ERRNO
from ktui.lang.cgroups import is_cgroup
from ktui.lang.model import Fetch, Probe, RetVal
from ktui.record.cgroups import short as cgroup_short
from ktui.record.feed import Event

Symbolize = Callable[[int], str]


_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\t": "\\t", "\r": "\\r", "\0": "\\0"}


def type_bits(ftype: str) -> int:
    """`u32` -> 32, `x8` -> 8: the width of an integer fetch type."""
    return int(ftype[1:])


def to_signed(value: int, bits: int) -> int:
    """Reinterpret the low `bits` bits of `value` as two's complement."""
    value &= (1 << bits) - 1
    return value - (1 << bits) if value >> (bits - 1) else value


def to_unsigned(value: int, bits: int) -> int:
    return value & ((1 << bits) - 1)


def quote_string(value: str | bytes) -> str:
    """A C-like double-quoted literal: non-printables escaped, so a string
    fetched from kernel memory can never move the cursor or change colours."""
    if isinstance(value, bytes):
        return '"' + "".join(_escape_byte(b) for b in value) + '"'
    return '"' + "".join(_escape_char(c) for c in value) + '"'


def _escape_byte(b: int) -> str:
    c = chr(b)
    if c in _ESCAPES:
        return _ESCAPES[c]
    return c if 0x20 <= b < 0x7F else f"\\x{b:02x}"


def _escape_char(c: str) -> str:
    if c in _ESCAPES:
        return _ESCAPES[c]
    code = ord(c)
    if 0xDC80 <= code <= 0xDCFF:  # a byte that was not UTF-8 (surrogateescape)
        return f"\\x{code - 0xDC00:02x}"
    if c.isprintable():
        return c
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str) -> str:
    """`text` with only its non-printable characters escaped (for comm, which
    any process can set to anything with prctl(PR_SET_NAME))."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else _escape_char(c) for c in text)


def errno_name(code: int) -> str:
    """`9` or `-9` -> `EBADF`; a number the C library has no name for ->
    `E123`. The one name of an errno: the dashboard, the event pane and the
    NDJSON stats all print this."""
    return errno.errorcode.get(abs(code), f"E{abs(code)}")


def as_errno(value: int) -> int | None:
    """The errno a return value carries (`-9` -> 9), or None if it is not one.
    Accepts raw unsigned 64-bit values too (ERR_PTR style)."""
    signed = to_signed(value, 64) if value >= 1 << 63 else value
    return -signed if -MAX_ERRNO <= signed <= -1 else None


def format_value(value: int | str | bytes, ftype: str, symbolize: Symbolize | None = None) -> str:
    """Format one fetched value by its fetch type (see model.FETCH_TYPES)."""
    if ftype in ("string", "ustring") or isinstance(value, (str, bytes)):
        if isinstance(value, int):  # a string fetch that failed to read
            return f"<0x{value:x}>"
        return quote_string(value)
    if ftype == "symbol":
        addr = to_unsigned(value, 64)
        if symbolize is None:
            return f"0x{addr:x}"
        return symbolize(addr)
    kind, bits = ftype[0], type_bits(ftype)
    if kind == "x":
        return f"0x{to_unsigned(value, bits):x}"
    if kind == "s":
        return str(to_signed(value, bits))
    return str(to_unsigned(value, bits))


def is_dev_t(fetch: Fetch) -> bool:
    """A kernel `dev_t` by its C type (BTF's or a tracepoint format's): a
    disk's (`rq->part->bd_dev`), a file system's (`s_dev`), a device
    file's (`i_rdev`)."""
    return fetch.ctype == "dev_t"


def dev_text(value: int) -> str:
    """A kernel dev_t as `ls -l`, /proc/partitions and lsblk name a device,
    `MAJOR:MINOR` (`7340032` -> `7:0`): inside the kernel a dev_t is
    MAJOR << 20 | MINOR (include/linux/kdev_t.h), not glibc's makedev."""
    return f"{value >> 20}:{value & 0xFFFFF}"


def format_fetch(fetch: Fetch, value: int | str | bytes, symbolize: Symbolize | None = None) -> str:
    """A value as its fetch says, with the errno name when a return value is
    an error (`-9 (EBADF)`), which is what a kernel developer looks for; a
    cgroup's path shortened where it names a container (the event detail's
    raw column keeps the path)."""
    if is_cgroup(fetch.expr) and isinstance(value, str):
        value = cgroup_short(value)  # what the path says (a container's scope as runtime:id)
    if isinstance(value, int) and is_dev_t(fetch):
        return dev_text(value)
    text = format_value(value, fetch.effective_type, symbolize)
    if isinstance(fetch.expr, RetVal) and isinstance(value, int):
        code = as_errno(value)
        if code is not None:
            text += f" ({errno_name(code)})"
    return text


def fetch_pairs(
    probe: Probe | None, values: Sequence, symbolize: Symbolize | None = None
) -> list[tuple[str, str]]:
    """(name, formatted value) per fetched value. Values beyond the probe's
    fetches (a probe that changed under a recording) are shown untyped."""
    fetches = probe.fetches if probe is not None else ()
    pairs = []
    for i, value in enumerate(values):
        if i < len(fetches):
            pairs.append((fetches[i].name, format_fetch(fetches[i], value, symbolize)))
        else:
            default = "string" if isinstance(value, (str, bytes)) else "u64"
            pairs.append((f"v{i + 1}", format_value(value, default, symbolize)))
    return pairs


def format_ts(ts_ns: int) -> str:
    """CLOCK_MONOTONIC nanoseconds as `seconds.micros`, the form ftrace and
    perf use, so times can be matched against dmesg and trace_pipe."""
    secs, ns = divmod(ts_ns, 1_000_000_000)
    return f"{secs}.{ns // 1000:06d}"


_LATENCY_UNITS = ((1_000, "us"), (1_000_000, "ms"), (1_000_000_000, "s"))


def format_latency(ns: int | float | None) -> str:
    """`12345` -> `12.3us`: three significant digits, the unit that fits."""
    if ns is None:
        return "-"
    if ns < 1000:
        return f"{int(ns)}ns"
    for scale, unit in _LATENCY_UNITS:
        text = _three_digits(ns / scale)
        # 999.96us rounds to "1000": the next unit up says it in three digits
        if float(text) < 1000 or unit == "s":
            return text + unit
    raise AssertionError("unreachable: the last unit always returns")


def _three_digits(x: float) -> str:
    if round(x, 2) < 10:
        return f"{x:.2f}"
    if round(x, 1) < 100:
        return f"{x:.1f}"
    return f"{x:.0f}"


_COUNT_UNITS = ((1_000_000_000, "G"), (1_000_000, "M"), (1_000, "k"))


def format_cpu_share(percent: float | None) -> str:
    """A share of one CPU in percent: `0.42%`, `12.5%`, `<0.01%` for a
    probe that ran but costs less than a ten-thousandth of a CPU."""
    if percent is None:
        return "-"
    if percent == 0:
        return "0%"
    if percent < 0.01:
        return "<0.01%"
    return f"{percent:.2f}%" if percent < 10 else f"{percent:.1f}%"


def format_count(n: int | float) -> str:
    """A counter or rate short enough for a table cell: `98765`, `2.5`,
    `123.5k`, `12.35M`."""
    if n < 100_000:
        if isinstance(n, float) and n < 100:
            return f"{n:.1f}".removesuffix(".0")
        return f"{n:.0f}"
    for scale, unit in _COUNT_UNITS:
        if n >= scale:
            value = n / scale
            return f"{value:.{1 if value >= 100 else 2}f}{unit}"
    raise AssertionError("unreachable: n >= 100000 matches a unit")


def short_name(probe: Probe) -> str:
    """`vfs_read:r` for `vfs_read:r:ret=retval`; a label as it is."""
    return probe.label if probe.label is not None else f"{probe.target}:{probe.kind.value}"


def event_columns(
    event: Event, probe: Probe | None, symbolize: Symbolize | None = None
) -> tuple[str, str, str, str, str, str]:
    """(time, cpu, comm[pid], cgroup, probe, details) of one event, where
    details is `name=value ...` and, for a return probe, `lat=1.20us`. The
    probe is its label, else `target:kind`: the fetches are named in the
    details already. The cgroup is its task's, shortened where the path
    says what it is (`docker:0123456789ab`); "" where the event does not
    carry one (a recording made before events did)."""
    name = short_name(probe) if probe is not None else f"#{event.probe_id}"
    details = [f"{k}={v}" for k, v in fetch_pairs(probe, event.values, symbolize)]
    if event.in_interrupt:  # pid and comm are the interrupted task's: said first
        details.insert(0, f"[{event.context}]")
    if event.latency_ns is not None:
        details.append(f"lat={format_latency(event.latency_ns)}")
    comm = printable(event.comm)
    task = f"{comm}[{event.pid}]" if event.pid == event.tid else f"{comm}[{event.pid}/{event.tid}]"
    cgroup = printable(cgroup_short(event.cgroup)) if event.cgroup else ""
    return (format_ts(event.ts_ns), f"{event.cpu:03d}", task, cgroup, name, " ".join(details))


def format_event(event: Event, probe: Probe | None, symbolize: Symbolize | None = None) -> str:
    """One event on one line: `4242.000001 003 cat[1234] system.slice/x.service vfs_read count=16 lat=1.20us`.

    This is the text the event pane shows and filters on."""
    return " ".join(c for c in event_columns(event, probe, symbolize) if c)
