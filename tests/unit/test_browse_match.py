"""The function browser's fuzzy matcher: tiers, ranking, smart case, the
cap, and narrowing (a longer query searches the previous hits only)."""

from __future__ import annotations

import pytest

from ktui.screens.browse_match import Matcher

NAMES = ["vfs_read", "vfs_readv", "vfs_readlink", "ksys_read", "do_vfs_ioctl", "vfs_rmdir",
         "__vfs_read_iter", "kernel_read", "tcp_sendmsg", "tcp_send_ack", "HUF_decompress1X_DCtx",
         "Vfs_Upper", "x86_read"]


def test_prefix_then_substring_then_subsequence():
    m = Matcher(NAMES)
    got = m.search("vfs_r").names
    # prefix (shorter first), then substring (earlier match first), then subsequence
    assert got == ("vfs_read", "vfs_readv", "vfs_rmdir", "vfs_readlink", "__vfs_read_iter", "Vfs_Upper")


def test_subsequence_matches_come_after_substrings():
    got = Matcher(NAMES).search("vfsrd").names
    assert got[0] == "vfs_read" and "vfs_rmdir" in got and "do_vfs_ioctl" not in got
    got = Matcher(NAMES).search("read").names
    # by position, then length, then name
    assert got == ("vfs_read", "x86_read", "vfs_readv", "vfs_readlink", "ksys_read", "__vfs_read_iter",
                   "kernel_read")


def test_smart_case():
    m = Matcher(NAMES)
    assert "Vfs_Upper" in m.search("vfs_u").names  # lower case matches any case
    assert m.search("Vfs").names == ("Vfs_Upper",)  # a capital: exact case
    assert m.search("1X").names == ("HUF_decompress1X_DCtx",)


def test_names_differing_only_in_case_are_both_found():
    m = Matcher(["foo_bar", "Foo_bar", "other"])
    assert sorted(m.search("foo").names) == ["Foo_bar", "foo_bar"]
    assert m.search("foo").total == 2


def test_the_cap_keeps_the_count_exact():
    m = Matcher([f"fn_{i:05d}" for i in range(5000)])
    found = m.search("fn", cap=50)
    assert len(found.names) == 50 and found.total == 5000
    assert found.names[0] == "fn_00000"


def test_empty_query_lists_names_in_order_and_nothing_matches_nothing():
    m = Matcher(NAMES)
    assert m.search("  ").total == len(NAMES) and m.search("").names[0] == "HUF_decompress1X_DCtx"
    assert m.search("zzz").names == () and m.search("zzz").total == 0


@pytest.mark.parametrize("query", ["vfs_read", "vfs_rea", "v_r", "[a", "a.b", "x*", "\\", "(", "^$"])
def test_regex_characters_are_literal_and_narrowing_gives_what_a_fresh_search_gives(query):
    names = NAMES + ["[a]", "a.b", "x*y", "back\\slash", "(paren", "^$"]
    warm = Matcher(names)
    for i in range(1, len(query) + 1):  # typed one key at a time: each search narrows the last
        typed = warm.search(query[:i])
    fresh = Matcher(names).search(query)
    assert typed == fresh
    expected = {n for n in names if _is_subsequence(query.lower(), n.lower())}
    assert set(fresh.names) == expected


def test_backspace_after_narrowing_widens_again():
    m = Matcher(NAMES)
    wide = m.search("vfs").total
    m.search("vfs_readl")
    assert m.search("vfs").total == wide


def _is_subsequence(q: str, name: str) -> bool:
    it = iter(name)
    return all(c in it for c in q)


def test_an_empty_query_shows_names_a_user_would_probe_first():
    m = Matcher([".E_copy", "__x64_sys_read", "vfs_read", "_do_fork", "tcp_sendmsg"])
    found = m.search("")
    assert found.names[:2] == ("tcp_sendmsg", "vfs_read")
    assert set(found.names[2:]) == {".E_copy", "__x64_sys_read", "_do_fork"}
    assert found.total == 5
