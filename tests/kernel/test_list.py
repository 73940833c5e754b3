"""`ktui list` on a real kernel: each verdict appears for a real function,
and agrees with what the kernel does when asked for a kprobe there; the
prototypes agree with bpftrace's reading of the same BTF.

A kprobe is asked for through the perf kprobe PMU alone (perf_event_open,
no BPF program): the kernel registers the probe there, refusing it the way
an attach would (blacklist: EINVAL; no such symbol: ENOENT), and closing
the fd removes it.
"""

from __future__ import annotations

import ctypes
import errno
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from ktui.kernel.attach import kprobe_pmu
from ktui.kernel.symbols.ftrace import read_filter_functions

from .conftest import kprobe_entries

KTUI = [sys.executable, "-m", "ktui"]
BLACKLIST = Path("/sys/kernel/debug/kprobes/blacklist")


def ktui_list(*patterns: str, env: dict | None = None) -> dict:
    """`ktui list --json` as a user runs it: the run's first listing reads
    the kernel's BTF and writes ktui's cache of it, the later ones (and the
    dashboard's function browser after them) read the cache: seconds less
    each under emulation."""
    out = subprocess.run([*KTUI, "list", "--json", *patterns], capture_output=True,
                         text=True, timeout=600, env=env)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def kprobe_refusal(symbol: str) -> int | None:
    """The errno the kernel answers a kprobe on `symbol` with; None: accepted."""
    attr = kprobe_pmu.PerfEventAttr()
    attr.type = int(Path("/sys/bus/event_source/devices/kprobe/type").read_text())
    name = ctypes.create_string_buffer(symbol.encode())
    attr.config1 = ctypes.addressof(name)
    attr.sample_period = 1
    try:
        fd = kprobe_pmu.perf_event_open(attr, -1, 0)
    except OSError as exc:
        return exc.errno
    os.close(fd)
    return None


@pytest.fixture(scope="module")
def listing() -> dict:
    doc = ktui_list("*")
    assert doc["btf"] is True and doc["not_checked"] == [], doc["not_checked"]
    return {f["name"]: f for f in doc["functions"]}


