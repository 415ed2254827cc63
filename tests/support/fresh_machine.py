"""Run a command as on a fresh machine: SLURM's programs, and optionally an extra's packages, absent.

    python tests/support/fresh_machine.py --scratch DIR [--slurm] [--without-extra verl] -- CMD ...

The command runs in a private mount namespace (``unshare --mount``; nothing outside it changes):

- ``--slurm``: every directory on PATH (and /usr/bin, /usr/sbin, /usr/local/bin, ...) that holds one
  of SLURM's programs (``slurm_shims.ALL_PROGRAMS``) is replaced by a view without them, so
  ``shutil.which("srun")`` is None and running ``sbatch`` is "command not found", as where SLURM's
  packages were never installed;
- ``--without-extra verl``: the packages that ``pip install -e '.[verl]'`` adds to ``.[test]``
  (verl and every requirement only it brings in, with their dist-info) vanish from site-packages, as
  after ``pip install -e '.[test]'``.

A directory is hidden in part by an overlay mount over it whose upper layer (on a tmpfs mounted at
``--scratch``) holds a whiteout for each hidden entry: those are absent, everything else keeps its path.
Needs root or unprivileged user namespaces; :func:`available` says whether this machine has them.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import stat
import subprocess
import sys
import sysconfig
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import slurm_shims  # noqa: E402

INSIDE = "ARCTL_FRESH_MACHINE"  # set in the command's environment: what is hidden
SYSTEM_BIN_DIRS = ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin")


def available() -> str | None:
    """None if a private mount namespace can be made here, else why not."""
    if not shutil.which("unshare") or not shutil.which("mount"):
        return "unshare/mount (util-linux) are not installed"
    probe = subprocess.run(["unshare", "--mount", "--propagation", "private", "true"], capture_output=True, text=True)
    if probe.returncode != 0:
        return f"cannot make a private mount namespace here: {probe.stderr.strip()}"
    return None


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _closure(requirements: list[str], extras: set[str]) -> set[str]:
    """Normalised names of every installed distribution reached from ``requirements``."""
    from importlib import metadata

    from packaging.requirements import Requirement

    seen: set[str] = set()
    todo = [(r, extras) for r in requirements]
    while todo:
        text, active = todo.pop()
        req = Requirement(text)
        if req.marker and not any(req.marker.evaluate({"extra": e}) for e in (active or {""})):
            continue
        name = _norm(req.name)
        if name in seen:
            continue
        try:
            dist = metadata.distribution(req.name)
        except metadata.PackageNotFoundError:
            continue
        seen.add(name)
        todo.extend((r, set(req.extras)) for r in dist.requires or [])
    return seen


def extra_only_distributions(extra: str, project: str = "arctl", base_extras: tuple[str, ...] = ("test",)) -> set[str]:
    """Distributions that ``project[extra]`` installs and ``project[base_extras]`` does not."""
    from importlib import metadata

    own = metadata.distribution(project).requires or []
    with_extra = _closure(own, {extra, *base_extras}) - {_norm(project)}
    without = _closure(own, set(base_extras)) - {_norm(project)}
    return with_extra - without


def site_entries(distributions: set[str]) -> set[str]:
    """The top-level names in site-packages that belong to ``distributions`` (packages, modules,
    dist-info folders, .pth files)."""
    from importlib import metadata

    def tops(dist) -> set[str]:
        return {f.parts[0] for f in dist.files or [] if f.parts[0] not in ("..", "__pycache__") and not f.parts[0].startswith("/")}

    gone: set[str] = set()
    kept: set[str] = set()  # a folder shared with a distribution that stays (google/ of protobuf) stays
    for dist in metadata.distributions():
        (gone if _norm(dist.metadata["Name"] or "") in distributions else kept).update(tops(dist))
    return gone - kept


def _hide(directory: Path, names: set[str], scratch: Path, tag: str) -> list[str]:
    """Mount an overlay over ``directory`` in which ``names`` are whited out (absent, as if never
    installed); every other entry keeps its real path (gcc finds its cc1plus from its own path, Python
    its packages from theirs). Writes inside the namespace land on the scratch tmpfs. Returns what was
    hidden."""
    present = sorted(n for n in os.listdir(directory) if n in names)
    if not present:
        return []
    upper, work = scratch / f"upper-{tag}", scratch / f"work-{tag}"
    upper.mkdir()
    work.mkdir()
    for name in present:
        os.mknod(upper / name, 0o600 | stat.S_IFCHR, os.makedev(0, 0))  # an overlay whiteout
    subprocess.run(["mount", "-t", "overlay", "overlay", "-o",
                    f"lowerdir={directory},upperdir={upper},workdir={work}", str(directory)], check=True)
    return present


def _inside(args: argparse.Namespace) -> None:
    scratch = Path(args.scratch)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "arctl-fresh", str(scratch)], check=True)
    hidden: list[str] = []
    if args.slurm:
        dirs = {Path(d).resolve() for d in (*os.environ.get("PATH", "").split(os.pathsep), *SYSTEM_BIN_DIRS) if d}
        for i, d in enumerate(sorted(d for d in dirs if d.is_dir())):
            hidden += [f"{d}/{n}" for n in _hide(d, set(slurm_shims.ALL_PROGRAMS), scratch, f"bin{i}")]
    for extra in args.without_extra:
        site = Path(sysconfig.get_paths()["purelib"])
        names = site_entries(extra_only_distributions(extra))
        hidden += [f"{site}/{n}" for n in _hide(site, names, scratch, f"site-{extra}")]
    what = (["slurm"] if args.slurm else []) + [f"extra:{e}" for e in args.without_extra]
    os.environ[INSIDE] = ",".join(what)
    if args.verbose:
        print(f"fresh_machine: hidden {len(hidden)} entries: {' '.join(hidden)}", file=sys.stderr, flush=True)
    os.execvp(args.command[0], args.command)


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scratch", required=True, help="an empty folder for the views (a tmpfs is mounted there)")
    parser.add_argument("--slurm", action="store_true", help="hide SLURM's programs")
    parser.add_argument("--without-extra", action="append", default=[], help="hide what this extra of arctl installs")
    parser.add_argument("--verbose", action="store_true", help="name what was hidden on stderr")
    parser.add_argument("--inside", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("command", nargs="+")
    args = parser.parse_args(argv)
    if args.inside:
        _inside(args)
        return
    why = available()
    if why:
        sys.exit(f"fresh_machine: {why}")
    os.execvp("unshare", ["unshare", "--mount", "--propagation", "private", sys.executable, __file__, "--inside",
                          *argv])


if __name__ == "__main__":
    main(sys.argv[1:])
