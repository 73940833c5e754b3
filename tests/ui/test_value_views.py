"""The stats pane's views of a probe's aggregations: `v` cycles counters,
value histogram and top values (only the views the probe has), the key is
in the footer, and a probe without aggregations keeps its counters."""

from __future__ import annotations

import time

from ktui.lang.probeset import loads_probeset
from ktui.pipeline.value_views import COUNTERS, TOP, VALUES, next_view, views_of
from ktui.lang.spec import parse_probe_text
from ktui.widgets.stats_pane import StatsPane
from textual.geometry import Region

from .conftest import SIZE, make_app, make_feed, polls, settles

SET = """name: agg
probes:
  - spec: sizes=vfs_read:c hist(a3) count(a3)
  - spec: bytes=vfs_read:r count(comm) sum(retval)
  - spec: vfs_write:c
"""


def text(pane, selector: str) -> str:
    widget = pane.query_one(selector)
    return str(widget.render()) if widget.display else ""


async def test_v_cycles_the_views_of_the_selected_probe():
    app = make_app(make_feed(loads_probeset(SET), lossy=set(), fail={}))
    async with app.run_test(size=SIZE) as pilot:
        polls(app, 4)
        await pilot.pause()
        pane = app.main.query_one(StatsPane)
        assert pane.view.status.probe.name == "sizes"
        assert "counters | value histogram | top values" in text(pane, "#stats-tabs")
        assert "top comms" in text(pane, "#stats-body")
        await pilot.press("v")
        await pilot.pause()
        body = text(pane, "#stats-values")
        assert "hist(a3)" in body and "4096 -> 8191" in body and "4 -> 7" in body
        assert text(pane, "#stats-body") == ""
        await pilot.press("v")
        await pilot.pause()
        body = text(pane, "#stats-values")
        assert "by a3: hits" in body and "4096" in body
        await pilot.press("v")
        await pilot.pause()
        assert "top comms" in text(pane, "#stats-body") and text(pane, "#stats-values") == ""
        # the next probe has no histogram: the view follows what it has
        await pilot.press("down")
        await pilot.pause()
        assert pane.view.status.probe.name == "bytes"
        assert "counters | top values" in text(pane, "#stats-tabs")
        await pilot.press("v")
        await pilot.pause()
        body = text(pane, "#stats-values")
        assert "by comm: hits, sum(retval)" in body and "bash" in body
        # a probe without aggregations: counters only, no view bar
        await pilot.press("down")
        await pilot.pause()
        assert text(pane, "#stats-tabs") == "" and "top comms" in text(pane, "#stats-body")


async def test_the_view_key_is_in_the_footer():
    app = make_app(make_feed(loads_probeset(SET), lossy=set(), fail={}))
    async with app.run_test(size=SIZE) as pilot:
        polls(app, 2)
        await pilot.pause()
        shown = {key for key, active in app.active_bindings.items()
                 if active.binding.show and active.enabled}
        assert "v" in shown

        def footer():
            return [o for o in app.screen.query("FooterKey")]

        # the footer recomposes after a refresh: wait for it, then look
        await settles(pilot, lambda: any(k.key == "v" for k in footer()), "v in the footer")
        assert any(k.key == "v" and k.description == "View" for k in footer())
        await pilot.press("question_mark")
        await pilot.pause()
        from .conftest import plain

        assert "next view of the selected probe" in plain(app.screen.query_one("#keys"))


def test_views_follow_the_aggregations():
    probe = parse_probe_text("vfs_read:c hist(a3)")
    assert views_of(probe) == (COUNTERS, VALUES)
    assert next_view(VALUES, probe) == COUNTERS
    assert next_view(TOP, probe) == COUNTERS  # not one of its views
    assert views_of(parse_probe_text("vfs_read:c")) == (COUNTERS,)


async def test_the_stacks_view_shows_frames_counts_and_shares():
    ps = loads_probeset("name: k\nprobes:\n  - spec: who=vfs_read:c stack(kernel)\n")
    app = make_app(make_feed(ps, lossy=set(), fail={}))
    async with app.run_test(size=SIZE) as pilot:
        polls(app, 4)
        await pilot.pause()
        pane = app.main.query_one(StatsPane)
        assert "counters | top stacks" in text(pane, "#stats-tabs")
        await pilot.press("v")
        await pilot.pause()
        body = text(pane, "#stats-values")
        # make_app's symbolize names an address by its low bits
        (_, first), (_, second) = pane.view.stats.stacks
        total = first + second
        assert "2 distinct" in body
        assert f"{first} ({100 * first / total:.1f}%)" in body and f"{second} ({100 * second / total:.1f}%)" in body
        assert "sym_100+0x0" in body and "sym_200+0x0" in body and "sym_400+0x0" in body