def spread(items: list, n: int) -> list:
    """n items spread over a sorted list (not just the a* names)."""
    items = sorted(items)
    step = max(1, len(items) // n)
    return items[::step][:n]


def test_vfs_read_is_traceable_with_its_prototype(listing):
    e = listing["vfs_read"]
    assert e["verdict"] == "traceable" and e["module"] is None
    assert e["prototype"] == ("vfs_read(struct file *file, char *buf, size_t count, loff_t *pos) "
                              "-> ssize_t")
    assert kprobe_refusal("vfs_read") is None


def test_blacklisted_functions_are_refused_by_the_kernel(listing):
    names = [n for n, e in listing.items() if e["verdict"] == "blacklisted"]
    assert len(names) > 20
    on_file = {ln.split()[1] for ln in BLACKLIST.read_text().splitlines() if len(ln.split()) > 1}
    sample = spread(names, 25)
    assert set(sample) <= on_file
    refused = {n: kprobe_refusal(n) for n in sample}
    assert all(err == errno.EINVAL for err in refused.values()), refused
    assert kprobe_entries() == []  # nothing left behind


def test_notrace_functions_are_refused_by_this_kernels_kprobe_events(listing):
    """Debian builds with CONFIG_KPROBES_ON_FTRACE and without
    CONFIG_KPROBE_EVENTS_ON_NOTRACE: trace_kprobe.c refuses a function
    ftrace does not know, and says so in the kernel log."""
    config = Path(f"/boot/config-{os.uname().release}").read_text()
    assert "CONFIG_KPROBES_ON_FTRACE=y" in config
    assert "# CONFIG_KPROBE_EVENTS_ON_NOTRACE is not set" in config
    names = [n for n, e in listing.items()
             if e["verdict"] == "notrace" and e["symbols"] == 1 and not e["copy_of"]]
    assert len(names) > 100
    filterable, problem = read_filter_functions()
    assert filterable is not None, problem
    sample = spread(names, 25)
    assert not set(sample) & filterable
    refused = {n: kprobe_refusal(n) for n in sample}
    assert all(err == errno.EINVAL for err in refused.values()), refused
    log = subprocess.run(["dmesg"], capture_output=True, text=True).stdout
    assert f"Could not probe notrace function {sample[-1]}" in log


def test_copy_only_functions_have_no_symbol_and_their_copies_take_a_kprobe(listing):
    originals = [n for n, e in listing.items() if e["verdict"] == "copy-only"]
    assert len(originals) > 10
    copies: dict[str, list[str]] = {}
    for n, e in listing.items():
        if e["copy_of"] and e["verdict"] == "traceable" and e["symbols"] == 1 and ".cold" not in n:
            copies.setdefault(e["copy_of"], []).append(n)
    checked = 0
    for original in spread([o for o in originals if o in copies], 10):
        assert kprobe_refusal(original) == errno.ENOENT, original
        copy = copies[original][0]
        assert kprobe_refusal(copy) is None, copy
        assert "positional fetches only" in listing[copy]["note"]
        checked += 1
    assert checked >= 5


def test_copies_that_ftrace_does_not_know_follow_the_kernels_rule(listing):
    """A copy missing from available_filter_functions takes a kprobe when
    its original is traced (kprobe-only), and is refused when not (notrace)."""
    kprobe_only = [n for n, e in listing.items()
                   if e["copy_of"] and e["verdict"] == "kprobe-only" and e["symbols"] == 1]
    notrace = [n for n, e in listing.items()
               if e["copy_of"] and e["verdict"] == "notrace" and e["symbols"] == 1]
    assert notrace
    assert all(kprobe_refusal(n) is None for n in spread(kprobe_only, 5))
    assert all(kprobe_refusal(n) == errno.EINVAL for n in spread(notrace, 5))


@pytest.fixture(scope="module")
def modules(listing) -> tuple[str, list[str], dict]:
    """The loaded module with the most traceable functions, those functions,
    and `ktui list MODULE:* xfs:xfs_file_read_iter` (xfs is not loaded): one
    ktui for both module patterns (a start is seconds under emulation)."""
    by_module: dict[str, list[str]] = {}
    for n, e in listing.items():
        if e["module"] and e["verdict"] == "traceable" and e["symbols"] == 1:
            by_module.setdefault(e["module"], []).append(n)
    assert by_module, "no loaded module with traceable functions"
    module = sorted(by_module, key=lambda m: -len(by_module[m]))[0]
    return module, by_module[module], ktui_list(f"{module}:*", "xfs:xfs_file_read_iter")


def test_a_loaded_modules_functions_carry_its_name(listing, modules):
    module, functions, scoped = modules
    assert Path(f"/sys/module/{module}/initstate").read_text().strip() == "live"
    assert {f["module"] for f in scoped["functions"]} == {module, "xfs"}
    assert set(functions) <= {f["name"] for f in scoped["functions"] if f["module"] == module}
    name = spread(functions, 1)[0]
    assert listing[name]["prototype"].startswith(name + "(")  # from the module's own BTF
    assert kprobe_refusal(name) is None


def test_a_module_that_is_not_loaded_is_read_from_its_file(modules):
    assert not Path("/sys/module/xfs").exists(), "xfs is loaded in this VM"
    [e] = [f for f in modules[2]["functions"] if f["module"] == "xfs"]
    assert (e["verdict"], e["module"]) == ("not-loaded", "xfs")
    assert e["prototype"] == "xfs_file_read_iter(struct kiocb *iocb, struct iov_iter *to) -> ssize_t"
    assert kprobe_refusal("xfs_file_read_iter") == errno.ENOENT


def test_functions_without_a_symbol_cannot_be_probed(listing):
    names = [n for n, e in listing.items() if e["verdict"] == "no-symbol"]
    assert names
    refused = {n: kprobe_refusal(n) for n in spread(names, 10)}
    assert all(err == errno.ENOENT for err in refused.values()), refused


def test_prototypes_agree_with_bpftrace(listing):
    """bpftrace -lv reads the same BTF with libbpf. Every function it lists
    as a kfunc, ktui lists as probe-able by fentry (traceable, or
    blacklisted, which is about kprobes only) with a prototype, and with the
    same parameter names and types. bpftrace 0.17 leaves out functions of
    more than 6 parameters and compiler copies; ktui lists those too."""
    out = subprocess.run(["bpftrace", "-lv", "kfunc:*"], capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 0, out.stderr[-500:]
    bpftrace: dict[str, list[str]] = {}
    name = None
    for line in out.stdout.splitlines():
        if line.startswith("kfunc:"):
            name = line.split(":")[2]
            bpftrace[name] = []
        elif name is not None and line.startswith("    "):
            bpftrace[name].append(line.strip())
    assert len(bpftrace) > 10_000
    wrong = {n: listing.get(n, {}).get("verdict") for n in bpftrace
             if n not in listing or listing[n]["verdict"] not in ("traceable", "blacklisted")
             or not listing[n]["prototype"]}
    assert wrong == {}, dict(list(wrong.items())[:10])
    unlisted = [n for n, e in listing.items()
                if e["verdict"] == "traceable" and e["prototype"] and not e["copy_of"]
                and not e["module"] and n not in bpftrace and e["prototype"].count(", ") < 6]
    assert unlisted == [], [listing[n] for n in unlisted[:5]]
    compared = 0
    mismatched = []
    for n, lines in bpftrace.items():
        e = listing[n]
        if "several different prototypes" in (e["note"] or ""):
            continue
        # the last line is the return value (`TYPE retval`), except for a void
        # function, whose last parameter may itself be called retval
        params = lines if e["prototype"].endswith("-> void") else lines[:-1]
        inside = e["prototype"][e["prototype"].index("(") + 1:e["prototype"].rindex(") -> ")]
        if "(" in inside or "[" in inside or "..." in inside:
            continue  # function pointers and arrays: bpftrace prints them its own way
        mine = [] if inside == "void" else inside.split(", ")
        # "char * buf" vs "char *buf"; libbpf's dedup names a type's other
        # flavours "struct irq_info___3", which bpftrace prints as is; and
        # bpftrace writes "volatile const" where C usually says "const volatile"
        squash = lambda s: re.sub(r"___\d+\b|\s+", "", s.replace("volatile const", "const volatile"))  # noqa: E731
        if [squash(p) for p in mine] != [squash(p) for p in params]:
            mismatched.append((n, mine, params))
        compared += 1
    assert mismatched == [], (len(mismatched), mismatched[:5])
    assert compared > 10_000


def test_without_root_it_lists_and_says_what_it_could_not_check(ktui_for_anyone):
    """As `nobody`, from a copy of ktui that `nobody` may read: the checkout
    may sit where only its owner can go (a clone in `mktemp -d`, mode 0700)."""
    python, env = ktui_for_anyone("click")
    out = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *python,
                          "list", "--no-cache", "vfs_read"], capture_output=True, text=True,
                         timeout=300, env={**env, "HOME": "/tmp"}, cwd="/")
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("unchecked   vfs_read(struct file *file, ")
    lines = out.stderr.splitlines()
    assert any(ln.startswith("ktui: not checked: which functions fentry can attach to") for ln in lines)
    assert any(ln.startswith("ktui: not checked: the kprobe blacklist") for ln in lines)


def test_the_text_listing_says_what_the_json_says():
    """The text path computes verdicts in bulk (Catalog.text), the JSON
    path name by name: on this kernel's 56,000 functions they agree. One
    catalog, so both see the same kernel state."""
    from collections import Counter

    from ktui.btf.index import KernelBtf
    from ktui.kernel.symbols.catalog import Catalog, Sources
    from ktui.kernel.symbols.catalog_text import entry_line

    catalog = Catalog(Sources(btf=KernelBtf()))
    lines, counts = catalog.text(["*"])
    entries = catalog.list(["*"])
    assert len(entries) > 40_000
    expected = [entry_line(e) for e in entries]
    differ = [(a, b) for a, b in zip(lines, expected) if a != b]
    assert differ == [] and len(lines) == len(expected)
    assert counts == Counter(e.verdict for e in entries)
