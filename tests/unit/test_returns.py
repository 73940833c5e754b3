"""kernel/returns.py: what both engines agree on about return probes."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from ktui.kernel import returns
from ktui.lang.model import Kind


def test_every_errno_of_the_table_comes_back_as_itself():
    """errno_bucket is the C's ktui_errno_bucket; bucket_errno undoes it
    for the readers. 1..199 and the kernel's own 512..567 fit; the rest is
    counted apart."""
    fits = list(range(1, returns.ERRNO_LOW)) + \
        list(range(returns.ERRNO_HIGH_BASE, returns.ERRNO_HIGH_BASE + returns.ERRNO_BUCKETS - returns.ERRNO_LOW))
    buckets = [returns.errno_bucket(e) for e in fits]
    assert len(set(buckets)) == len(fits) and max(buckets) == returns.ERRNO_BUCKETS - 1
    assert [returns.bucket_errno(b) for b in buckets] == fits
    for outside in (returns.ERRNO_LOW, returns.ERRNO_HIGH_BASE - 1,
                    returns.ERRNO_HIGH_BASE + returns.ERRNO_BUCKETS - returns.ERRNO_LOW, 4095):
        assert returns.errno_bucket(outside) is None


def _probe(kind=Kind.RETURN, **fields):
    return SimpleNamespace(kind=kind, **fields)


@pytest.mark.parametrize("fields,mode,check", [
    ({}, returns.ERRNO_GUESS, "guessed"),  # a model without the BTF width: the old guess
    ({"errno": "", "errno_width": 4}, 4, "int"),
    ({"errno": "", "errno_width": 8}, 8, "long"),
    ({"errno": "", "errno_width": 0}, 0, "off"),
    ({"errno": "off", "errno_width": 4}, 0, "off: by the probe set"),
])
def test_errno_mode_and_what_it_is_called(fields, mode, check):
    probe = _probe(**fields)
    assert (returns.errno_mode(probe), returns.errno_check(probe)) == (mode, check)


def test_a_call_probe_counts_no_errno():
    assert returns.errno_mode(_probe(Kind.CALL)) == 0
