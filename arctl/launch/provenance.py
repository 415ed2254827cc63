"""What code launched a run: ``provenance.json`` next to the run's ``config.yaml``.

    {"arctl_version": "0.1.0", "git_commit": "<40 hex>" | null, "git_dirty": true | false | null,
     "code_sha256": "<64 hex>", "created_at": <unix time>,
     "resumed": [{"arctl_version": ..., "git_commit": ..., "git_dirty": ..., "code_sha256": ..., "at": <unix time>}, ...],
     "attempts": [{"arctl_version": ..., "git_commit": ..., "git_dirty": ..., "code_sha256": ...,
                   "attempt": <n>, "submission": <k>, "at": <unix time>}, ...]}

The top-level fields name the code that launched the run (``code_sha256``: :func:`code_hash`); ``resumed``
(absent until the first resume) lists the code of every resume after it, in order, so a run whose later
steps ran under another commit says so. All of these are written at submission; ``attempts`` (absent until
the run's job first starts) lists the code each attempt of its job started with, written by the job itself
(:func:`record_attempt`): a job that waited in a queue imports the arctl code on disk when it starts, which an
edit made meanwhile changed (from a hunt: 3 of 13 runs of a sweep ran an edited evaluation, and provenance
said one code for all). ``submission`` is the submission the attempt belongs to: 0 the launch, k the k-th
entry of ``resumed``.

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


def record_attempt(run_dir: str | Path, attempt: int | None = None, version: dict | None = None) -> dict:
    """Append the code this attempt of the run's job starts with (``version``: default :func:`code_version`,
    asked now) to ``attempts`` in ``run_dir/provenance.json`` (atomically; the job's, at each attempt's start);
    returns what was written."""
    info = read_provenance(run_dir) or {}
    attempts = info.get("attempts") if isinstance(info.get("attempts"), list) else []
    resumed = info.get("resumed") if isinstance(info.get("resumed"), list) else []
    version = version if version is not None else code_version()
    info["attempts"] = [*attempts, {**version, "attempt": attempt, "submission": len(resumed), "at": time.time()}]
    atomic_write(Path(run_dir) / PROVENANCE_FILE, json.dumps(info, indent=2) + "\n")
    return info


def same_code(a: dict, b: dict) -> bool:
    """Whether two code records (:func:`code_version`'s) name the same code: by ``code_sha256`` where both have
    one (a commit that changed none of arctl's code, or git that did not answer in time, changes no code), else
    by arctl's version, commit, dirty flag and hash."""
    if a.get("code_sha256") and b.get("code_sha256"):
        return a["code_sha256"] == b["code_sha256"]

    def key(p: dict) -> tuple:
        return p.get("arctl_version"), p.get("git_commit"), bool(p.get("git_dirty")), p.get("code_sha256")

    return key(a) == key(b)


def code_history(info: dict) -> list[tuple[str, dict]]:
    """A run's code records (of its provenance.json) in order: ``("launched", info)`` where the launch recorded
    one, then per submission (the launch, then each of ``resumed`` as ``("resumed", r)``) the attempts its job
    started (``("attempt", a)``)."""
    def listed(name: str) -> list[dict]:
        items = info.get(name)
        return [p for p in items if isinstance(p, dict)] if isinstance(items, list) else []

    resumed, attempts = listed("resumed"), listed("attempts")

    def submission(a: dict) -> int:
        k = a.get("submission")
        return min(max(k, 0), len(resumed)) if isinstance(k, int) and not isinstance(k, bool) else len(resumed)

    out: list[tuple[str, dict]] = [("launched", info)] if "arctl_version" in info else []
    for k in range(len(resumed) + 1):
        if k:
            out.append(("resumed", resumed[k - 1]))
        out += [("attempt", a) for a in attempts if submission(a) == k]
    return out


def started_other_code(info: dict) -> list[tuple[dict, dict]]:
    """(submitted, started) for each attempt of a run (its provenance.json ``info``) whose job started with
    other code than its submission (the launch or the resume it belongs to) recorded: an edit while it waited
    in a queue. An attempt of a submission that recorded no code (a launch before provenance) is not judged."""
    out, submitted = [], None
    for kind, p in code_history(info):
        if kind != "attempt":
            submitted = p
        elif submitted is not None and not same_code(submitted, p):
            out.append((submitted, p))
    return out


def read_provenance(run_dir: str | Path) -> dict | None:
    """The run's provenance.json, or None when it has none (a run launched before arctl wrote it)
    or it is unreadable."""
    try:
        data = json.loads((Path(run_dir) / PROVENANCE_FILE).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None
