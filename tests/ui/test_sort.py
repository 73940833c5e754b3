"""Issue 15: the probe table sorts by any column (S cycles, I inverts, a
click on a header sorts by it); the sort holds through live updates and the
cursor stays on the probe it was on."""

from __future__ import annotations

from ktui.lang.spec import parse_spec
from ktui.record.feed import ProbeState, ProbeStats, ProbeStatus
from ktui.widgets.probe_sort import Sort
from ktui.widgets.probe_table import ProbeTable, ProbeLine

from .conftest import make_app, polls


def hits_in_table(app) -> list[int]:
    stats = app.main.snapshot.probes
    return [stats[i].hits for i in app.main.query_one(ProbeTable).probe_ids]


def probe_id(app, name: str) -> int:
    return next(i for i, s in app.main.statuses.items() if s.probe.name == name)


async def press_until_sorted_by(pilot, key: str) -> None:
    for _ in range(12):
        if pilot.app.main.sort.key == key:
            return
        await pilot.press("S")
    assert pilot.app.main.sort.key == key


async def test_s_sorts_by_hits_keeps_the_selection_and_holds_through_updates(app):
    async with app.run_test(size=(140, 40)) as pilot:
        polls(app, 4)
        await pilot.pause()
        table = app.main.query_one(ProbeTable)
        openat = probe_id(app, "openat")
        table.select(openat)
        before = hits_in_table(app)
        assert before != sorted(before, reverse=True)  # as added, it is not sorted already
        await press_until_sorted_by(pilot, "hits")
        await pilot.pause()
        assert hits_in_table(app) == sorted(before, reverse=True)
        assert table.selected_id == openat
        assert app.main.statuses[table.probe_ids[0]].probe.name == "tcp_sendmsg:c"  # the busiest on top
        assert "hits ↓" in str(table.border_title)
        polls(app, 6)  # live updates: still sorted, still on openat
        await pilot.pause()
        assert hits_in_table(app) == sorted(hits_in_table(app), reverse=True)
        assert table.selected_id == openat
        await pilot.press("I")
        await pilot.pause()
        assert hits_in_table(app) == sorted(hits_in_table(app))
        assert table.selected_id == openat
        assert "hits ↑" in str(table.border_title)


async def test_clicking_a_header_sorts_by_it_and_again_inverts(app):
    async with app.run_test(size=(140, 40)) as pilot:
        polls(app, 4)
        await pilot.pause()
        table = app.main.query_one(ProbeTable)
        x = 1  # the border
        for column in table.ordered_columns:
            if column.key.value == "hits":
                break
            x += column.get_render_width(table)
        await pilot.click(ProbeTable, offset=(x + 2, 1))  # the header row, under the border
        await pilot.pause()
        assert app.main.sort == Sort("hits")
        assert hits_in_table(app) == sorted(hits_in_table(app), reverse=True)
        await pilot.click(ProbeTable, offset=(x + 2, 1))
        await pilot.pause()
        assert app.main.sort == Sort("hits", reverse=True)
        assert hits_in_table(app) == sorted(hits_in_table(app))


def line(name: str, hits: int | None, kind: str = "c") -> ProbeLine:
    probe = parse_spec(f"{name}:{kind}")
    stats = None if hits is None else ProbeStats(probe_id=0, hits=hits, lost=0, emitted=hits)
    return ProbeLine(ProbeStatus(0, probe, ProbeState.ATTACHED), stats)


def names(lines) -> list[str]:
    return [x.status.probe.name for x in lines]


def test_blanks_go_last_either_way_and_ties_keep_their_order():
    lines = [line("a", 5), line("b", None), line("c", 9), line("d", 5)]
    assert names(Sort("hits").apply(lines)) == ["c:c", "a:c", "d:c", "b:c"]
    assert names(Sort("hits", reverse=True).apply(lines)) == ["a:c", "d:c", "c:c", "b:c"]
    assert names(Sort("name").apply(lines)) == ["a:c", "b:c", "c:c", "d:c"]
    assert names(Sort().apply(lines)) == names(lines)
    # p50 of a call probe is blank, not "fastest"
    assert names(Sort("p50").apply(lines)) == names(lines)


def test_s_steps_through_every_column_then_back_to_as_added():
    seen, sort = [], Sort()
    for _ in range(20):
        sort = sort.next(timed=False)
        if sort.key is None:
            break
        seen.append(sort.key)
    assert seen == ["name", "kind", "state", "hits", "rate", "lost", "p50", "p99", "errors"]
    assert "cost" in [Sort(k).next(True).key for k in ("rate",)]
