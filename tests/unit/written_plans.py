"""The plan the generic engine writes for a slot, for the plan tests
(test_gates, test_spans): its map write caught, no kernel."""

from __future__ import annotations

from ktui.kernel.generic import abi
from ktui.kernel.generic.engine import GenericEngine, Slot


def written_plan(slot: Slot, monkeypatch, events: bool = True) -> abi.Plan:
    """The plan the engine writes for `slot` (its map write caught);
    `events`: SessionOptions.events."""
    from ktui.kernel.generic import engine as engine_module

    written = []
    monkeypatch.setattr(engine_module.bpfsys, "map_update", lambda fd, key, value: written.append(value))
    engine = GenericEngine.__new__(GenericEngine)
    engine.program = type("Loaded", (), {"maps": {"ktui_plans": 3}})()
    engine.events = events
    engine._write_plan(slot)
    return abi.Plan.from_buffer_copy(written[0])
