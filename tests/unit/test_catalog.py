"""`ktui list`'s verdicts and globbing on a fake kernel (tests/fakesysfs.py)."""

from __future__ import annotations

import pytest

from ktui.btf.index import KernelBtf
from ktui.kernel.symbols.catalog import CatalogError
from ktui.kernel.symbols.ksyms import KernelSymbols
from tests.fakesysfs import FakeKernel


@pytest.fixture
def fk(tmp_path):
    return FakeKernel(tmp_path)


def by_name(entries):
    return {e.name: e for e in entries}


def test_every_verdict_for_its_function(fk):
    e = by_name(fk.catalog().list(["*"]))
    assert e["vfs_read"].verdict == "traceable"
    assert e["vfs_read"].prototype == ("vfs_read(struct file *file, char *buf, size_t count, "
                                       "loff_t *pos) -> ssize_t")
    assert e["notrace_fn"].verdict == "notrace" and e["notrace_fn"].note == ""
    assert e["do_int3"].verdict == "blacklisted"  # in available_filter_functions too: the blacklist wins
    assert (e["zstd_build"].verdict, e["zstd_build"].note) == (
        "copy-only", "no symbol of its own; probe a copy: zstd_build.isra.0")
    assert (e["inlined_fn"].verdict, e["inlined_fn"].note) == (
        "no-symbol", "inlined into its callers, or init code freed after loading")
    assert (e["mymod_open"].verdict, e["mymod_open"].module) == ("traceable", "mymod")
    assert e["mymod_open"].prototype == "mymod_open(struct file *file) -> int"
    assert (e["mymod_helper"].verdict, e["mymod_helper"].module) == ("notrace", "mymod")
    assert set(e) == {"vfs_read", "notrace_fn", "do_int3", "zstd_build", "zstd_build.isra.0",
                      "inlined_fn", "dup_fn", "cold_fn", "cold_fn.cold", "_printk",
                      "mymod_open", "mymod_helper"}  # no __pfx_, no data, no unloaded module


def test_a_copy_is_probe_able_with_the_originals_prototype_and_a_note(fk):
    e = by_name(fk.catalog().list(["zstd_build*", "cold_fn*"]))
    copy = e["zstd_build.isra.0"]
    assert (copy.verdict, copy.copy_of) == ("traceable", "zstd_build")
    assert copy.prototype == "zstd_build(int x) -> int"
    assert copy.note == "copy of zstd_build: BTF shows its arguments; positional fetches only"
    cold = e["cold_fn.cold"]
    assert (cold.verdict, cold.copy_of) == ("kprobe-only", "cold_fn")  # its original is traced
    assert cold.note == "cold part of cold_fn, not an entry: no arguments"
    assert e["cold_fn"].verdict == "traceable"


def test_names_several_symbols_share_are_said_to(fk):
    dup = by_name(fk.catalog().list(["dup_fn"]))["dup_fn"]
    assert (dup.verdict, dup.symbols, dup.prototype) == ("traceable", 2, "dup_fn(int x) -> int")
    assert dup.note == ("BTF has several different prototypes for this name: the first is shown; "
                        "2 symbols share this name")


def test_notrace_follows_the_kernel_config(fk):
    fk.config.write_text("CONFIG_KPROBES_ON_FTRACE=y\nCONFIG_KPROBE_EVENTS_ON_NOTRACE=y\n")
    e = by_name(fk.catalog().list(["notrace_fn"]))["notrace_fn"]
    assert (e.verdict, e.note) == ("kprobe-only", "")
    fk.config.write_text("# CONFIG_KPROBES_ON_FTRACE is not set\n")
    assert by_name(fk.catalog().list(["notrace_fn"]))["notrace_fn"].verdict == "kprobe-only"
    fk.config.unlink()
    cat = fk.catalog()
    e = by_name(cat.list(["notrace_fn"]))["notrace_fn"]
    assert (e.verdict, e.note) == (
        "notrace", "kprobe events refuse it unless the kernel has CONFIG_KPROBE_EVENTS_ON_NOTRACE=y")
    [line] = cat.not_checked()
    assert line == ("not checked: whether kprobe events refuse notrace functions (no kernel config "
                    f"in {fk.config}); said they do")


def test_a_gzipped_config_is_read(fk, tmp_path):
    import gzip

    gz = tmp_path / "config.gz"
    gz.write_bytes(gzip.compress(b"CONFIG_KPROBES_ON_FTRACE=y\nCONFIG_KPROBE_EVENTS_ON_NOTRACE=y\n"))
    cat = fk.catalog(kernel_config=(tmp_path / "missing", gz))
    assert cat.notrace_refused() is False


