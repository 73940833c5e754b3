"""Completion in the add/edit dialog's spec field (spec_complete says
what completes to what). The function index loads in a thread the first
time a suggestion is asked for; until then the field simply has none.
"""

from __future__ import annotations

import asyncio

from textual.suggester import Suggester

from ktui.screens.browse_model import FunctionIndex
from ktui.screens.spec_complete import complete


class SpecSuggester(Suggester):
    def __init__(self, index: FunctionIndex) -> None:
        super().__init__(use_cache=True, case_sensitive=True)
        self.index = index

    async def get_suggestion(self, value: str) -> str | None:
        functions = self.index.loaded
        if functions is None:
            functions = await asyncio.to_thread(self.index.load)
        return complete(functions, value)
