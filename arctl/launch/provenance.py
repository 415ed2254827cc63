"""What code launched a run: ``provenance.json`` next to the run's ``config.yaml``.

    {"arctl_version": "0.1.0", "git_commit": "<40 hex>" | null, "git_dirty": true | false | null,
     "created_at": <unix time>,
     "resumed": [{"arctl_version": ..., "git_commit": ..., "git_dirty": ..., "at": <unix time>}, ...]}

The top-level fields name the code that launched the run; ``resumed`` (absent until the first
resume) lists the code of every resume after it, in order, so a run whose later steps ran under
another commit says so.

``git_commit`` is ``git rev-parse HEAD`` of the checkout arctl is imported from, when arctl's own
files are tracked by that git work tree (an editable install or a source checkout); an installed
copy (site-packages, even inside some repository) gives null. ``git_dirty``: ``git status
--porcelain`` (untracked files ignored) is non-empty; null when git could not tell. git is asked
with a short timeout and its absence or failure never fails a launch.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from pathlib import Path

import arctl
from arctl.config.files import atomic_write

PROVENANCE_FILE = "provenance.json"
GIT_TIMEOUT_S = 3.0  # the whole git conversation, not each call
_COMMIT = re.compile(r"^(?:[0-9a-f]{40}|[0-9a-f]{64})$")  # SHA-1 or SHA-256 repositories
# a caller's repository selection must not redirect git away from arctl's own checkout
_GIT_LOCATION_ENV = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY", "GIT_COMMON_DIR",
                     "GIT_NAMESPACE", "GIT_CEILING_DIRECTORIES")


def git_state(package_dir: str | Path | None = None, timeout_s: float = GIT_TIMEOUT_S) -> tuple[str | None, bool | None]:
    """(commit, dirty) of the git work tree that tracks ``package_dir`` (default: arctl's package),
    or (None, None) when it is not in one or git is missing, refuses or is too slow."""
    package = Path(package_dir) if package_dir is not None else Path(arctl.__file__).resolve().parent
    env = {k: v for k, v in os.environ.items() if k not in _GIT_LOCATION_ENV}
    env["GIT_OPTIONAL_LOCKS"] = "0"  # `git status` must not take the index lock of a checkout in use
    env["LC_ALL"] = "C"
    deadline = time.monotonic() + timeout_s

    def git(*args: str) -> subprocess.CompletedProcess:
        left = deadline - time.monotonic()
        if left <= 0:
            raise subprocess.TimeoutExpired(["git", *args], timeout_s)
        return subprocess.run(["git", "-C", str(package), *args], capture_output=True, text=True, env=env,
                              stdin=subprocess.DEVNULL, timeout=left)

    try:
        # tracked here: arctl is imported from this work tree (an installed copy inside a repo is not)
        if git("ls-files", "--error-unmatch", "--", "__init__.py").returncode != 0:
            return None, None
        head = git("rev-parse", "--verify", "HEAD")
        commit = head.stdout.strip()
        if head.returncode != 0 or not _COMMIT.match(commit):
            return None, None
        status = git("status", "--porcelain", "--untracked-files=no")
        dirty = bool(status.stdout.strip()) if status.returncode == 0 else None
        return commit, dirty
    except (OSError, subprocess.SubprocessError):
        return None, None


def code_version() -> dict:
    """arctl's version, git state and the hash of its code (ask once per launch, then :func:`provenance` per run)."""
    commit, dirty = git_state()
    return {"arctl_version": arctl.__version__, "git_commit": commit, "git_dirty": dirty, "code_sha256": code_hash()}


CODE_SUFFIXES = (".py", ".yaml")  # what arctl computes with (its shipped warm-up has its own sha256 in warmup.json)


def code_hash(root: Path | None = None) -> str:
    """sha256 over the arctl package's code files (``CODE_SUFFIXES``: relative path and bytes, in path order):
    two runs of one run id whose numbers differ because the code did (an uncommitted edit, which ``git_dirty``
    only flags, or an installed copy without git) are told apart by it (from a hunt)."""
    import hashlib

    root = Path(root) if root is not None else Path(arctl.__file__).resolve().parent
    digest = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.suffix in CODE_SUFFIXES and p.is_file()
                       and "__pycache__" not in p.parts):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()


def provenance(version: dict | None = None) -> dict:
    """The content of a new run's provenance.json (``version``: from :func:`code_version`)."""
    return {**(version if version is not None else code_version()), "created_at": time.time()}


def write_provenance(run_dir: str | Path, version: dict | None = None) -> dict:
    """Write ``run_dir/provenance.json`` (atomically); returns what was written."""
    info = provenance(version)
    atomic_write(Path(run_dir) / PROVENANCE_FILE, json.dumps(info, indent=2) + "\n")
    return info


def record_resume(run_dir: str | Path, version: dict | None = None) -> dict:
    """Append this resume's code version to ``run_dir/provenance.json`` (atomically; a run launched
    before arctl wrote provenance gets a file with only ``resumed``); returns what was written."""
    info = read_provenance(run_dir) or {}
    resumed = info.get("resumed") if isinstance(info.get("resumed"), list) else []
    version = version if version is not None else code_version()
    info["resumed"] = [*resumed, {**version, "at": time.time()}]
    atomic_write(Path(run_dir) / PROVENANCE_FILE, json.dumps(info, indent=2) + "\n")
    return info


def read_provenance(run_dir: str | Path) -> dict | None:
    """The run's provenance.json, or None when it has none (a run launched before arctl wrote it)
    or it is unreadable."""
    try:
        data = json.loads((Path(run_dir) / PROVENANCE_FILE).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None
