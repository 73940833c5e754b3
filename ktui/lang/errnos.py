"""Whether a return probe counts errnos, and what the user is told about it.

A return value in [-4095, -1] is an errno only where the function returns
one: a signed integer (`int`, `long`, `ssize_t`) or a pointer (ERR_PTR).
A `void` function leaves whatever was in rax; a comparator or a size
returns -1 or a large unsigned value that is no error at all. So the
kernel's BTF decides (`return_class`, bound with the probe by
`lang.bind`), and a probe set can say `errno: on` or `errno: off`.

`errno_mode` gives the kernel program its mode (0: no errnos; 4: the low
32 bits, sign-extended, are the errno; 8: the whole 64-bit value) and the
words the dashboard, NDJSON and recordings show (ProbeStats.errno_check).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from ktui.lang.model import Kind

if TYPE_CHECKING:
    from ktui.btf.access import Leaf

# A return type by what errno counting makes of it. Those that carry an
# errno give their width; the others are said after "off: ".
COUNTED = {"int": 4, "long": 8, "pointer": 8}
NOT_COUNTED = ("void", "unsigned", "bool", "enum", "not an integer")

OFF_BY_SET = "off: by the probe set"
OFF_NO_BTF = "off: no BTF"
OFF_USER = "off: a user function"  # it returns no kernel errno (lang.user_probes)
GUESSED = "guessed"  # `errno: on` without BTF: an int-sized errno, as ktui did before


class ErrnoMode(NamedTuple):
    mode: int  # 0, 4 or 8 (bytes of the return value an errno is read from)
    text: str  # ProbeStats.errno_check: "" for a call probe


def return_class(leaf: Leaf) -> tuple[int, str]:
    """(errno width, class) of a function that returns `leaf`."""
    if leaf.kind == "pointer":
        return 8, "pointer"
    if leaf.kind == "int" and leaf.signed:
        if leaf.size == 4:
            return 4, "int"
        if leaf.size == 8:
            return 8, "long"
        return 0, f"{leaf.size * 8}-bit int"  # s8, short, __int128: no errno fits as the kernel returns one
    if leaf.kind == "int":
        return 0, "unsigned"
    if leaf.kind in ("void", "bool", "enum"):
        return 0, leaf.kind
    return 0, "not an integer"


def errno_mode(errno: str, errno_width: int | None, kind: Kind, returns: str = "") -> ErrnoMode:
    """How a probe counts errnos. `errno`: Probe.errno ("", "on", "off");
    `errno_width`: bound from BTF (None: not known); `returns`: the
    return_class bound with it (for the words only)."""
    if kind is not Kind.RETURN:
        return ErrnoMode(0, "")
    if errno == "off":
        return ErrnoMode(0, OFF_BY_SET)
    if errno_width is None:
        # no BTF to ask: asked for, the int-sized guess; else nothing claimed
        return ErrnoMode(4, GUESSED) if errno == "on" else ErrnoMode(0, OFF_NO_BTF)
    if errno_width:
        return ErrnoMode(errno_width, returns or ("int" if errno_width == 4 else "long"))
    # BTF says no errno can come back: "on" cannot make one (see the docs note)
    return ErrnoMode(0, f"off: {returns or 'not an integer'}")


def returns_words(returns: str) -> str:
    """A return_class in a sentence: `vfs_foo returns {words}`."""
    words = {"unsigned": "an unsigned integer", "enum": "an enum", "not an integer": "no integer",
             "int": "an int", "long": "a long", "pointer": "a pointer"}
    if returns.endswith("-bit int"):
        return ("an " if returns.startswith("8-") else "a ") + returns
    return words.get(returns, returns)


def probe_errno_mode(probe) -> ErrnoMode:
    """`errno_mode` of a bound Probe."""
    target = getattr(probe, "target", None)  # the engines pass what has the errno fields
    if probe.kind is Kind.RETURN and target is not None and target.is_user:
        return ErrnoMode(0, OFF_USER)
    return errno_mode(probe.errno, probe.errno_width, probe.kind, probe.return_class)
