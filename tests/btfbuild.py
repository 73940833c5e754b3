"""Build small BTF blobs (and module files carrying them) for tests.

Written from the format's description (include/uapi/linux/btf.h), not from
ktui's decoder, so a decoder bug is not mirrored here. Ids are handed out
in the order types are added, after the base's when building split BTF.
"""

from __future__ import annotations

import struct

KIND = {"INT": 1, "PTR": 2, "ARRAY": 3, "STRUCT": 4, "UNION": 5, "ENUM": 6, "FWD": 7,
        "TYPEDEF": 8, "VOLATILE": 9, "CONST": 10, "RESTRICT": 11, "FUNC": 12, "FUNC_PROTO": 13,
        "VAR": 14, "DATASEC": 15, "FLOAT": 16, "DECL_TAG": 17, "TYPE_TAG": 18, "ENUM64": 19}


def info(kind: str | int, vlen: int = 0, kflag: int = 0) -> int:
    k = KIND[kind] if isinstance(kind, str) else kind
    return (kflag << 31) | (k << 24) | vlen


class BtfBuilder:
    def __init__(self, base: "BtfBuilder | None" = None) -> None:
        self.base = base
        self.strings = bytearray(b"" if base else b"\0")
        self._offsets: dict[str, int] = {}
        self.records: list[bytes] = []
        self.first_id = base.next_id if base else 1

    @property
    def next_id(self) -> int:
        return self.first_id + len(self.records)

    @property
    def str_len_total(self) -> int:
        return (self.base.str_len_total if self.base else 0) + len(self.strings)

    def s(self, text: str) -> int:
        if text == "":
            return 0
        if self.base is not None and text in self.base._offsets:
            return self.base._offsets[text]
        if text not in self._offsets:
            self._offsets[text] = (self.base.str_len_total if self.base else 0) + len(self.strings)
            self.strings += text.encode() + b"\0"
        return self._offsets[text]

    def raw(self, name_off: int, info_word: int, size_or_type: int, extra: bytes = b"") -> int:
        self.records.append(struct.pack("<III", name_off, info_word, size_or_type) + extra)
        return self.next_id - 1

    # ------------------------------------------------------------ kinds
    def int(self, name: str, size: int, *, signed: bool = False, char: bool = False,
            bool_: bool = False, bits: int | None = None, offset: int = 0) -> int:
        enc = (1 if signed else 0) | (2 if char else 0) | (4 if bool_ else 0)
        word = (enc << 24) | (offset << 16) | (bits if bits is not None else size * 8)
        return self.raw(self.s(name), info("INT"), size, struct.pack("<I", word))

    def float(self, name: str, size: int) -> int:
        return self.raw(self.s(name), info("FLOAT"), size)

    def ptr(self, target: int) -> int:
        return self.raw(0, info("PTR"), target)

    def array(self, elem: int, nelems: int, index: int) -> int:
        return self.raw(0, info("ARRAY"), 0, struct.pack("<III", elem, index, nelems))

    def struct(self, name: str, size: int, members, *, union: bool = False) -> int:
        """members: (name, type, bit_offset[, bitfield_size])."""
        kflag = int(any(len(m) > 3 and m[3] for m in members))
        body = b""
        for m in members:
            name_m, tid, bit_off = m[:3]
            bits = m[3] if len(m) > 3 else 0
            off = (bits << 24 | bit_off) if kflag else bit_off
            body += struct.pack("<III", self.s(name_m), tid, off)
        return self.raw(self.s(name), info("UNION" if union else "STRUCT", len(members), kflag), size, body)

    def enum(self, name: str, values, *, size: int = 4, signed: bool = False) -> int:
        body = b"".join(struct.pack("<Ii" if signed else "<II", self.s(n), v) for n, v in values)
        return self.raw(self.s(name), info("ENUM", len(values), int(signed)), size, body)

    def enum64(self, name: str, values, *, signed: bool = False) -> int:
        body = b""
        for n, v in values:
            v &= (1 << 64) - 1
            body += struct.pack("<III", self.s(n), v & 0xFFFFFFFF, v >> 32)
        return self.raw(self.s(name), info("ENUM64", len(values), int(signed)), 8, body)

    def fwd(self, name: str, *, union: bool = False) -> int:
        return self.raw(self.s(name), info("FWD", 0, int(union)), 0)

    def typedef(self, name: str, target: int) -> int:
        return self.raw(self.s(name), info("TYPEDEF"), target)

    def const(self, target: int) -> int:
        return self.raw(0, info("CONST"), target)

    def volatile(self, target: int) -> int:
        return self.raw(0, info("VOLATILE"), target)

    def restrict(self, target: int) -> int:
        return self.raw(0, info("RESTRICT"), target)

    def type_tag(self, tag: str, target: int) -> int:
        return self.raw(self.s(tag), info("TYPE_TAG"), target)

    def func_proto(self, ret: int, params, *, variadic: bool = False) -> int:
        items = list(params) + ([("", 0)] if variadic else [])
        body = b"".join(struct.pack("<II", self.s(n), t) for n, t in items)
        return self.raw(0, info("FUNC_PROTO", len(items)), ret, body)

    def func(self, name: str, proto: int, linkage: int = 1) -> int:
        return self.raw(self.s(name), info("FUNC", linkage), proto)

    def var(self, name: str, target: int, linkage: int = 1) -> int:
        return self.raw(self.s(name), info("VAR"), target, struct.pack("<I", linkage))

    def datasec(self, name: str, size: int, entries) -> int:
        body = b"".join(struct.pack("<III", *e) for e in entries)
        return self.raw(self.s(name), info("DATASEC", len(entries)), size, body)

    def decl_tag(self, name: str, target: int, component: int = -1) -> int:
        return self.raw(self.s(name), info("DECL_TAG"), target, struct.pack("<i", component))

    # ------------------------------------------------------------ the blob
    def blob(self, *, magic: int = 0xEB9F, version: int = 1) -> bytes:
        types = b"".join(self.records)
        header = struct.pack("<HBBIIIII", magic, version, 0, 24, 0, len(types), len(types),
                             len(self.strings))
        return header + types + bytes(self.strings)


