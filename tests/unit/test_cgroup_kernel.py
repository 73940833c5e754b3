"""`cgroup` on the kernel side, on the host: the id -> path resolver over a
tree of real directories (their inodes), the plan's fetch, count key and
filter (a path resolved to its directory's inode, compared as an
integer), count keys named by path, and the compiled engine refusing it."""

from __future__ import annotations

import os

import pytest

from ktui.kernel.attach.cgroup_scope import CgroupError, cgroup2_root, cgroup_id
from ktui.kernel.codegen.program import never_compiled
from ktui.kernel.generic import abi
from ktui.kernel.generic.aggregates import key_values
from ktui.kernel.generic.plan import build_plan
from ktui.kernel.session.edits import _check_cgroup_paths, generic_only
from ktui.kernel.symbols.cgroup_names import CgroupNames, walk
from ktui.lang.spec import parse_probe_text


def tree(tmp_path, *dirs):
    for d in dirs:
        (tmp_path / d).mkdir(parents=True)
    return {d: os.stat(tmp_path / d).st_ino for d in dirs}


def test_the_walk_names_every_directory_by_its_inode(tmp_path):
    inodes = tree(tmp_path, "system.slice/nginx.service", "user.slice")
    inodes["system.slice"] = os.stat(tmp_path / "system.slice").st_ino
    (tmp_path / "system.slice" / "cgroup.procs").write_text("")  # a file: no cgroup
    os.symlink(tmp_path, tmp_path / "user.slice" / "loop")  # not followed
    found = walk(str(tmp_path))
    assert found == {os.stat(tmp_path).st_ino: "/", inodes["system.slice"]: "system.slice",
                     inodes["system.slice/nginx.service"]: "system.slice/nginx.service",
                     inodes["user.slice"]: "user.slice"}
    assert walk(str(tmp_path / "absent")) == {}


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def test_an_unknown_id_walks_again_at_most_once_a_second_and_is_never_misnamed(tmp_path):
    first = tree(tmp_path, "a")
    clock = Clock()
    names = CgroupNames(str(tmp_path), clock=clock)
    assert names(first["a"]) == "a" and names.walks == 1
    assert names(first["a"]) == "a" and names.walks == 1  # known: no walk
    later = tree(tmp_path, "b/c")
    clock.now += 0.5
    assert names(later["b/c"]) == f"cgroup:{later['b/c']}" and names.walks == 1  # too soon to walk again
    clock.now += 0.6
    assert names(later["b/c"]) == "b/c" and names.walks == 2
    os.rmdir(tmp_path / "a")
    clock.now += 5
    assert names(first["a"]) == "a"  # removed, still its own name (ids are not reused)
    assert names(123456789012) == "cgroup:123456789012"


def test_without_a_cgroup_v2_mount_every_id_is_unknown():
    names = CgroupNames(None)
    assert names(1) == "cgroup:1" and names.walks == 0


def test_the_plan_fetches_counts_and_compares_the_cgroup_id():
    asked = []

    def cgroup_ids(path):
        asked.append(path)
        return {"system.slice/nginx.service": 4242, "/": 1}[path]

    probe = parse_probe_text('vfs_read:c:cgroup,a3 count(cgroup) if cgroup == "system.slice/nginx.service" '
                             '|| cgroup != "/"')
    plan = build_plan(probe, gen=1, cgroup_id=cgroup_ids)
    fetch = plan.fetch[0]
    assert (fetch.src, fetch.kind, fetch.width, fetch.dest) == (abi.SRC_CGROUP, abi.K_UINT, 8, 0)
    assert plan.agg_nkeys == 1 and plan.agg_key[0] == 0  # the event's own cgroup
    cmps = [(c.kind, c.lsrc, c.rsrc, c.imm, abi.CMP_OPS[c.op]) for c in plan.cmps[:plan.ncmps]]
    assert cmps == [(abi.CMP_INT, abi.SRC_CGROUP, abi.SRC_CONST, 4242, "=="),
                    (abi.CMP_INT, abi.SRC_CGROUP, abi.SRC_CONST, 1, "!=")]
    assert asked == ["system.slice/nginx.service", "/"]
    assert plan.fetch_before == 0  # the comparisons read the kernel's id, no fetch


def test_a_count_by_cgroup_alone_fetches_it_for_the_key():
    plan = build_plan(parse_probe_text("vfs_read:c count(cgroup,comm)"), gen=1)
    assert plan.nfetch == 1 and (plan.fetch[0].src, plan.fetch[0].width) == (abi.SRC_CGROUP, 8)
    assert plan.agg_key[0] == 0 and plan.agg_comm == 1


def test_a_label_of_cgroup_compares_its_id():
    probe = parse_probe_text('vfs_read:c:cg=cgroup if cg == "x"')
    plan = build_plan(probe, gen=1, cgroup_id=lambda path: 77)
    assert (plan.cmps[0].lsrc, plan.cmps[0].imm) == (abi.SRC_CGROUP, 77)


