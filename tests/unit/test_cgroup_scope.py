"""--cgroup on the host: where the cgroup v2 mount is, what a path names,
what is refused (in YAML with file:line:col, on the command line in one
line), and that a set saves it and loads it back."""

from __future__ import annotations

import os

import pytest

from ktui.kernel.attach.cgroup_scope import CgroupError, cgroup2_root, cgroup_path, open_cgroup
from ktui.lang.model import ProbeSetError, SpecError
from ktui.lang.limits import check_cgroup
from ktui.lang.probeset import loads_probeset
from ktui.lang.probeset_write import dumps_probeset

UNIFIED = "cgroup2 /sys/fs/cgroup cgroup2 rw,nosuid 0 0\n"
HYBRID = ("tmpfs /sys/fs/cgroup tmpfs rw 0 0\ncgroup /sys/fs/cgroup/cpu cgroup rw,cpu 0 0\n"
          "cgroup2 /sys/fs/cgroup/unified cgroup2 rw 0 0\n")
V1 = "cgroup /sys/fs/cgroup/cpu cgroup rw,cpu 0 0\n"


@pytest.mark.parametrize("mounts, root", [(UNIFIED, "/sys/fs/cgroup"), (HYBRID, "/sys/fs/cgroup/unified"),
                                          (V1, None)])
def test_the_cgroup2_mount_is_found(tmp_path, mounts, root):
    f = tmp_path / "mounts"
    f.write_text(mounts)
    assert cgroup2_root(str(f)) == root


def test_a_relative_path_is_under_the_mount_and_an_absolute_one_is_itself():
    assert cgroup_path("system.slice/ssh.service", "/sys/fs/cgroup") == "/sys/fs/cgroup/system.slice/ssh.service"
    assert cgroup_path("/sys/fs/cgroup/unified/a", "/sys/fs/cgroup") == "/sys/fs/cgroup/unified/a"


def test_what_is_no_cgroup_v2_directory_is_refused_in_one_line(tmp_path):
    for path, words in ((str(tmp_path / "absent"), "no such cgroup"), (str(tmp_path), "not in a cgroup v2"),
                        ("/etc/hostname", "not a directory")):
        with pytest.raises(CgroupError) as err:
            open_cgroup(path)
        assert words in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("path", ["", "../escape", "a/../../b", "two\nlines"])
def test_check_cgroup_refuses(path):
    with pytest.raises(SpecError):
        check_cgroup(path)


def test_a_set_scoped_to_a_cgroup_saves_and_loads_back():
    ps = loads_probeset("name: s\nfilter:\n  cgroup: system.slice/ssh.service\nprobes:\n  - spec: vfs_read:c\n")
    assert ps.cgroup == "system.slice/ssh.service"
    assert loads_probeset(dumps_probeset(ps)) == ps


def test_a_bad_cgroup_in_yaml_is_located():
    with pytest.raises(ProbeSetError) as err:
        loads_probeset("name: s\nfilter:\n  cgroup: ../up\nprobes:\n  - spec: vfs_read:c\n", source="s.yaml")
    assert str(err.value).startswith("s.yaml:3:")


def test_the_command_line_refuses_a_bad_cgroup_in_one_line():
    from ktui.cli import load_inputs
    from ktui.lang.model import KtuiError

    with pytest.raises(KtuiError) as err:
        load_inputs((), ("vfs_read:c",), cgroup="../up", bind=False)
    assert str(err.value).startswith("--cgroup: ")
    assert load_inputs((), ("vfs_read:c",), cgroup="a/b", bind=False).cgroup == "a/b"


def test_open_cgroup_opens_this_machines_v2_mount_where_there_is_one():
    root = cgroup2_root()
    if root is None:
        with pytest.raises(CgroupError):
            open_cgroup("anything")
        return
    os.close(open_cgroup(root))
