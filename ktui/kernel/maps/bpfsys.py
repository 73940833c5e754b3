"""The bpf(2) system call, for what ktui does without bcc.

bcc compiles C; everything after that is a handful of bpf(2) commands:
create a map, load instructions, look up and update elements, link a
program to a perf event with a cookie. Doing them here keeps bcc (and its
LLVM, seconds of imports under emulation) out of a start that needs no
compiler: a cached program, the hand-assembled dispatcher, every probe
added to a running session. `union bpf_attr` is a stable ABI; each command
fills only its own fields, the rest stays zero.
"""

from __future__ import annotations

import ctypes
import errno
import os
import struct
from dataclasses import dataclass
from pathlib import Path

SYS_BPF = 321  # x86-64

BPF_MAP_CREATE = 0
BPF_MAP_LOOKUP_ELEM = 1
BPF_MAP_UPDATE_ELEM = 2
BPF_MAP_DELETE_ELEM = 3
BPF_MAP_GET_NEXT_KEY = 4
BPF_PROG_LOAD = 5
BPF_PROG_TEST_RUN = 10
BPF_OBJ_GET_INFO_BY_FD = 15
BPF_BTF_LOAD = 18
BPF_MAP_LOOKUP_BATCH = 24
BPF_LINK_CREATE = 28
BPF_ENABLE_STATS = 32

BPF_MAP_TYPE_HASH = 1
BPF_MAP_TYPE_ARRAY = 2
BPF_MAP_TYPE_PROG_ARRAY = 3
BPF_MAP_TYPE_PERCPU_ARRAY = 6
BPF_MAP_TYPE_RINGBUF = 27
BPF_MAP_TYPE_TASK_STORAGE = 29
BPF_F_NO_PREALLOC = 1  # map flag: local storage maps must say it
PERCPU_TYPES = (5, 6, 10)  # percpu hash, percpu array, lru percpu hash

BPF_PROG_TYPE_KPROBE = 2
BPF_PROG_TYPE_TRACEPOINT = 5
BPF_PROG_TYPE_TRACING = 26
BPF_TRACE_FENTRY = 24  # expected attach types of a tracing program
BPF_TRACE_FEXIT = 25
BPF_RAW_TRACEPOINT_OPEN = 17
BPF_PERF_EVENT = 41  # attach type of a link to a perf event
BPF_TRACE_KPROBE_MULTI = 42  # attach type of a kprobe_multi link (5.18+, CONFIG_FPROBE)
BPF_F_KPROBE_MULTI_RETURN = 1  # a kprobe_multi link on the functions' returns
BPF_PSEUDO_MAP_FD = 1
BPF_ANY = 0

_ATTR_SIZE = 128  # more than any command here uses

# The C library the interpreter runs on, by the process's own symbols:
# ctypes.util.find_library runs ldconfig (a process of ktui's that probes
# would count, in the compile helper: compile_child.py).
_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


class BpfError(OSError):
    """A bpf(2) command failed; `log` holds the verifier's words, if any."""

    def __init__(self, errno_: int, what: str, log: str = "") -> None:
        super().__init__(errno_, f"{what}: {os.strerror(errno_)}")
        self.log = log


def _bpf(cmd: int, attr: ctypes.Array, what: str) -> int:
    ret = _libc.syscall(SYS_BPF, ctypes.c_int(cmd), attr, ctypes.c_uint(_ATTR_SIZE))
    if ret < 0:
        raise BpfError(ctypes.get_errno(), what)
    return ret


def _attr() -> ctypes.Array:
    return ctypes.create_string_buffer(_ATTR_SIZE)


def _name16(name: str) -> bytes:
    return name.encode()[:15].ljust(16, b"\0")


def possible_cpus(path: Path = Path("/sys/devices/system/cpu/possible")) -> int:
    """How many values a per-CPU map holds per key (`0-3` -> 4)."""
    text = path.read_text().strip()
    count = 0
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        count += (int(hi) if hi else int(lo)) - int(lo) + 1
    return count


