from ktui.kernel.symbols.ksyms import KernelSymbols


def symbols(tmp_path, names):
    lines = [f"{0xffffffff81000000 + i * 0x100:016x} T {n}" for i, n in enumerate(names)]
    path = tmp_path / "kallsyms"
    path.write_text("\n".join(lines) + "\n")
    return KernelSymbols(kallsyms=path, blacklist=tmp_path / "none")


def test_typos_and_renamed_functions_get_suggestions(tmp_path):
    ks = symbols(tmp_path, ["vfs_read", "vfs_readv", "kmalloc_trace_noprof", "kfree"])
    assert ks.close_names("vfs_raed")[0] == "vfs_read"
    assert ks.close_names("kmalloc_trace") == ["kmalloc_trace_noprof"]
    assert ks.close_names("zzzz_nothing") == []


def test_resolve_and_symbolize(tmp_path):
    ks = symbols(tmp_path, ["a_func", "b_func"])
    assert ks.exists("b_func") and not ks.exists("c_func")
    assert ks.resolve(0xffffffff81000105) == ("b_func", 5)
    assert ks.symbolize(0xffffffff81000100) == "b_func"
    assert ks.symbolize(0x10) == "0x10"
