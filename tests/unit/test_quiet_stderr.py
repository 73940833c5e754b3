"""ktui's own stderr lines survive libbcc's fd 2 being diverted.

The generic program compiles in a background thread inside
`captured_stderr` (fd 2 -> a spool -> the log) while `stream` already runs;
a summary printed in that window once went to the log instead of the user.
"""

from __future__ import annotations

import subprocess
import sys

SCRIPT = r"""
import os, sys
from ktui.kernel import quiet
log = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
if sys.argv[2] == "apart":
    quiet.keep_stderr_apart()
with quiet.captured_stderr(log):
    os.write(2, b"from libbcc\n")
    print("ktui: summary", file=sys.stderr)
"""


def run(tmp_path, mode: str) -> tuple[str, str]:
    log = tmp_path / f"{mode}.log"
    out = subprocess.run([sys.executable, "-c", SCRIPT, str(log), mode], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stderr, log.read_text()


def test_own_lines_reach_the_user_while_fd2_is_diverted(tmp_path):
    err, log = run(tmp_path, "apart")
    assert err == "ktui: summary\n"
    assert "from libbcc" in log and "summary" not in log


def test_without_it_they_went_to_the_log(tmp_path):
    """The control: the failure the fix is for."""
    err, log = run(tmp_path, "plain")
    assert "summary" not in err and "ktui: summary" in log
