"""Every dashboard action in the command palette (ctrl+p), by name.

Built from the screen's bindings, so a new key is in the palette too; only
actions that apply now (the screen's check_action) are offered. Also
Textual's light and dark themes by name (Textual's own "Theme" command
lists every theme); NO_COLOR in the environment turns every colour off
(Textual's own filter), whichever theme is chosen.
"""

from __future__ import annotations

from functools import partial
from typing import Iterator

from textual.binding import Binding
from textual.command import DiscoveryHit, Hit, Hits, Provider


THEMES = (("Light theme", "textual-light"), ("Dark theme", "textual-dark"))


class DashboardCommands(Provider):
    def _commands(self) -> Iterator[tuple[str, str, partial]]:
        screen = self.screen
        seen: set[str] = set()
        for binding in list(screen.BINDINGS) + list(self.app.BINDINGS):
            if not isinstance(binding, Binding) or not binding.id or binding.action in seen:
                continue
            if not binding.description or binding.system:
                continue
            node = screen if binding in screen.BINDINGS else self.app
            if not node.check_action(binding.action, ()):
                continue
            seen.add(binding.action)
            key = self.app.get_key_display(binding)
            help_text = f"{binding.tooltip or binding.description}  (key: {key})"
            yield binding.description, help_text, partial(node.run_action, binding.action)
        for name, theme in THEMES:
            yield name, f"Textual's {theme} theme", partial(setattr, self.app, "theme", theme)

    async def discover(self) -> Hits:
        for name, help_text, command in self._commands():
            yield DiscoveryHit(name, command, help=help_text)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for name, help_text, command in self._commands():
            score = max(matcher.match(name), matcher.match(help_text) * 0.8)
            if score > 0:
                yield Hit(score, matcher.highlight(name), command, help=help_text)