async def test_the_stacks_view_of_kernel_and_user_frames_warns_they_may_be_partial():
    ps = loads_probeset("name: k\nprobes:\n  - spec: who=vfs_read:c stack(both)\n")
    app = make_app(make_feed(ps, lossy=set(), fail={}))
    async with app.run_test(size=SIZE) as pilot:
        polls(app, 4)
        await pilot.pause()
        pane = app.main.query_one(StatsPane)
        await pilot.press("v")
        await pilot.pause()
        body = text(pane, "#stats-values")
        assert "top kernel + user stacks: 2 distinct" in body
        assert "frame pointers" in body and "partial user stack" in body
        lines = [line.strip() for line in body.splitlines()]
        # kernel frames, then --, then the user frames, innermost first
        at = lines.index("sym_100+0x0")
        assert lines[at: at + 6] == ["sym_100+0x0", "sym_200+0x0", "sym_300+0x0", "--", "leaf+0x4", "main+0x10"], lines


def test_the_dialog_keeps_aggregations_through_an_edit():
    from ktui.screens.probe_dialog import build_probe, dialog_spec

    probe = build_probe("vfs_read:r count(comm) sum(retval)", "retval >= 0", "bytes")
    assert str(probe.agg) == "count(comm) sum(retval)"
    again = build_probe(dialog_spec(probe), str(probe.filter), "bytes", base=probe)
    assert again == probe


async def test_bytes_per_process_reads_on_one_line_a_key_at_80_and_50_columns():
    """Issue #29: at 50 columns the `count(comm) sum(retval)` view wrapped
    each sum onto its own unlabelled line. Each key's row holds its hits,
    its sum and its share, under a line naming them."""
    for size in ((80, 40), (50, 40)):
        app = make_app(make_feed(loads_probeset(SET), lossy=set(), fail={}))
        async with app.run_test(size=size) as pilot:
            polls(app, 4)
            await pilot.press("s", "down", "v")  # (narrower than 120: the pane folds under the events)
            await pilot.pause()
            pane = app.main.query_one(StatsPane)
            assert pane.view.status.probe.name == "bytes"
            values = pane.query_one("#stats-values")
            deadline = time.monotonic() + 30
            while not values.size.height and time.monotonic() < deadline:  # laid out
                await pilot.pause(0.05)
            shown = ["".join(seg.text for seg in strip).rstrip()
                     for strip in values.render_lines(Region(0, 0, *values.size))]
            rows = {line.split()[0]: line.split() for line in shown if line.split()}
            assert rows["comm"] == ["comm", "hits", "sum(retval)", "%"], shown
            for comm in ("cat", "sshd", "bash"):
                assert len(rows[comm]) == 4 and rows[comm][3].endswith("%"), shown
            # cat reads 4096 at a time: the most bytes, so first, and nearly all of them
            first = next(line.split()[0] for line in shown if line.split()[:1] in (["cat"], ["sshd"], ["bash"]))
            assert first == "cat" and int(rows["cat"][2]) == 4096 * int(rows["cat"][1])
            assert float(rows["cat"][3].rstrip("%")) > 90


async def test_in_a_short_pane_v_brings_the_view_into_sight():
    """At 80x24 the stats pane below the events is a few rows tall: the
    probe's head and rate sparkline fill it, and a view drawn under them
    would never be seen. `v` scrolls the view bar to the pane's top."""
    app = make_app(make_feed(loads_probeset(SET), lossy=set(), fail={}))
    async with app.run_test(size=(80, 24)) as pilot:
        polls(app, 4)
        await pilot.pause()
        pane = app.main.query_one(StatsPane)
        if not pane.display:
            await pilot.press("s")
            await pilot.pause()
        tabs = pane.query_one("#stats-tabs")
        assert pane.display and pane.size.height < 12, pane.size
        await pilot.press("v")
        await pilot.pause()
        await pilot.pause()
        assert "hist(a3)" in text(pane, "#stats-values")
        # the view bar is the first row the pane shows
        assert pane.scroll_offset.y == tabs.virtual_region.y, (pane.scroll_offset, tabs.virtual_region)