def map_create(map_type: int, key_size: int, value_size: int, max_entries: int,
               flags: int = 0, name: str = "", inner_map_fd: int = 0,
               btf: tuple[int, int, int] | None = None) -> int:
    """A map; `btf`: (BTF fd, key type id, value type id), for the map
    types that need their key and value described (local storage)."""
    attr = _attr()
    struct.pack_into("<IIIIII", attr, 0, map_type, key_size, value_size, max_entries, flags,
                     inner_map_fd)
    # numa_node (u32 @24), then map_name[16] @28
    attr[28:44] = _name16(name)
    if btf is not None:  # map_ifindex @44, btf_fd @48, btf_key_type_id @52, btf_value_type_id @56
        struct.pack_into("<III", attr, 48, *btf)
    return _bpf(BPF_MAP_CREATE, attr, f"creating map {name}")


def map_update(fd: int, key: bytes, value: bytes, flags: int = BPF_ANY) -> None:
    k = ctypes.create_string_buffer(key, len(key))
    v = ctypes.create_string_buffer(value, len(value))
    attr = _attr()
    struct.pack_into("<IIQQQ", attr, 0, fd, 0, ctypes.addressof(k), ctypes.addressof(v), flags)
    _bpf(BPF_MAP_UPDATE_ELEM, attr, "updating a map")


def map_lookup(fd: int, key: bytes, value_size: int) -> bytes | None:
    """The value under `key`, or None when there is none (ENOENT)."""
    k = ctypes.create_string_buffer(key, len(key))
    v = ctypes.create_string_buffer(value_size)
    attr = _attr()
    struct.pack_into("<IIQQ", attr, 0, fd, 0, ctypes.addressof(k), ctypes.addressof(v))
    try:
        _bpf(BPF_MAP_LOOKUP_ELEM, attr, "reading a map")
    except BpfError as exc:
        if exc.errno == 2:
            return None
        raise
    return v.raw


def map_delete(fd: int, key: bytes) -> bool:
    k = ctypes.create_string_buffer(key, len(key))
    attr = _attr()
    struct.pack_into("<IIQ", attr, 0, fd, 0, ctypes.addressof(k))
    try:
        _bpf(BPF_MAP_DELETE_ELEM, attr, "deleting from a map")
    except BpfError as exc:
        if exc.errno == 2:
            return False
        raise
    return True


def map_keys(fd: int, key_size: int) -> list[bytes]:
    """Every key of a hash map (a snapshot: keys added meanwhile may be missed)."""
    keys: list[bytes] = []
    cur = ctypes.create_string_buffer(key_size)
    nxt = ctypes.create_string_buffer(key_size)
    attr = _attr()
    first = True
    while True:
        struct.pack_into("<IIQQ", attr, 0, fd, 0, 0 if first else ctypes.addressof(cur),
                         ctypes.addressof(nxt))
        try:
            _bpf(BPF_MAP_GET_NEXT_KEY, attr, "listing a map")
        except BpfError as exc:
            if exc.errno == 2:
                return keys
            raise
        keys.append(nxt.raw)
        ctypes.memmove(cur, nxt, key_size)
        first = False


HASH_BATCH = 256  # entries a hash map's batched read asks for at a time


def hash_items(fd: int, key_size: int, value_size: int, batch: int = HASH_BATCH) -> list[tuple[bytes, bytes]]:
    """Every (key, value) of a hash map, read BPF_MAP_LOOKUP_BATCH by batch
    (5.6+): a syscall per `batch` entries where map_keys and map_lookup take
    two per entry, which is what a scrape of many keys paid. A kernel
    without batched hash reads (EINVAL) gets the entry-by-entry walk. Like
    that walk, a snapshot only: entries added meanwhile may be missed."""
    keys = ctypes.create_string_buffer(key_size * batch)
    values = ctypes.create_string_buffer(value_size * batch)
    # the cursor: a bucket number for a hash map (the kernel's u32), opaque here
    cursors = [ctypes.create_string_buffer(8), ctypes.create_string_buffer(8)]
    out: list[tuple[bytes, bytes]] = []
    first = True
    attr = _attr()
    while True:
        in_batch, out_batch = cursors
        size = batch
        while True:
            # in_batch(u64) out_batch(u64) keys(u64) values(u64) count(u32) map_fd(u32) elem_flags(u64) flags(u64)
            struct.pack_into("<QQQQIIQQ", attr, 0, 0 if first else ctypes.addressof(in_batch),
                             ctypes.addressof(out_batch), ctypes.addressof(keys), ctypes.addressof(values),
                             size, fd, 0, 0)
            try:
                _bpf(BPF_MAP_LOOKUP_BATCH, attr, "reading a hash map")
                done = False
            except BpfError as exc:
                if exc.errno == errno.EINVAL and first and not out:
                    return _hash_items_one_by_one(fd, key_size, value_size)
                if exc.errno == errno.ENOSPC and size < (1 << 20):
                    # a bucket holds more entries than `size`: ask for more room
                    size *= 2
                    keys = ctypes.create_string_buffer(key_size * size)
                    values = ctypes.create_string_buffer(value_size * size)
                    continue
                if exc.errno != errno.ENOENT:  # ENOENT: the last batch, maybe with entries
                    raise
                done = True
            break
        got = struct.unpack_from("<I", attr, 32)[0]
        raw_keys, raw_values = keys.raw, values.raw
        out.extend((raw_keys[i * key_size:(i + 1) * key_size], raw_values[i * value_size:(i + 1) * value_size])
                   for i in range(got))
        if done:
            return out
        cursors.reverse()  # this call's out_batch is the next one's in_batch
        first = False


