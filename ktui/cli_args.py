"""The command line's own rules: numbers bounded where click parses them,
and every usage error on one line.

A number reached the code unchecked: `--pid -5` generated `!= -5U` in the
BPF program, `--refresh -1` ended in a traceback after the whole compile,
and `--refresh 0` froze the dashboard. Each option that takes a number
now names its range here, so a bad value is refused before anything runs,
with the wording a probe set file uses (`--pid: -5 is out of range
(1..4194304)`), exit 2.

Click prints a usage error as three lines (usage, a hint, the error);
ktui's errors are one line, `ktui: ...`, so `one_line` says it that way.
"""

from __future__ import annotations

import math

import click

from ktui.lang.limits import out_of_range
from ktui.lang.numbers import parse_int


class Bounded(click.ParamType):
    """A whole number (`integer`) or a finite decimal one in [low, high];
    with `power_of_two`, a power of two as well."""

    def __init__(self, low: float, high: float, *, integer: bool = False, power_of_two: bool = False) -> None:
        self.low, self.high = low, high
        self.integer = integer
        self.power_of_two = power_of_two
        self.name = "integer" if integer else "number"

    def convert(self, value, param, ctx):
        what = option_name(param)
        number = self._read(value)
        if number is None:
            kind = "a whole number" if self.integer else "a number"
            self.fail(f"{str(value)[:40]!r} is not {kind}", param, ctx)
        if not self.low <= number <= self.high:
            self.fail(out_of_range(what, _show(value), _show(self.low), _show(self.high)), param, ctx)
        if self.power_of_two and number & (number - 1):
            self.fail(f"{what}: {number} is not a power of two", param, ctx)
        return number

    def _read(self, value) -> float | int | None:
        if isinstance(value, bool):
            return None
        if isinstance(value, (int, float)):  # a default, already a number
            return value if math.isfinite(value) else None
        text = str(value)
        if self.integer:
            return parse_int(text, signed=True)
        try:
            number = float(text)
        except ValueError:
            return None
        return number if math.isfinite(number) else None  # nan would pass any range test

    def get_metavar(self, param, ctx=None) -> str:
        return f"[{_show(self.low)}..{_show(self.high)}]"


def _show(value) -> str:
    """`1e6` -> `1000000`, `0.1` -> `0.1`, text as typed."""
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() else f"{value:g}"
    return str(value)


def option_name(param: click.Parameter | None) -> str:
    if param is None:
        return "value"
    if param.param_type_name == "option" and param.opts:
        return max(param.opts, key=len)  # --pid rather than -p
    return param.human_readable_name


def one_line(err: click.ClickException) -> str:
    """A click error as ktui says errors: one line, naming the option."""
    missing = isinstance(err, click.MissingParameter)  # its text is built by format_message
    if isinstance(err, click.BadParameter) and err.param is not None and not missing:
        message = err.message
        what = option_name(err.param)
        text = message if message.startswith(f"{what}: ") else f"{what}: {message}"
    else:
        text = err.format_message()
    return " ".join(text.split())