def test_globs_and_several_patterns(fk):
    names = [e.name for e in fk.catalog().list(["vfs_*", "*_fn", "mymod_?pen", "vfs_read"])]
    assert names == ["cold_fn", "dup_fn", "inlined_fn", "mymod_open", "notrace_fn", "vfs_read"]
    assert [e.name for e in fk.catalog().list(["[dn]*_fn"])] == ["dup_fn", "notrace_fn"]
    assert fk.catalog().list(["nothing*"]) == []


def test_a_loaded_module_by_pattern(fk):
    assert [e.name for e in fk.catalog().list(["mymod:*"])] == ["mymod_helper", "mymod_open"]
    assert [e.name for e in fk.catalog().list(["mymod:*open"])] == ["mymod_open"]
    vml = [e.name for e in fk.catalog().list(["vmlinux:*_fn"])]
    assert vml == ["cold_fn", "dup_fn", "inlined_fn", "notrace_fn"]


def test_a_module_that_is_not_loaded_is_read_from_its_file(fk):
    e = by_name(fk.catalog().list(["xfs:*"]))
    assert set(e) == {"xfs_file_read_iter", "xfs_helper.constprop.0"}  # functions only, no __pfx_
    read = e["xfs_file_read_iter"]
    assert (read.verdict, read.module, read.note) == ("not-loaded", "xfs", "module not loaded")
    assert read.prototype == "xfs_file_read_iter(struct kiocb *iocb) -> ssize_t"
    helper = e["xfs_helper.constprop.0"]
    assert helper.copy_of == "xfs_helper" and "positional fetches only" in helper.note


def test_a_compressed_module_file_is_read_too(fk):
    import lzma

    ko = fk.lib_modules / "kernel/fs/xfs/xfs.ko"
    ko.with_name("xfs.ko.xz").write_bytes(lzma.compress(ko.read_bytes(), format=lzma.FORMAT_XZ))
    ko.unlink()
    (fk.lib_modules / "modules.dep").write_text("kernel/fs/xfs/xfs.ko.xz:\n")
    assert "xfs_file_read_iter" in by_name(fk.catalog().list(["xfs:*"]))


def test_an_exact_name_in_an_unloaded_module_is_found_by_its_export(fk):
    [e] = fk.catalog().list(["tcp_vegas_init"])
    assert (e.verdict, e.module, e.prototype) == ("not-loaded", "tcp_vegas", "")
    assert fk.catalog().entry("tcp_vegas_init").verdict == "not-loaded"
    assert fk.catalog().entry("vfs_raed") is None


@pytest.mark.parametrize("pattern, message", [
    ("xsf:*", "no module named 'xsf' (did you mean xfs?): not loaded, and not in"),
    ("nosuchmod:*", "no module named 'nosuchmod': not loaded"),
])
def test_an_unknown_module_is_an_error_with_close_names(fk, pattern, message):
    with pytest.raises(CatalogError) as exc:
        fk.catalog().list([pattern])
    assert str(exc.value).startswith(message) and not exc.value.usage


@pytest.mark.parametrize("pattern, message", [
    ("", "an empty pattern matches nothing; use '*' for every function"),
    (":x", "':x': expected MODULE:PATTERN, e.g. xfs:xfs_file_*"),
    ("xfs:", "'xfs:': expected MODULE:PATTERN, e.g. xfs:xfs_file_*"),
])
def test_malformed_patterns(fk, pattern, message):
    with pytest.raises(CatalogError) as exc:
        fk.catalog().list([pattern])
    assert str(exc.value) == message and exc.value.usage


def test_an_unreadable_module_file_is_an_error(fk):
    (fk.lib_modules / "kernel/fs/xfs/xfs.ko").write_bytes(b"not elf")
    with pytest.raises(CatalogError, match=r"xfs.ko: not an ELF file"):
        fk.catalog().list(["xfs:*"])


def test_everything_readable_leaves_nothing_unchecked(fk):
    assert fk.catalog().not_checked() == []


def test_without_root_the_unreadable_files_are_named_and_verdicts_say_unchecked(fk):
    fk.filter_functions.unlink()
    fk.blacklist.unlink()
    cat = fk.catalog()
    e = by_name(cat.list(["*"]))
    assert e["vfs_read"].verdict == "unchecked"
    assert e["do_int3"].verdict == "unchecked"  # no blacklist to say otherwise
    assert e["zstd_build"].verdict == "copy-only"  # known from kallsyms alone
    lines = cat.not_checked()
    assert lines[0] == ("not checked: which functions fentry can attach to (available_filter_functions "
                        "not found: is tracefs mounted?); verdicts say unchecked, not traceable or kprobe-only")
    assert lines[1].startswith("not checked: the kprobe blacklist (")
    assert len(lines) == 2


def test_without_btf_one_line_says_so_and_kallsyms_still_lists(fk):
    (fk.btf_dir / "vmlinux").unlink()
    cat = fk.catalog()
    e = by_name(cat.list(["*"]))
    assert e["vfs_read"].verdict == "traceable" and e["vfs_read"].prototype == ""
    assert "inlined_fn" not in e  # only BTF knew it
    [line] = cat.not_checked()
    assert line.startswith("no BTF: ") and "CONFIG_DEBUG_INFO_BTF" in line
    assert "positional fetches (a1..a6) still work" in line


