"""What code launched a run: ``provenance.json`` next to the run's ``config.yaml``.

    {"arctl_version": "0.1.0", "git_commit": "<40 hex>" | null, "git_dirty": true | false | null,
     "code_sha256": "<64 hex>",
     "plugins": [{"group": "arctl.methods", "name": "shortbonus", "package": "arctl-myidea" | null,
                  "version": "0.2.0" | null, "code_sha256": "<64 hex>" | null}, ...],
     "specs": [{"kind": "experiment" | "sweep", "name": "main-grpo", "origin": "shipped" | "project" | "$ARCTL_SPECS",
                "path": "<absolute>", "sha256": "<64 hex>"}, ...],
     "created_at": <unix time>,
     "resumed": [{"arctl_version": ..., "git_commit": ..., "git_dirty": ..., "code_sha256": ..., "plugins": [...],
                  "at": <unix time>}, ...],
     "attempts": [{"arctl_version": ..., "git_commit": ..., "git_dirty": ..., "code_sha256": ..., "plugins": [...],
                   "attempt": <n>, "submission": <k>, "at": <unix time>}, ...]}

The top-level fields name the code that launched the run (``code_sha256``: :func:`code_hash`, arctl's own
files; ``plugins``: :func:`run_plugins`, the code of an installed package the run uses, its
``budget_control.method`` and its backend where they are not arctl's: a run trained with an older version of
a plugin was reused unnoticed, from a hunt; absent where the run's config could not be read, and in a
record written before arctl recorded plugins, which is not judged on them); ``resumed``
(absent until the first resume) lists the code of every resume after it, in order, so a run whose later
steps ran under another commit says so. ``specs`` names the spec files the run was composed from (its experiment's
and, for a sweep's cell, the sweep's: :func:`spec_files_read`; from a hunt: a user's copy and the shipped spec of one
name were told apart by nothing a run kept; absent in a record of an arctl before it). All of these are written at
submission; ``attempts`` (absent until
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

import functools
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
    only flags, or an installed copy without git) are told apart by it (from a hunt). ``root``: another
    package's folder (a plugin's: :func:`run_plugins`), or one module's file."""
    import hashlib

    root = Path(root) if root is not None else Path(arctl.__file__).resolve().parent
    files = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.suffix in CODE_SUFFIXES
                                                 and p.is_file() and "__pycache__" not in p.parts)
    digest = hashlib.sha256()
    for path in files:
        digest.update((path.name if path == root else path.relative_to(root).as_posix()).encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()


def run_plugins(config: dict) -> list[dict]:
    """The plugins a run of ``config`` uses: its ``budget_control.method`` (``arctl.methods``) and the backend
    that trains it (``arctl.backends``; a ``module:attribute`` backend too), each where it is not arctl's own
    code (a built-in is in ``code_sha256``): ``{group, name, package, version, code_sha256}``, the installed
    distribution that declares it (package and version: null where none does) and :func:`code_hash` of the
    code its entry point loads (the top package of the module, or the module's file; null where it cannot be
    found). Never fails a launch: a plugin that cannot be resolved is left out (choosing it fails the run's
    validation, or its job, by itself)."""
    from arctl.algo.methods import registry
    from arctl.backends import base
    from arctl.launch.backends import backend_name

    control = config.get("budget_control") if isinstance(config.get("budget_control"), dict) else {}
    chosen = [(registry.ENTRY_POINT_GROUP, registry.BUILTIN, control.get("method")),
              (base.ENTRY_POINT_GROUP, base.BUILTIN, backend_name(config))]
    out = []
    for group, builtin, name in chosen:
        if not isinstance(name, str) or name in builtin:
            continue
        try:
            target = name if ":" in name else registry.plugin_table(builtin, group)[0].get(name)
            if target is None or target.partition(":")[0].split(".")[0] == arctl.__name__:
                continue
            package, version = _distribution(group, name, target)
            out.append({"group": group, "name": name, "package": package, "version": version,
                        "code_sha256": _module_code_hash(target.partition(":")[0])})
        except Exception:  # noqa: BLE001 - a record of the code, never a launch's (or a job's) failure
            continue
    return out


@functools.cache
def _distribution(group: str, name: str, target: str) -> tuple[str | None, str | None]:
    """(package, version) of the installed distribution that declares ``group``'s entry point ``name``, as the
    registry read the entry points (:func:`arctl.algo.methods.registry.plugin_package`), or of the distribution
    holding a ``module:attribute`` target's top package; (None, None) where none does. Read once per process."""
    from importlib import metadata

    from arctl.algo.methods import registry

    if ":" in name:
        names = metadata.packages_distributions().get(target.partition(":")[0].split(".")[0]) or []
    else:
        names = [package] if (package := registry.plugin_package(group, name)) else []
    try:
        dist = metadata.distribution(names[0]) if names else None
    except metadata.PackageNotFoundError:
        return None, None
    return (str(dist.metadata["Name"]), str(dist.version)) if dist is not None else (None, None)


def _module_code_hash(module: str) -> str | None:
    """:func:`code_hash` of ``module``'s code: its first regular package along its dotted path (the whole
    installed package, whose other modules it may import), or its own file; None where it is not found."""
    import importlib.util

    parts = module.split(".")
    for i in range(1, len(parts) + 1):
        spec = importlib.util.find_spec(".".join(parts[:i]))
        if spec is None:
            return None
        origin = Path(spec.origin) if spec.origin and spec.has_location else None
        if origin is not None and origin.is_file():  # a regular package (its __init__) or a module
            return code_hash(origin.parent if spec.submodule_search_locations is not None else origin)
    return None  # a namespace package down to the module itself


def run_code(run_dir: str | Path, version: dict | None = None) -> dict:
    """The code a run of ``run_dir`` runs: ``version`` (default :func:`code_version`, asked now) and the
    plugins of its config.yaml (:func:`run_plugins`; none where the config cannot be read; a ``version`` that
    names its ``plugins`` keeps them)."""
    from arctl.launch.rundir import RunDirError, read_run_config

    version = dict(version) if version is not None else code_version()
    if "plugins" in version:
        return version
    try:
        config = read_run_config(Path(run_dir))
    except RunDirError:
        return version
    return {**version, "plugins": run_plugins(config)}


def provenance(version: dict | None = None) -> dict:
    """The content of a new run's provenance.json (``version``: from :func:`code_version`, or :func:`run_code`)."""
    return {**(version if version is not None else code_version()), "created_at": time.time()}


def spec_files_read(experiment: str, sweep: str | None = None, seen: dict | None = None) -> list[dict]:
    """Where the spec files of a run of ``experiment`` (in ``sweep``) are read from, as the launch's composition found
    them (the spec search path, :func:`arctl.compose.paths.find_spec`): kind, name, origin, path and the sha256 of
    its bytes; ``seen``: a launch's cache (name -> entry), each file hashed once."""
    import hashlib

    from arctl.compose.paths import find_spec

    seen = {} if seen is None else seen
    out = []
    for kind, name in (("experiment", experiment), ("sweep", sweep)):
        if not name:
            continue
        if (kind, name) not in seen:
            found = find_spec(f"{kind}s", name)
            try:
                sha = hashlib.sha256(found.path.read_bytes()).hexdigest() if found is not None else None
            except OSError:
                sha = None
            seen[kind, name] = None if found is None else {"kind": kind, "name": name, "origin": found.origin,
                                                          "path": str(found.path), "sha256": sha}
        if seen[kind, name] is not None:
            out.append(seen[kind, name])
    return out


def write_provenance(run_dir: str | Path, version: dict | None = None, specs: list[dict] | None = None) -> dict:
    """Write ``run_dir/provenance.json`` (atomically; ``version`` and the run's plugins: :func:`run_code`; ``specs``:
    :func:`spec_files_read`, where given); returns what was written."""
    info = provenance(run_code(run_dir, version))
    if specs is not None:
        info = {**info, "specs": specs}
    atomic_write(Path(run_dir) / PROVENANCE_FILE, json.dumps(info, indent=2) + "\n")
    return info


def record_resume(run_dir: str | Path, version: dict | None = None) -> dict:
    """Append this resume's code version (:func:`run_code`) to ``run_dir/provenance.json`` (atomically; a run
    launched before arctl wrote provenance gets a file with only ``resumed``); returns what was written."""
    info = read_provenance(run_dir) or {}
    resumed = info.get("resumed") if isinstance(info.get("resumed"), list) else []
    version = run_code(run_dir, version)
    info["resumed"] = [*resumed, {**version, "at": time.time()}]
    atomic_write(Path(run_dir) / PROVENANCE_FILE, json.dumps(info, indent=2) + "\n")
    return info


def record_attempt(run_dir: str | Path, attempt: int | None = None, version: dict | None = None) -> dict:
    """Append the code this attempt of the run's job starts with (:func:`run_code`; ``version``: default
    :func:`code_version`, asked now) to ``attempts`` in ``run_dir/provenance.json`` (atomically; the job's, at
    each attempt's start); returns what was written."""
    info = read_provenance(run_dir) or {}
    attempts = info.get("attempts") if isinstance(info.get("attempts"), list) else []
    resumed = info.get("resumed") if isinstance(info.get("resumed"), list) else []
    version = run_code(run_dir, version)
    info["attempts"] = [*attempts, {**version, "attempt": attempt, "submission": len(resumed), "at": time.time()}]
    atomic_write(Path(run_dir) / PROVENANCE_FILE, json.dumps(info, indent=2) + "\n")
    return info


def same_code(a: dict, b: dict) -> bool:
    """Whether two code records (:func:`run_code`'s) name the same code: arctl's by ``code_sha256`` where both
    have one (a commit that changed none of arctl's code, or git that did not answer in time, changes no code),
    else by arctl's version, commit, dirty flag and hash; and, where both recorded ``plugins``, the same
    plugins (:func:`same_plugins`)."""
    if not same_plugins(a, b):
        return False
    if a.get("code_sha256") and b.get("code_sha256"):
        return a["code_sha256"] == b["code_sha256"]

    def key(p: dict) -> tuple:
        return p.get("arctl_version"), p.get("git_commit"), bool(p.get("git_dirty")), p.get("code_sha256")

    return key(a) == key(b)


def same_plugins(a: dict, b: dict) -> bool:
    """Whether two code records name the same plugins (``plugins``: :func:`run_plugins`), each by its group,
    name and ``code_sha256`` where both have one (a version that changed none of its code changes no code),
    else by its package and version; True where either record has none (written before arctl recorded them)."""
    if not isinstance(a.get("plugins"), list) or not isinstance(b.get("plugins"), list):
        return True

    def table(p: dict) -> dict:
        return {(q.get("group"), q.get("name")): q for q in p["plugins"] if isinstance(q, dict)}

    ta, tb = table(a), table(b)
    if ta.keys() != tb.keys():
        return False
    for k, pa in ta.items():
        pb = tb[k]
        if pa.get("code_sha256") and pb.get("code_sha256"):
            if pa["code_sha256"] != pb["code_sha256"]:
                return False
        elif (pa.get("package"), pa.get("version"), pa.get("code_sha256")) != (pb.get("package"), pb.get("version"),
                                                                             pb.get("code_sha256")):
            return False
    return True


def plugins_changed(info: dict | None, config: dict) -> str | None:
    """Where the plugins a completed run (its provenance.json ``info``) last ran differ from those a run of
    ``config`` would import now (:func:`run_plugins`): a few words naming each, e.g. ``its method 'halve' ran
    arctl-test-plugins 0.1 and is 0.2 now``; None where they are the same (:func:`same_plugins`), where the run
    recorded none (a run from before plugins were recorded) or where ``config`` uses none. A plugin's version is
    not part of a run id (from a hunt: after an upgrade that changed a method's formula the plan said "skip
    completed", and `--force` was the only way to a run of the new code, which nothing suggested)."""
    from arctl.algo.methods import registry

    history = code_history(info) if isinstance(info, dict) else []
    ran = next((p for _, p in reversed(history) if isinstance(p.get("plugins"), list)), None)
    if ran is None:
        return None
    now = {"plugins": run_plugins(config)}
    if not now["plugins"] and not ran["plugins"]:
        return None
    if same_plugins(ran, now):
        return None
    before = {(q.get("group"), q.get("name")): q for q in ran["plugins"] if isinstance(q, dict)}
    words = []

    def kind(group) -> str:
        return "method" if group == registry.ENTRY_POINT_GROUP else "backend"

    def shown(r: dict) -> str:
        return f"{r.get('package') or 'its code'} {r.get('version') or ''}".strip()

    for q in now["plugins"]:
        old = before.pop((q["group"], q["name"]), None)
        if old is None:
            words.append(f"its {kind(q['group'])} {q['name']!r} ran no plugin code and is {shown(q)} now")
        elif same_plugins({"plugins": [old]}, {"plugins": [q]}):
            continue  # (from a hunt: a plugin exactly as it ran was said to have changed, beside the one that had)
        elif (old.get("package"), old.get("version")) != (q.get("package"), q.get("version")):
            words.append(f"its {kind(q['group'])} {q['name']!r} ran {shown(old)} and is {shown(q)} now")
        else:
            words.append(f"the code of its {kind(q['group'])} {q['name']!r} ({shown(q)}) changed since it ran")
    for (group, name), old in before.items():  # the plugins it ran that cannot be resolved now (run_plugins)
        words.append(f"its {kind(group)} {name!r} ({shown(old)}) is not installed now")
    return "; ".join(words) or "the plugins it ran are not installed now"


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
    other code than its submission (the launch or the resume it belongs to) recorded: an edit (of arctl, or of
    a plugin the run uses: :func:`same_code`) while it waited in a queue. An attempt of a submission that recorded no code (a launch before provenance) is not judged."""
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