def _hash_items_one_by_one(fd: int, key_size: int, value_size: int) -> list[tuple[bytes, bytes]]:
    out = []
    for key in map_keys(fd, key_size):
        value = map_lookup(fd, key, value_size)
        if value is not None:  # deleted since it was listed
            out.append((key, value))
    return out


def array_lookup_all(fd: int, count: int, value_size: int, start: int = 0) -> bytes:
    """Values of keys start..start+count-1 of an array map in one command
    (BPF_MAP_LOOKUP_BATCH): for a per-CPU array, `value_size` is the
    per-CPU size rounded to 8 times the number of possible CPUs."""
    keys = ctypes.create_string_buffer(4 * count)
    values = ctypes.create_string_buffer(value_size * count)
    out_batch = ctypes.create_string_buffer(8)
    # the batch goes on after in_batch's key: none to start at key 0
    in_batch = ctypes.create_string_buffer(struct.pack("<I", start - 1), 8) if start else None
    attr = _attr()
    # in_batch(u64) out_batch(u64) keys(u64) values(u64) count(u32) map_fd(u32) elem_flags(u64) flags(u64)
    struct.pack_into("<QQQQIIQQ", attr, 0, ctypes.addressof(in_batch) if in_batch else 0,
                     ctypes.addressof(out_batch), ctypes.addressof(keys),
                     ctypes.addressof(values), count, fd, 0, 0)
    try:
        _bpf(BPF_MAP_LOOKUP_BATCH, attr, "reading an array")
    except BpfError as exc:
        if exc.errno != 2:  # ENOENT: the last batch; everything was read
            raise
    got = struct.unpack_from("<I", attr, 32)[0]
    if got != count:
        raise BpfError(5, f"reading an array: got {got} of {count} values")
    return values.raw


def prog_load(insns: bytes, *, prog_type: int = BPF_PROG_TYPE_KPROBE, name: str = "",
              license_: str = "GPL", log_size: int = 0, expected_attach_type: int = 0,
              attach_btf_id: int = 0) -> int:
    """Load instructions; a refusal raises BpfError with the verifier's log
    when `log_size` is given. A tracing program names its attach type and
    target (a FUNC id of vmlinux's BTF: attach_btf_obj_fd stays 0, vmlinux).

    The first load asks for no log, as bcc and libbpf do: at log level 1
    the verifier prints every instruction it walks, and for the generic
    program that tripled its time (0.6 s against 1.9 s in our VM, for each
    fentry copy too). Only a refusal is loaded again, with the log, for
    the verifier's words."""
    args = (insns, prog_type, name, license_, expected_attach_type, attach_btf_id)
    try:
        return _prog_load(*args, log=None)
    except BpfError:
        if not log_size:
            raise
    return _prog_load(*args, log=ctypes.create_string_buffer(log_size))


