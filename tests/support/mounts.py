"""Run a command where a folder is read-only, or on a full disk, without touching the machine: a
private mount namespace (``unshare --mount``) in which the folder is bound read-only, or replaced by
a small tmpfs holding a copy of it and filled up. Needs root or user namespaces
(:func:`fresh_machine.available` says why not)."""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

FILL = "fill.bin"  # the file that fills a full tmpfs (ignored when comparing the folder)


def run(cmd: list[str], *, read_only: Path | None = None, full: Path | None = None, size_kib: int = 2048,
        env: dict | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    """``cmd`` with ``read_only`` bound read-only, or ``full`` copied onto a ``size_kib`` tmpfs and filled to
    its last byte. What the command wrote to ``full`` is copied back to ``full/../<name>.after`` so a
    test can see what was left behind (temp files)."""
    steps = ["set -e"]
    if read_only is not None:
        p = shlex.quote(str(read_only))
        steps += [f"mount --bind {p} {p}", f"mount -o remount,bind,ro {p}"]
    if full is not None:
        p, after = shlex.quote(str(full)), shlex.quote(str(full.parent / f"{full.name}.after"))
        steps += ["tmp=$(mktemp -d)", f"cp -a {p}/. $tmp/", f"mount -t tmpfs -o size={size_kib}k arctl-full {p}",
                  f"cp -a $tmp/. {p}/", "rm -rf $tmp", f"dd if=/dev/zero of={p}/{FILL} bs=4k 2>/dev/null || true",
                  f"dd if=/dev/zero of={p}/{FILL}.tail bs=1 2>/dev/null || true"]
    script = "\n".join(steps) + '\nset +e\n"$@"\nrc=$?\n'
    if full is not None:
        script += (f"rm -rf {after}; mkdir -p {after}; cp -a {p}/. {after}/; "
                   f"rm -f {after}/{FILL} {after}/{FILL}.tail\n")
    script += "exit $rc\n"
    return subprocess.run(["unshare", "--mount", "--propagation", "private", "bash", "-c", script, "mounts", *cmd],
                          capture_output=True, text=True, env=env, timeout=timeout)
