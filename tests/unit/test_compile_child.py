"""The generic program's compile runs in a child process
(kernel/generic/compile_child.py). On the host (no kprobes, no headers for
its kernel, or a program that does not compile) the child answers with a
one-line error, and what libbcc prints, on fd 1 or fd 2, lands in the log,
never in the answer. The successful compile is proven in the VM
(tests/kernel/test_generic.py)."""

from __future__ import annotations

import os

import pytest

from ktui.kernel.generic.compile_child import compile_in_child

# python3-bpfcc, which `make test` installs: without it this test must fail,
# not pass on a "no module named bcc" that also starts with the same words
import bcc  # noqa: E402,F401


def test_a_failed_compile_is_one_line_and_the_chatter_goes_to_the_log(tmp_path):
    log = tmp_path / "ktui.log"
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        with pytest.raises(RuntimeError) as caught:
            compile_in_child("int broken(void *ctx) { return ; ", "key", fd)
    finally:
        os.close(fd)
    message = str(caught.value)
    assert message.startswith("compiling the generic program: ")
    assert "\n" not in message
    assert "Failed to compile BPF module" in message  # bcc's own words: it ran
    assert log.read_text().strip()  # bcc / clang said why, into the log
