"""Textual's Footer without its slow leak.

Footer.compose binds every FooterKey to the footer's `compact` reactive
(data_bind), and Textual drops the watchers of removed nodes only when that
reactive changes, which it never does here. The footer recomposes on every
screen switch and bindings change, so each one left ~7 dead FooterKeys
alive: 661 after 90 help open/close cycles in the bench's 100k events/s
flood, and RSS grew with them. After each recompose we drop the watchers
whose node is closing or gone, as Textual itself does on a change.
"""

from __future__ import annotations

from textual.widgets import Footer


class KtuiFooter(Footer):
    async def recompose(self) -> None:
        await super().recompose()
        watchers = getattr(self, "__watchers", {})
        for entries in watchers.values():
            entries[:] = [(node, callback) for node, callback in entries
                          if not node._closing and node.parent is not None]
