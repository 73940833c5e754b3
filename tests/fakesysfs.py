"""A kernel's self-description in a temporary directory: kallsyms with
modules and compiler copies, available_filter_functions, the kprobe
blacklist, BTF for vmlinux and a loaded module, /sys/module, and
/lib/modules with a module that is not loaded (its file, BTF inside).

Every verdict of `ktui list` has a function here:

    vfs_read        traceable          mymod_open    traceable, module mymod
    notrace_fn      notrace            mymod_helper  notrace, module mymod
    do_int3         blacklisted        xfs_*         not-loaded (module file)
    zstd_build      copy-only          tcp_vegas_init not-loaded (modules.symbols)
    inlined_fn      no-symbol          dup_fn        2 symbols share the name
    zstd_build.isra.0, cold_fn.cold: copies (the second kprobe-only: its
    original is traced); dup_fn: two different prototypes in BTF.

The kernel config says kprobe events refuse notrace functions (Debian's).
"""

from __future__ import annotations

from pathlib import Path

from ktui.btf.cache import FunctionCache
from ktui.btf.index import KernelBtf
from ktui.kernel.symbols.catalog import Catalog, Sources
from ktui.kernel.symbols.ksyms import KernelSymbols
from ktui.kernel.symbols.modules import ModuleTree
from tests.btfbuild import BtfBuilder, elf_module, vfs_like

BUILD_ID = bytes(range(20))

KALLSYMS = """\
ffffffff81000000 T vfs_read
ffffffff81000100 t do_int3
ffffffff81000200 t notrace_fn
ffffffff81000300 t zstd_build.isra.0
ffffffff81000400 t dup_fn
ffffffff81000500 t dup_fn
ffffffff81000600 t __pfx_vfs_read
ffffffff81000700 t cold_fn
ffffffff81000800 t cold_fn.cold
ffffffff81000900 d some_data
ffffffff81000a00 T _printk
ffffffffc0000000 t mymod_open\t[mymod]
ffffffffc0000100 t mymod_helper\t[mymod]
ffffffffc0001000 t bpf_prog_6deef7357e7b4530_sd_fw_ingress\t[bpf]
ffffffffc0002000 t ftrace_trampoline\t[__builtin__ftrace]
ffffffffc0003000 t kprobe_insn_page\t[__builtin__kprobes]
"""

FILTER_FUNCTIONS = """\
vfs_read
do_int3
dup_fn
cold_fn
zstd_build.isra.0
_printk
mymod_open [mymod]
"""

BLACKLIST = "0xffffffff81000100-0xffffffff81000180\tdo_int3\n"


def _notes(build_id: bytes) -> bytes:
    import struct

    return struct.pack("<III", 4, len(build_id), 3) + b"GNU\0" + build_id


class FakeKernel:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.kallsyms = root / "proc/kallsyms"
        self.filter_functions = root / "sys/kernel/tracing/available_filter_functions"
        self.blacklist = root / "sys/kernel/debug/kprobes/blacklist"
        self.btf_dir = root / "sys/kernel/btf"
        self.notes = root / "sys/kernel/notes"
        self.sys_module = root / "sys/module"
        self.lib_modules = root / "lib/modules/6.1.0-test"
        self.cache_dir = root / "cache/ktui"
        self.config = root / "boot/config-6.1.0-test"
        for p in (self.config, self.kallsyms, self.filter_functions, self.blacklist, self.btf_dir / "x",
                  self.notes, self.sys_module / "x", self.lib_modules / "x"):
            p.parent.mkdir(parents=True, exist_ok=True)
        self.kallsyms.write_text(KALLSYMS)
        self.filter_functions.write_text(FILTER_FUNCTIONS)
        self.blacklist.write_text(BLACKLIST)
        self.notes.write_bytes(_notes(BUILD_ID))
        self.config.write_text("CONFIG_KPROBES=y\nCONFIG_KPROBES_ON_FTRACE=y\n"
                               "# CONFIG_KPROBE_EVENTS_ON_NOTRACE is not set\n")

        b = BtfBuilder()
        t = self.types = vfs_like(b)
        i, v = t["int"], 0
        for name in ("do_int3", "notrace_fn", "zstd_build", "inlined_fn", "dup_fn", "cold_fn"):
            b.func(name, b.func_proto(i, [("x", i)]))
        b.func("dup_fn", b.func_proto(i, [("y", t["long"])]))  # a second, different dup_fn
        b.func("_printk", b.func_proto(i, [("fmt", b.ptr(b.const(t["char"])))], variadic=True))
        (self.btf_dir / "vmlinux").write_bytes(b.blob())
        self.base = b

        mod = BtfBuilder(base=b)
        mod.func("mymod_open", mod.func_proto(i, [("file", t["file_ptr"])]))
        mod.func("mymod_helper", mod.func_proto(v, []))
        (self.btf_dir / "mymod").write_bytes(mod.blob())
        (self.sys_module / "mymod").mkdir()
        (self.sys_module / "mymod/initstate").write_text("live\n")
        (self.sys_module / "ext4").mkdir()  # built in: no initstate

        xfs = BtfBuilder(base=b)
        xfs.func("xfs_file_read_iter", xfs.func_proto(t["ssize_t"], [("iocb", xfs.ptr(xfs.fwd("kiocb")))]))
        ko = self.lib_modules / "kernel/fs/xfs/xfs.ko"
        ko.parent.mkdir(parents=True)
        ko.write_bytes(elf_module(["xfs_file_read_iter", "xfs_helper.constprop.0", "__pfx_xfs_x"],
                                  xfs.blob(), data=["xfs_stats"]))
        (self.lib_modules / "modules.dep").write_text(
            "kernel/fs/xfs/xfs.ko: kernel/lib/libcrc32c.ko\nkernel/lib/libcrc32c.ko:\n"
            "kernel/net/ipv4/tcp_vegas.ko:\n")
        (self.lib_modules / "modules.symbols").write_text(
            "# Aliases for symbols, used by symbol_request().\n"
            "alias symbol:xfs_file_read_iter xfs\nalias symbol:tcp_vegas_init tcp_vegas\n"
            "alias symbol:mymod_open mymod\n")

    def btf(self, cache: bool = False) -> KernelBtf:
        return KernelBtf(self.btf_dir, self.notes, FunctionCache(self.cache_dir) if cache else None)

    def sources(self, **changes) -> Sources:
        kw = dict(symbols=KernelSymbols(self.kallsyms, self.blacklist), btf=self.btf(),
                  filter_functions=(self.filter_functions,), modules=ModuleTree(self.lib_modules),
                  sys_module=self.sys_module, kernel_config=(self.config,))
        kw.update(changes)
        return Sources(**kw)

    def catalog(self, **changes) -> Catalog:
        return Catalog(self.sources(**changes))
