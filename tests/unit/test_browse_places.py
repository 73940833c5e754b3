"""What the browser lists beside the kernel's functions (browse_places):
where a query looks, tracepoints of the fixture tracefs (tests/unit/tracefs.py)
with their fields as `ktui list` types them, a gcc-built file's functions
and USDT probe points (tests/sdtprog.py), and a path completed from its
folder."""

from __future__ import annotations

import os

import pytest

from ktui.kernel.symbols.tracepoint_list import TracepointLister, event_line
from ktui.screens.browse_model import spec_text
from ktui.screens.browse_places import Places, Query, completed, parse_query
from ktui.screens.probe_dialog import build_probe
from tests.sdtprog import build_shop
from tests.unit.tracefs import tracefs


@pytest.fixture(scope="module")
def shop(tmp_path_factory):
    return str(build_shop(tmp_path_factory.mktemp("shop")))


@pytest.fixture
def places():
    return Places(tracefs("6.12"))


@pytest.mark.parametrize("text, query", [
    ("vfs_read", Query("function", "", "vfs_read")),
    ("sched/", Query("tracepoint", "", "sched/")),
    ("  syscalls/*openat ", Query("tracepoint", "", "syscalls/*openat")),
    ("/usr/bin/bash:read*", Query("binary", "/usr/bin/bash", "read*")),
    ("/usr/bin/bash", Query("binary", "/usr/bin/bash", "")),
    ("usdt /usr/bin/python3:gc", Query("usdt", "/usr/bin/python3", "gc")),
    ("usdt", Query("usdt", "", "")),
])
def test_where_a_query_looks(text, query):
    assert parse_query(text) == query


def test_tracepoints_by_fuzzy_name_and_by_glob(places):
    found = places.search(parse_query("sched/"))  # a whole category: in name order
    assert [r.id for r in found.rows] == ["sched/sched_process_exec", "sched/sched_switch", "sched/sched_wakeup"]
    assert found.of == 18 and not found.problem
    assert places.search(parse_query("sched/sw")).rows[0].id == "sched/sched_switch"  # letters in order
    globbed = places.search(parse_query("syscalls/sys_enter_*"))
    assert [r.id for r in globbed.rows] == ["syscalls/sys_enter_openat", "syscalls/sys_enter_read"]
    assert globbed.total == 2


def test_a_tracepoints_fields_read_as_ktui_list_types_them(places):
    """Each field's row is the one `ktui list` prints for it, so the type
    shown is the type the probe reads."""
    for name in ("sched/sched_switch", "syscalls/sys_enter_openat", "sched/sched_process_exec"):
        d = places.detail(parse_query(name), name)
        (listed,), _ = TracepointLister(tracefs("6.12")).list([name])
        assert d.kinds == ("t",) and d.target == name
        assert f"{name}  " + " ".join(c.shown for c in d.params) == event_line(listed)
    openat = places.detail(parse_query("syscalls/"), "syscalls/sys_enter_openat")
    fields = {c.ref: c for c in openat.params}
    assert fields["filename"].shown == "filename:x64(const char *)" and fields["filename"].text
    assert not fields["dfd"].text
    exec_ = places.detail(parse_query("sched/"), "sched/sched_process_exec")
    assert [c.ref for c in exec_.params] == ["filename", "args.pid", "old_pid"]  # pid is the builtin
    spec = spec_text(exec_.target, "t", [("args.pid", ""), ("filename", "")])
    assert build_probe(spec, "", "").spec_text == "sched/sched_process_exec:t:args.pid,filename"


def test_an_unreadable_field_says_why(places):
    d = places.detail(parse_query("tcp/"), "tcp/tcp_probe")
    saddr = next(c for c in d.params if c.ref == "saddr")
    assert not saddr.tickable and "cannot read" in saddr.why_not


def test_no_tracefs_is_one_line(tmp_path):
    found = Places(tmp_path / "nothing").search(parse_query("sched/"))
    assert found.rows == () and found.problem


def test_a_files_functions_with_positional_arguments(places, shop):
    found = places.search(parse_query(f"{shop}:shop_a"))
    assert found.rows[0].id == "shop_add" and found.what == f"functions of {shop}"
    d = places.detail(parse_query(f"{shop}:shop_a"), "shop_add")
    assert d.target == f"{shop}:shop_add" and d.kinds == ("c", "r")
    assert [c.ref for c in d.params] == ["a1", "a2", "a3", "a4", "a5", "a6"]
    assert d.retval is not None and d.retval.ref == "retval"
    spec = spec_text(d.target, "r", [("retval", ""), ("a1", "")])
    assert build_probe(spec, "", "").spec_text == f"{shop}:shop_add:r:retval,a1"
    globbed = places.search(parse_query(f"{shop}:shop_*"))
    assert [r.id for r in globbed.rows] == ["shop_add", "shop_list"]


def test_an_import_is_listed_but_cannot_be_added(places, shop):
    row = next(r for r in places.search(parse_query(f"{shop}:puts")).rows if r.id == "puts")
    assert row.tag == "import" and row.tone == "bad"
    d = places.detail(parse_query(f"{shop}:puts"), "puts")
    assert d.kinds == () and "probe it there" in d.verdict_line


def test_a_files_usdt_probes_with_their_argument_count(places, shop):
    query = parse_query(f"usdt {shop}")
    found = places.search(query)
    assert [r.id for r in found.rows] == ["shop:added", "shop:listed", "shop:start"]
    assert [r.tag for r in found.rows] == ["2 args", "1 arg", "0 args"]
    d = places.detail(query, "shop:added")
    assert d.target == f"{shop}:shop:added" and d.kinds == ("usdt",)
    assert [c.ref for c in d.params] == ["a1", "a2"] and all(c.tickable for c in d.params)
    assert d.params[0].shown.startswith("s64 (")  # a long, where its note places it
    spec = spec_text(d.target, "usdt", [("a2", "")])
    assert build_probe(spec, "", "").spec_text == f"{shop}:shop:added:usdt:a2"


def test_a_file_without_usdt_probes_or_not_there_says_so(places, tmp_path):
    plain = tmp_path / "plain"
    plain.write_bytes(open("/usr/bin/true", "rb").read())
    assert "has no USDT probes" in places.search(parse_query(f"usdt {plain}")).problem
    notelf = tmp_path / "notes.txt"
    notelf.write_text("hello")
    assert "not an ELF file" in places.search(parse_query(f"{notelf}:x")).problem


def test_a_file_rebuilt_is_read_again(places, tmp_path):
    prog = build_shop(tmp_path)
    assert places.search(parse_query(f"{prog}:shop_add")).rows[0].id == "shop_add"
    prog.write_bytes(open("/usr/bin/true", "rb").read())
    os.utime(prog, ns=(1, 1))
    assert not any(r.id == "shop_add" for r in places.search(parse_query(f"{prog}:shop_add")).rows)


def test_a_path_being_typed_is_completed_from_its_folder(places, shop):
    folder, name = os.path.split(shop)
    found = places.search(parse_query(os.path.join(folder, name[:2])))
    assert found.paths and [r.id for r in found.rows] == [shop, f"{shop}.c"]
    query = parse_query(os.path.join(folder, "sh"))
    assert completed(query, shop) == f"{shop}:"
    assert completed(parse_query(f"usdt {folder}/s"), shop) == f"usdt {shop}"
    assert completed(query, folder) == f"{folder}/"
    assert places.detail(query, shop).kinds == ()
    assert "nothing in" in places.search(parse_query(f"{folder}/zz")).problem