def test_count_keys_are_named_by_path():
    probe = parse_probe_text("vfs_read:c count(a3,cgroup,comm)")
    key = abi.AggKey()
    key.k[0], key.k[1] = 4096, 4242
    key.comm = b"nginx"
    assert key_values(probe, key, {4242: "system.slice/nginx.service"}.get) == (
        4096, "system.slice/nginx.service", "nginx")
    assert key_values(probe, key) == (4096, "cgroup:4242", "nginx")


def test_a_path_that_is_no_cgroup_v2_directory_is_refused_in_one_line(tmp_path):
    for path, words in ((str(tmp_path / "absent"), "no such cgroup"), (str(tmp_path), "not in a cgroup v2"),
                        ("/etc/hostname", "not a directory")):
        probe = parse_probe_text(f'vfs_read:c if cgroup == "{path}"')
        for check in (lambda: build_plan(probe, gen=1), lambda: _check_cgroup_paths(probe)):
            with pytest.raises(CgroupError) as err:
                check()
            assert str(err.value).startswith(f'filter: cgroup "{path}": ') and words in str(err.value)
            assert "\n" not in str(err.value)


def test_the_root_is_this_machines_cgroup_v2_mount():
    root = cgroup2_root()
    if root is None:
        with pytest.raises(CgroupError, match="no cgroup v2 hierarchy is mounted"):
            cgroup_id("system.slice")
        return
    assert cgroup_id("/") == os.stat(root).st_ino == cgroup_id(root)
    _check_cgroup_paths(parse_probe_text('vfs_read:c if cgroup != "/"'))  # no error


@pytest.mark.parametrize("text, refused", [
    ("vfs_read:c:cgroup", True), ("vfs_read:c count(cgroup)", True), ('vfs_read:c if cgroup == "a"', True),
    ("vfs_read:c:a3", False), ('vfs_read:c:a3 if comm == "a"', False),
])
def test_a_probe_that_reads_cgroup_is_never_compiled(text, refused):
    probe = parse_probe_text(text)
    assert never_compiled(probe) is refused
    assert ("a probe that reads cgroup runs on the generic engine only" in generic_only(probe)) is refused


def test_ktui_check_refuses_a_filter_path_that_is_no_cgroup_here(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from ktui.cli import main
    from ktui.kernel.attach import cgroup_scope

    (tmp_path / "root" / "system.slice").mkdir(parents=True)
    sets = tmp_path / "s.yaml"
    sets.write_text("name: s\nprobes:\n  - spec: vfs_read:c:cgroup\n    filter: 'cgroup == \"gone.slice\"'\n"
                    "  - spec: vfs_read:c count(cgroup)\n    filter: 'cgroup != \"system.slice\"'\n")
    monkeypatch.setattr(cgroup_scope, "cgroup2_root", lambda mounts=None: str(tmp_path / "root"))
    monkeypatch.setattr(cgroup_scope, "fs_magic", lambda fd: cgroup_scope.CGROUP2_SUPER_MAGIC)
    result = CliRunner().invoke(main, ["check", str(sets)])
    lines = [line for line in result.output.splitlines() if "cgroup" in line]
    assert result.exit_code == 1
    assert lines == [f'{sets}:3:11: probe 1 (vfs_read:c:cgroup): filter: cgroup "gone.slice": no such cgroup '
                     f'({tmp_path}/root/gone.slice does not exist)']
    monkeypatch.setattr(cgroup_scope, "cgroup2_root", lambda mounts=None: None)
    result = CliRunner().invoke(main, ["check", str(sets)])
    assert "probe 1 (vfs_read:c:cgroup): cgroup paths not checked: no cgroup v2 hierarchy is mounted here" \
        in result.output


def test_a_slots_plan_keeps_the_cgroup_it_was_added_with(monkeypatch):
    from ktui.kernel.attach import cgroup_scope
    from ktui.kernel.generic.engine import Slot, slot_cgroup_id

    inodes = iter([4242, 5151])
    monkeypatch.setattr(cgroup_scope, "cgroup_id", lambda path: next(inodes))
    probe = parse_probe_text('vfs_read:c if cgroup == "a.slice"')
    slot = Slot(0, 1, probe, 7)
    first = build_plan(probe, gen=1, cgroup_id=slot_cgroup_id(slot))
    again = build_plan(probe, gen=1, cgroup_id=slot_cgroup_id(slot))  # the directory was made anew since
    assert first.cmps[0].imm == again.cmps[0].imm == 4242
    edited = Slot(0, 2, probe, 8)  # an edit adds the probe anew: it resolves again
    assert build_plan(probe, gen=2, cgroup_id=slot_cgroup_id(edited)).cmps[0].imm == 5151
