"""A little kernel's BTF in a fake /sys/kernel/btf, for binding names in
probes (`lang.bind`) on the host without the machine's own BTF.

vmlinux carries `tests.btfbuild.vfs_like` (vfs_read and struct file,
path, dentry, qstr: typedefs, a char array, an anonymous union, bitfields)
and the shapes every refusal needs; a loaded module `mymod` carries one
function of its own in split BTF on top of it:

    vfs_read(struct file *file, char *buf, size_t count, loff_t *pos) -> ssize_t
    do_open(int dfd, const char *filename, int flags, enum open_how how,
            _Bool excl, pid_t pid) -> long int     flags/pid: predefined words
    pass_pair(struct pair p, int after) -> int     p: two registers, after: a3
    many(long int one, ..., long int seven) -> int seven: on the stack
    take_stats(struct stats *st) -> int            an int array (counts, at 0), a bitfield
                                                   (mode, at 16), an unsigned int (total, at 20)
    dup_fn(int x) / dup_fn(long int y)             two different prototypes
    mymod_open(struct file *file, int mode) -> int in module mymod
    vfs_write, do_sys_openat2(int dfd, const char *filename, struct open_how *how)
                                                   what probesets/vfs.yaml names
    kmem_cache_alloc(struct kmem_cache *s, gfp_t gfpflags) -> void *
                                                   what probesets/memory.yaml names (name at 8);
                                                   kmem_cache_alloc_noprof with slab_alloc=

Offsets in struct file (from vfs_like): the anonymous union (f_count) at 0,
f_path at 8 (its dentry at 8 within), the f_mode bitfield at 24, f_pos at
32; in struct dentry d_flags at 0, d_name at 8 (its name at 8 within),
d_iname (unsigned char [16]) at 24.
"""

from __future__ import annotations

from pathlib import Path

from ktui.btf.index import KernelBtf
from ktui.lang.kernel_names import KernelNames
from tests.btfbuild import BtfBuilder, vfs_like

VFS_READ = "vfs_read(struct file *file, char *buf, size_t count, loff_t *pos) -> ssize_t"


def write_btf(root: Path, slab_alloc: str = "kmem_cache_alloc") -> Path:
    """Write vmlinux's and mymod's BTF under `root`; the btf directory.
    `slab_alloc`: what kmem_cache_alloc is called (6.12: kmem_cache_alloc_noprof)."""
    btf_dir = root / "sys/kernel/btf"
    btf_dir.mkdir(parents=True, exist_ok=True)
    b = BtfBuilder()
    t = vfs_like(b)
    i, long_ = t["int"], t["long"]
    bool_ = b.int("_Bool", 1, bool_=True)
    pid_t = b.typedef("pid_t", i)
    how = b.enum("open_how", [("OPEN_READ", 0), ("OPEN_WRITE", 1)])
    cchar = b.ptr(b.const(t["char"]))
    b.func("do_open", b.func_proto(long_, [("dfd", i), ("filename", cchar), ("flags", i),
                                           ("how", how), ("excl", bool_), ("pid", pid_t)]))
    pair = b.struct("pair", 16, [("a", long_, 0), ("b", long_, 64)])
    b.func("pass_pair", b.func_proto(i, [("p", pair), ("after", i)]))
    words = ("one", "two", "three", "four", "five", "six", "seven")
    b.func("many", b.func_proto(i, [(w, long_) for w in words]))
    ushort = b.int("short unsigned int", 2)
    stats = b.struct("stats", 24, [("counts", b.array(i, 4, i), 0), ("mode", ushort, 128, 4),
                                   ("total", t["uint"], 160)])
    b.func("take_stats", b.func_proto(i, [("st", b.ptr(stats))]))
    # What the shipped probe sets name (probesets/vfs.yaml), so their
    # programs can be generated (and compared with golden files) on any host.
    b.func("vfs_write", t["vfs_read_proto"])
    u64 = b.int("long long unsigned int", 8)
    open_how = b.struct("open_how", 24, [("flags", u64, 0), ("mode", u64, 64), ("resolve", u64, 128)])
    b.func("do_sys_openat2", b.func_proto(long_, [("dfd", i), ("filename", cchar),
                                                  ("how", b.ptr(open_how))]))
    # probesets/memory.yaml's cache_by_name: 6.1's spelling (kmem_cache_alloc_noprof from 6.10)
    kmem_cache = b.struct("kmem_cache", 16, [("flags", t["uint"], 0), ("name", cchar, 64)])
    gfp_t = b.typedef("gfp_t", t["uint"])
    b.func(slab_alloc, b.func_proto(b.ptr(0), [("s", b.ptr(kmem_cache)), ("gfpflags", gfp_t)]))
    b.func("dup_fn", b.func_proto(i, [("x", i)]))
    b.func("dup_fn", b.func_proto(i, [("y", long_)]))
    (btf_dir / "vmlinux").write_bytes(b.blob())
    mod = BtfBuilder(base=b)
    mod.func("mymod_open", mod.func_proto(i, [("file", t["file_ptr"]), ("mode", i)]))
    (btf_dir / "mymod").write_bytes(mod.blob())
    return btf_dir


# tracefs as Debian's 6.1 has it, for the events the tests and shipped sets name
TRACEFS_6_1 = Path(__file__).parent / "data" / "tracepoints" / "6.1"


def kernel_names(root: Path, slab_alloc: str = "kmem_cache_alloc") -> KernelNames:
    """`bind.Kernel` over the BTF written under `root`, with 6.1's
    tracepoint formats (tests/unit/data/tracepoints)."""
    btf_dir = write_btf(root, slab_alloc)
    return KernelNames(KernelBtf(btf_dir=btf_dir, notes=root / "sys/kernel/notes"), tracefs=str(TRACEFS_6_1))


def no_btf(root: Path) -> KernelNames:
    """A kernel built without BTF: /sys/kernel/btf has no vmlinux."""
    btf_dir = root / "nobtf/sys/kernel/btf"
    btf_dir.mkdir(parents=True, exist_ok=True)
    return KernelNames(KernelBtf(btf_dir=btf_dir, notes=root / "nobtf/notes"))
