"""`cgroup` in the language: a fetch shown as text, a count key, a filter
operand compared with a quoted path (== and != only), refused where it
means nothing, in one line with its column."""

from __future__ import annotations

import pytest

from ktui.lang.cgroups import filter_paths, uses_cgroup
from ktui.lang.model import SpecError
from ktui.lang.spec import parse_probe_text


def test_cgroup_is_a_text_fetch_a_count_key_and_a_filter_operand():
    probe = parse_probe_text('vfs_read:c:cgroup,a3 count(cgroup,comm) if cgroup == "system.slice/nginx.service"')
    assert [f.effective_type for f in probe.fetches] == ["string", "u64"]
    assert [str(k) for k in probe.agg.keys] == ["cgroup", "comm"]
    assert filter_paths(probe) == ["system.slice/nginx.service"]


def test_a_cgroup_path_may_be_longer_than_text_the_kernel_compares():
    scope = "system.slice/docker-" + "ab" * 32 + ".scope"
    assert filter_paths(parse_probe_text(f'vfs_read:c if cgroup == "{scope}"')) == [scope]
    with pytest.raises(SpecError) as err:
        parse_probe_text(f'vfs_read:c:cg=cgroup if cg == "{scope}"')  # by its name only: the parser knows no labels
    assert err.value.message == "filter: string longer than 63 characters" and err.value.col == 31
    with pytest.raises(SpecError, match="string longer than 63 characters"):
        parse_probe_text(f'vfs_read:c if comm != "{scope}"')


def test_a_label_of_cgroup_is_compared_as_the_cgroup():
    probe = parse_probe_text('vfs_read:c:cg=cgroup if cg != "user.slice" && comm == "dd"')
    assert filter_paths(probe) == ["user.slice"]


@pytest.mark.parametrize("text, used", [
    ("vfs_read:c:cgroup", True),
    ("vfs_read:c count(a3,cgroup)", True),
    ('vfs_read:c if cgroup == "a"', True),
    ("syscalls/sys_enter_read:t:cgroup", True),
    ('vfs_read:c:a3 count(comm) if comm == "cgroup"', False),
    ("vfs_read:c:pid", False),
])
def test_uses_cgroup(text, used):
    assert uses_cgroup(parse_probe_text(text)) is used


@pytest.mark.parametrize("text, words, col", [
    ('vfs_read:c:a3 if cgroup > "x"', "strings compare only with == or !=, not >", 25),
    ("vfs_read:c:a3 if cgroup == 5", 'cgroup is a string; compare it with a quoted "text"', 28),
    ('vfs_read:c:a3 if cgroup == "../x"', "may not go above it (..)", 28),
    ('vfs_read:c:a3 if "" == cgroup', "a cgroup path has 1 to", 18),
    ("vfs_read:c:cgroup:u64", "cgroup is shown by its path; drop the :u64 type", 19),
    ("vfs_read:c hist(cgroup)", "hist: cgroup is not an integer", None),
    ("vfs_read:c sum(cgroup)", "sum: cgroup is not an integer", None),
])
def test_cgroup_is_refused_where_it_means_nothing(text, words, col):
    with pytest.raises(SpecError) as err:
        parse_probe_text(text)
    assert words in err.value.message and "\n" not in str(err.value)
    if col is not None:
        assert err.value.col == col
