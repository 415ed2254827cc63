"""A command whose reader went away (``arctl status | head -1``) exits as a shell says such a command did: 141
(128 + SIGPIPE), not 1, which a script cannot tell from a failed command; and it prints no traceback."""

from __future__ import annotations

import os
import subprocess
import sys

from arctl.cli.common import CLOSED_OUTPUT_EXIT


def _arctl_into_a_closed_pipe(*args: str) -> subprocess.CompletedProcess:
    read, write = os.pipe()
    os.close(read)  # the reader is gone before arctl writes its first line
    try:
        return subprocess.run([sys.executable, "-c", "from arctl.cli.main import main; main()", *args],
                              stdout=write, stderr=subprocess.PIPE, text=True, timeout=120)
    finally:
        os.close(write)


def test_a_closed_output_exits_141_without_a_traceback():
    proc = _arctl_into_a_closed_pipe("ls", "experiments")  # written by click's echo and print
    assert proc.returncode == CLOSED_OUTPUT_EXIT == 141, proc.stderr
    assert "Traceback" not in proc.stderr and "Error" not in proc.stderr, proc.stderr


def test_a_closed_output_exits_141_where_rich_writes_too(tmp_path):
    """Most of arctl's output goes through rich, which answers a closed pipe with its own exit (1, before; from a
    review: `arctl status | head -1` still exited 1): a dry run's first line is rich's."""
    proc = _arctl_into_a_closed_pipe("run", "main-grpo", "--scale", "tiny", "--executor", "local", "--dry-run",
                                     "--workdir", str(tmp_path / "ws"))
    assert proc.returncode == CLOSED_OUTPUT_EXIT, proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr


def test_an_open_output_still_exits_0_and_a_user_mistake_2():
    proc = subprocess.run([sys.executable, "-c", "from arctl.cli.main import main; main()", "ls", "experiments"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and "ablation-vr" in proc.stdout, proc.stderr
    bad = _arctl_into_a_closed_pipe("ls", "no-such-kind")  # the error goes to stderr, which is open
    assert bad.returncode == 2 and bad.stderr.startswith("error:"), bad.stderr