def _prog_load(insns: bytes, prog_type: int, name: str, license_: str, expected_attach_type: int,
               attach_btf_id: int, *, log: ctypes.Array | None) -> int:
    code = ctypes.create_string_buffer(insns, len(insns))
    lic = ctypes.create_string_buffer(license_.encode())
    attr = _attr()
    # prog_type, insn_cnt, insns, license, log_level, log_size, log_buf, kern_version, prog_flags, prog_name[16]
    struct.pack_into("<IIQQIIQII", attr, 0, prog_type, len(insns) // 8, ctypes.addressof(code),
                     ctypes.addressof(lic), 1 if log else 0, len(log) if log else 0,
                     ctypes.addressof(log) if log else 0, 0, 0)
    attr[48:64] = _name16(name)
    # prog_ifindex @64, expected_attach_type @68, ..., attach_btf_id @108
    struct.pack_into("<I", attr, 68, expected_attach_type)
    struct.pack_into("<I", attr, 108, attach_btf_id)
    try:
        return _bpf(BPF_PROG_LOAD, attr, f"loading program {name}")
    except BpfError as exc:
        text = log.value.decode("utf-8", "replace") if log else ""
        raise BpfError(exc.errno, f"loading program {name}", text) from None


def link_perf_event(prog_fd: int, perf_fd: int, cookie: int) -> int:
    """Run `prog_fd` on the perf event `perf_fd` (a kprobe); the program
    reads `cookie` with bpf_get_attach_cookie (5.15+). Closing the returned
    link fd, or the perf fd, detaches it."""
    attr = _attr()
    struct.pack_into("<IIIIQ", attr, 0, prog_fd, perf_fd, BPF_PERF_EVENT, 0, cookie)
    return _bpf(BPF_LINK_CREATE, attr, "linking a program to a kprobe")


def link_create(prog_fd: int, target_fd: int, attach_type: int, extra: bytes = b"",
                what: str = "creating a link") -> int:
    """BPF_LINK_CREATE (5.7+): `extra` is the attach type's own part of
    the command (its union, from byte 16)."""
    attr = _attr()
    struct.pack_into("<IIII", attr, 0, prog_fd, target_fd, attach_type, 0)
    attr[16:16 + len(extra)] = extra
    return _bpf(BPF_LINK_CREATE, attr, what)


def link_tracing(prog_fd: int, attach_type: int, cookie: int) -> int:
    """Attach a loaded fentry/fexit program to the function it was verified
    for, through BPF_LINK_CREATE with an attach cookie (tracing.cookie @24,
    read by bpf_get_attach_cookie from 5.19; 5.10 to 5.18 take the link and
    ignore the cookie)."""
    return link_create(prog_fd, 0, attach_type, struct.pack("<IIQ", 0, 0, cookie),
                       "linking fentry/fexit with a cookie")


def link_kprobe_multi(prog_fd: int, symbols: list[str], cookies: list[int] | None = None,
                      retprobe: bool = False) -> int:
    """One kprobe_multi link (5.18+, needs CONFIG_FPROBE) on `symbols`,
    running `prog_fd` (loaded with expected attach type
    BPF_TRACE_KPROBE_MULTI), each function with its own cookie (read by
    bpf_get_attach_cookie) where `cookies` are given; `retprobe`: on their
    returns (BPF_F_KPROBE_MULTI_RETURN). One name the kernel cannot attach
    fails the whole link."""
    names = [ctypes.create_string_buffer(s.encode()) for s in symbols]
    array = (ctypes.c_uint64 * len(names))(*(ctypes.addressof(n) for n in names))
    values = (ctypes.c_uint64 * len(names))(*cookies) if cookies else None
    # kprobe_multi: flags u32, cnt u32, syms u64, addrs u64, cookies u64
    extra = struct.pack("<IIQQQ", BPF_F_KPROBE_MULTI_RETURN if retprobe else 0, len(names),
                        ctypes.addressof(array), 0, ctypes.addressof(values) if values is not None else 0)
    return link_create(prog_fd, 0, BPF_TRACE_KPROBE_MULTI, extra, "linking kprobe_multi")


def prog_test_run(prog_fd: int) -> int:
    """BPF_PROG_TEST_RUN with no input: a tracing (fentry/fexit) program's
    test run calls bpf_fentry_test1..8, which runs every program attached
    to them. Returns the run's retval."""
    attr = _attr()
    struct.pack_into("<I", attr, 0, prog_fd)
    _bpf(BPF_PROG_TEST_RUN, attr, "test-running a program")
    return struct.unpack_from("<I", attr, 4)[0]


