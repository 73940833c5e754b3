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
    base = {"errno": "", "errno_width": None, "return_class": ""}
    return SimpleNamespace(kind=kind, **{**base, **fields})


@pytest.mark.parametrize("fields,mode,check", [
    ({}, 0, "off: no BTF"),  # no BTF to ask, nothing asked: nothing claimed
    ({"errno": "on"}, returns.ERRNO_GUESS, "guessed"),  # asked for without BTF: the old guess
    ({"errno_width": 4, "return_class": "int"}, 4, "int"),
    ({"errno_width": 8, "return_class": "long"}, 8, "long"),
    ({"errno_width": 8, "return_class": "pointer"}, 8, "pointer"),
    ({"errno_width": 0, "return_class": "void"}, 0, "off: void"),
    ({"errno": "on", "errno_width": 0, "return_class": "void"}, 0, "off: void"),
    ({"errno": "off", "errno_width": 4, "return_class": "int"}, 0, "off: by the probe set"),
])
def test_errno_mode_and_what_it_is_called(fields, mode, check):
    """Both engines' mode is lang.errnos' (BTF's return type decides), with
    its no-BTF guess as the kernel's ERRNO_GUESS."""
    probe = _probe(**fields)
    assert (returns.errno_mode(probe), returns.errno_check(probe)) == (mode, check)


def test_a_call_probe_counts_no_errno():
    assert returns.errno_mode(_probe(Kind.CALL)) == 0
