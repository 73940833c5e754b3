"""Textual's Footer without its slow leak.

Footer.compose binds every FooterKey to the footer's `compact` reactive
(data_bind), and Textual drops the watchers of removed nodes only when that
reactive changes, which it never does here. The footer recomposes on every
screen switch and bindings change, so each one left ~7 dead FooterKeys
alive: 661 after 90 help open/close cycles in the bench's 100k events/s
flood, and RSS grew with them.

So after each recompose the footer changes `compact` and changes it back:
the first change makes Textual prune the watchers whose node is closing, as
it does on any change, and the second restores the value before anything is
drawn. Only public API: the `compact` reactive. (The watcher list itself is
private to Textual; tests/ui/test_footer.py counts the live keys.)
"""

from __future__ import annotations

from textual.widgets import Footer


class KtuiFooter(Footer):
    async def recompose(self) -> None:
        await super().recompose()
        compact = self.compact
        self.compact = not compact
        self.compact = compact