def vfs_like(b: BtfBuilder) -> dict[str, int]:
    """A little kernel: vfs_read and the types around it, with the shapes
    the tests need (typedefs, a char array, an anonymous union, a bitfield)."""
    t = {}
    t["char"] = b.int("char", 1, signed=True, char=True)
    t["int"] = b.int("int", 4, signed=True)
    t["uint"] = b.int("unsigned int", 4)
    t["ulong"] = b.int("long unsigned int", 8)
    t["long"] = b.int("long int", 8, signed=True)
    t["llong"] = b.int("long long int", 8, signed=True)
    t["uchar"] = b.int("unsigned char", 1)
    t["size_t"] = b.typedef("size_t", t["ulong"])
    t["ssize_t"] = b.typedef("ssize_t", t["long"])
    t["loff_t"] = b.typedef("loff_t", t["llong"])
    t["qstr"] = b.struct("qstr", 16, [("hash_len", t["ulong"], 0),
                                      ("name", b.ptr(b.const(t["uchar"])), 64)])
    t["dentry"] = b.struct("dentry", 48, [("d_flags", t["uint"], 0),
                                          ("d_name", t["qstr"], 64),
                                          ("d_iname", b.array(t["uchar"], 16, t["int"]), 192)])
    t["path"] = b.struct("path", 16, [("mnt", b.ptr(b.fwd("vfsmount")), 0),
                                      ("dentry", b.ptr(t["dentry"]), 64)])
    anon = b.struct("", 8, [("f_count", t["long"], 0), ("f_rcuhead", t["ulong"], 0)], union=True)
    t["file"] = b.struct("file", 64, [
        ("", anon, 0),
        ("f_path", t["path"], 64),
        ("f_mode", t["uint"], 192, 3),
        ("f_flags", t["uint"], 195, 29),
        ("f_pos", t["loff_t"], 256),
        ("f_op", b.ptr(b.const(b.fwd("file_operations"))), 320),
    ])
    t["file_ptr"] = b.ptr(t["file"])
    t["buf"] = b.ptr(t["char"])
    t["vfs_read_proto"] = b.func_proto(t["ssize_t"], [("file", t["file_ptr"]), ("buf", t["buf"]),
                                                      ("count", t["size_t"]),
                                                      ("pos", b.ptr(t["loff_t"]))])
    t["vfs_read"] = b.func("vfs_read", t["vfs_read_proto"])
    return t


def elf_module(functions: list[str], btf: bytes | None = None, data: list[str] = ()) -> bytes:
    """A minimal ELF64 relocatable object, as a kernel module file is: a
    symbol table with `functions` (STT_FUNC, defined), `data` (STT_OBJECT),
    one undefined function, and a .BTF section when given."""
    shstr = bytearray(b"\0")
    names: dict[str, int] = {}

    def sname(n: str) -> int:
        if n not in names:
            names[n] = len(shstr)
            shstr.extend(n.encode() + b"\0")
        return names[n]

    strtab = bytearray(b"\0")
    syms = [struct.pack("<IBBHQQ", 0, 0, 0, 0, 0, 0)]

    def sym(n: str, kind: int, shndx: int) -> None:
        syms.append(struct.pack("<IBBHQQ", len(strtab), (1 << 4) | kind, 0, shndx, 0, 16))
        strtab.extend(n.encode() + b"\0")

    for f in functions:
        sym(f, 2, 1)
    for d in data:
        sym(d, 1, 1)
    sym("printk", 2, 0)  # undefined: must not be listed
    sections = [(".text", 1, b"\xc3" * 16, 0, 0)]  # (name, type, body, link, entsize)
    sections.append((".strtab", 3, bytes(strtab), 0, 0))
    sections.append((".symtab", 2, b"".join(syms), 2, 24))  # link: .strtab is section 2
    if btf is not None:
        sections.append((".BTF", 1, btf, 0, 0))
    sections.append((".shstrtab", 3, b"", 0, 0))
    for s in sections:
        sname(s[0])
    sections[-1] = (".shstrtab", 3, bytes(shstr), 0, 0)
    body = bytearray(b"\0" * 64)
    headers = [struct.pack("<IIQQQQIIQQ", 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)]
    for name, kind, content, link, entsize in sections:
        off = len(body)
        body.extend(content + b"\0" * (-len(content) % 8))
        headers.append(struct.pack("<IIQQQQIIQQ", names[name], kind, 0, 0, off, len(content), link, 0, 8, entsize))
    shoff = len(body)
    body.extend(b"".join(headers))
    ident = b"\x7fELF" + bytes([2, 1, 1, 0]) + b"\0" * 8
    header = struct.pack("<16sHHIQQQIHHHHHH", ident, 1, 62, 1, 0, 0, shoff, 0, 64, 0, 0, 64,
                         len(headers), len(headers) - 1)
    body[:64] = header
    return bytes(body)