def btf_load(blob: bytes) -> int:
    """Load a BTF blob (BPF_BTF_LOAD): the fd a map's key and value types
    are described by."""
    data = ctypes.create_string_buffer(blob, len(blob))
    attr = _attr()
    # btf u64, btf_log_buf u64, btf_size u32, btf_log_size u32, btf_log_level u32
    struct.pack_into("<QQIII", attr, 0, ctypes.addressof(data), 0, len(blob), 0, 0)
    return _bpf(BPF_BTF_LOAD, attr, "loading BTF")


def attach_tracing(prog_fd: int) -> int:
    """Attach a loaded fentry/fexit program to the function it was verified
    for (BPF_RAW_TRACEPOINT_OPEN without a name: 5.5+, where
    BPF_LINK_CREATE for tracing needs 5.10). The fd is the link: closing it,
    or the process dying, detaches it."""
    attr = _attr()
    struct.pack_into("<QI", attr, 0, 0, prog_fd)
    return _bpf(BPF_RAW_TRACEPOINT_OPEN, attr, "attaching fentry/fexit")


def map_info(fd: int) -> dict:
    """type, key/value size, max entries, flags and name of a map."""
    info = ctypes.create_string_buffer(88)
    attr = _attr()
    struct.pack_into("<IIQ", attr, 0, fd, len(info), ctypes.addressof(info))
    _bpf(BPF_OBJ_GET_INFO_BY_FD, attr, "reading a map's info")
    map_type, map_id, key_size, value_size, max_entries, flags = struct.unpack_from("<IIIIII", info, 0)
    name = info.raw[24:40].split(b"\0", 1)[0].decode()
    return {"type": map_type, "key_size": key_size, "value_size": value_size,
            "max_entries": max_entries, "flags": flags, "name": name}


# struct bpf_prog_info (include/uapi/linux/bpf.h), up to recursion_misses:
# run_time_ns @192, run_cnt @200 (5.1+), recursion_misses @208 (5.12+).
# A kernel older than a field leaves it zero (it copies only what it has).
PROG_INFO_SIZE = 216
_PROG_RUN = struct.Struct("<QQQ")
_PROG_RUN_AT = 192


@dataclass(frozen=True)
class ProgRun:
    """What the kernel counts of one program's runs: time and runs while
    BPF_ENABLE_STATS is on (summed over CPUs, since the program was loaded),
    and runs skipped because a BPF program was already running on that CPU."""

    run_time_ns: int = 0
    run_cnt: int = 0
    recursion_misses: int = 0


def parse_prog_run(info: bytes) -> ProgRun:
    """The run counters out of a struct bpf_prog_info."""
    return ProgRun(*_PROG_RUN.unpack_from(info, _PROG_RUN_AT))


def prog_run(fd: int) -> ProgRun:
    """The run counters of the program `fd` (BPF_OBJ_GET_INFO_BY_FD). Every
    pointer and count of the info stays zero: the kernel copies no arrays."""
    info = ctypes.create_string_buffer(PROG_INFO_SIZE)
    attr = _attr()
    struct.pack_into("<IIQ", attr, 0, fd, len(info), ctypes.addressof(info))
    _bpf(BPF_OBJ_GET_INFO_BY_FD, attr, "reading a program's info")
    return parse_prog_run(info.raw)


def prog_info_size(fd: int) -> int:
    """How much of struct bpf_prog_info the running kernel has (it copies
    min(ours, its own) bytes and says how many): a field lies past the
    kernel's size where the kernel is older than that field."""
    info = ctypes.create_string_buffer(PROG_INFO_SIZE)
    attr = _attr()
    struct.pack_into("<IIQ", attr, 0, fd, len(info), ctypes.addressof(info))
    _bpf(BPF_OBJ_GET_INFO_BY_FD, attr, "reading a program's info")
    return struct.unpack_from("<I", attr, 4)[0]


def enable_stats() -> int:
    """BPF_ENABLE_STATS(BPF_STATS_RUN_TIME): the kernel times every BPF
    program while the returned fd is open (closing it, or dying, stops it).
    The kernel makes it close-on-exec: a child that runs a program does not
    keep the statistics on."""
    attr = _attr()
    struct.pack_into("<I", attr, 0, 0)  # BPF_STATS_RUN_TIME
    return _bpf(BPF_ENABLE_STATS, attr, "enabling BPF run-time statistics")