def test_corrupt_vmlinux_btf_is_one_line_and_kallsyms_still_lists(fk):
    (fk.btf_dir / "vmlinux").write_bytes(b"\x9f\xeb\x01\x00" + b"\0" * 40)
    cat = fk.catalog()
    assert by_name(cat.list(["vfs_read"]))["vfs_read"].verdict == "traceable"
    [line] = cat.not_checked()
    assert line.startswith("no BTF: ") and "sys/kernel/btf/vmlinux" in line


def test_corrupt_module_btf_leaves_that_module_out_with_a_line(fk):
    (fk.btf_dir / "mymod").write_bytes(b"garbage that is long enough to have a header..")
    cat = fk.catalog()
    e = by_name(cat.list(["mymod_*"]))
    assert e["mymod_open"].prototype == "" and e["mymod_open"].verdict == "traceable"
    [line] = cat.not_checked()
    assert line.startswith("module BTF left out: ") and "mymod: not BTF" in line


def test_without_kallsyms_btf_alone_lists_names(fk):
    fk.kallsyms.unlink()
    cat = fk.catalog()
    e = by_name(cat.list(["vfs_read"]))
    assert e["vfs_read"].verdict == "no-symbol"
    assert cat.not_checked()[0].startswith("not checked: which functions have a symbol (kallsyms: ")


def test_the_function_table_comes_from_the_cache_the_second_time(fk):
    first = fk.btf(cache=True).table()
    assert first.prototype("vfs_read").startswith("vfs_read(")
    assert first.ambiguous == {"dup_fn"} and first.module("mymod_open") == "mymod"
    # Same build id and size, different bytes: only the cache can still answer.
    path = fk.btf_dir / "vmlinux"
    path.write_bytes(b"\0" * path.stat().st_size)
    again = fk.btf(cache=True).table()
    assert (again.vmlinux, again.modules, again.ambiguous) == (first.vmlinux, first.modules,
                                                               first.ambiguous)
    # Another build id: a miss, and the garbage is read (and refused).
    fk.notes.write_bytes(fk.notes.read_bytes()[:-1] + b"\xff")
    with pytest.raises(Exception, match="not BTF"):
        fk.btf(cache=True).table()


def test_a_kernel_without_a_build_id_is_not_cached(fk):
    fk.notes.write_bytes(b"")
    fk.btf(cache=True).table()
    assert not fk.cache_dir.exists()


def test_the_modules_table_is_cached_until_a_module_changes(fk):
    fk.btf(cache=True).table()
    names = sorted(p.name.split("-")[1] for p in fk.cache_dir.iterdir())
    assert names == ["modules", "vmlinux"]
    mod = fk.btf_dir / "mymod"
    mod.write_bytes(mod.read_bytes().replace(b"mymod_helper", b"mymod_helpex"))  # another key
    table = fk.btf(cache=True).table()
    assert table.module("mymod_helpex") == "mymod" and "mymod_helper" not in table
    assert len(list(fk.cache_dir.iterdir())) == 3


def test_btf_problems_in_one_line(fk, monkeypatch):
    btf = KernelBtf(fk.btf_dir, fk.notes)
    assert btf.problem() is None
    import ktui.btf.index as index

    monkeypatch.setattr(index.os, "access", lambda p, m: False)
    assert btf.problem() == f"no BTF: {fk.btf_dir / 'vmlinux'} is not readable by this user"


def test_function_lookup_by_name_for_fetches(fk):
    btf = fk.btf()
    blob, fid = btf.function("vfs_read")
    assert blob.name_of(fid) == "vfs_read"
    mod_blob, mid = btf.function("mymod_open", module="mymod")
    assert mod_blob.name_of(mid) == "mymod_open"
    assert btf.function("nope") is None
    slot = btf.access().param(blob.head(fid)[3], "count")
    assert slot.registers == (3,)


def test_kallsyms_modules_copies_and_shared_names(fk):
    ks = KernelSymbols(fk.kallsyms, fk.blacklist)
    assert ks.module("mymod_open") == "mymod" and ks.module("vfs_read") == ""
    assert ks.module("some_data") is None and ks.module("__pfx_vfs_read") is None
    assert ks.count("dup_fn") == 2 and ks.count("vfs_read") == 1 and ks.count("zz") == 0
    assert ks.shared() == {"dup_fn": 2}
    assert ks.blacklisted("do_int3") and not ks.blacklisted("vfs_read")
    assert ks.close_names("zstd_biuld") == ["zstd_build"]  # the copy offered as its original
    assert ks.address("mymod_open") == 0xffffffffc0000000
