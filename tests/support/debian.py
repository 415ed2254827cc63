"""Install Debian packages a test needs, as tests/launch/slurm/setup_slurm.sh installs SLURM's: only as
root with apt-get, one apt at a time (both hold ``/tmp/arctl-apt.lock``), the package lists refreshed
only when the install cannot find a package.

    reason = debian.install(["chromium-headless-shell"])   # None once installed, else why not
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess

LOCK = "/tmp/arctl-apt.lock"


def cannot_install() -> str | None:
    """None where this process can install Debian packages, else why not."""
    if os.geteuid() != 0:
        return "installing it needs root"
    if not shutil.which("apt-get"):
        return "there is no apt-get to install it"
    return None


def install(packages: list[str], timeout: float = 900) -> str | None:
    """``apt-get install`` ``packages`` (no recommends); None when they are installed, else why not (the
    last lines apt-get printed)."""
    reason = cannot_install()
    if reason:
        return reason
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    cmd = ["apt-get", "install", "-y", "-qq", "--no-install-recommends", *packages]
    with open(LOCK, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
        if proc.returncode != 0:  # stale or empty package lists: refresh once, then try again
            subprocess.run(["apt-get", "update", "-qq"], capture_output=True, env=env, timeout=timeout)
            proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
    if proc.returncode == 0:
        return None
    return "apt-get install failed: " + " | ".join((proc.stdout + proc.stderr).strip().splitlines()[-3:])
