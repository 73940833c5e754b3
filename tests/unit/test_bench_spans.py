"""benchmarks/run.py's spans analysis: ns added per pair, each launch against
the untraced rounds just before and after it in its own row and cycle."""

from benchmarks.run import span_costs


def bare(row, cycle, tag, ns_per_op, n=10):
    return {"row": row, "cycle": cycle, "tag": tag, "n": n, "ns": [ns_per_op * n] * 3}


def run(row, cycle, tool, ns_per_op, n=10, pairs=30):
    return {"row": row, "cycle": cycle, "tool": tool, "n": n, "ns": [ns_per_op * n, 1, 10**9],
            "expected_pairs": 3 * n, "pairs": pairs}


def test_each_launch_against_its_own_neighbours_then_the_median():
    spans = {
        "bare": [bare("block", 0, "before", 100), bare("block", 0, "after a", 120),
                 bare("block", 0, "after b", 80),
                 bare("syscall", 0, "before", 1), bare("syscall", 0, "after c", 1),
                 bare("block", 1, "before", 200), bare("block", 1, "after b", 200),
                 bare("block", 1, "after a", 220)],
        "runs": [run("block", 0, "a", 160), run("block", 0, "b", 150),
                 run("syscall", 0, "c", 11),
                 run("block", 1, "b", 300), run("block", 1, "a", 290, pairs=29)],
    }
    costs = span_costs(spans)
    # a, block: cycle 0 160 - (100+120)/2 = 50; cycle 1 290 - (200+220)/2 = 80
    assert costs["a"]["row"] == "block"
    assert costs["a"]["added_ns"] == [50, 80]
    assert costs["a"]["median_ns"] == 65
    assert (costs["c"]["row"], costs["c"]["added_ns"]) == ("syscall", [10])
    assert costs["b"]["added_ns"] == [50, 100]
    assert costs["b"]["median_ns"] == 75
    assert (costs["a"]["pairs"], costs["a"]["expected_pairs"]) == (59, 60)


def test_a_tool_that_never_went_live_is_an_error_not_a_cost():
    spans = {"bare": [bare("block", 0, "before", 100), bare("block", 0, "after a", 100)],
             "runs": [{"row": "block", "cycle": 0, "tool": "a", "n": 10, "expected_pairs": 30,
                       "error": "never live"}]}
    costs = span_costs(spans)
    assert costs["a"]["median_ns"] is None
    assert costs["a"]["errors"] == ["never live"]
