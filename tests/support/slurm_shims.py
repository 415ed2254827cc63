"""Stand-ins for SLURM's programs, for tests that must pass where SLURM was never installed.

A test that shims one SLURM program must shim every program the code under test looks up: where
SLURM's packages are installed, the rest would come from ``/usr/bin`` and the test would pass there
and fail on a fresh machine (submitit's ``SlurmExecutor`` refuses to start unless ``srun`` is on
PATH, though it never runs it at submission). :func:`install` writes a shim for each of
``CLIENT_PROGRAMS``: the body a test gives, or one that records the call and fails.
``tests/support/fresh_machine.py`` hides ``ALL_PROGRAMS`` to check that no other test leans on them.
"""

from __future__ import annotations

import os
from pathlib import Path

# What arctl and submitit look up or run: sbatch (submit), srun (submitit requires it on PATH; the verl
# job body runs its nodes' tasks with it), scontrol (MaxArraySize, release of a held array, requeue,
# hostnames), squeue and sacct (states), scancel (cancel), sinfo (cluster checks).
CLIENT_PROGRAMS = ("sbatch", "srun", "scontrol", "squeue", "sacct", "scancel", "sinfo")
# SLURM's other programs and daemons (Debian's slurm-client, slurmctld, slurmd, slurmdbd, munge).
ALL_PROGRAMS = CLIENT_PROGRAMS + (
    "salloc", "sattach", "sbcast", "scrontab", "sdiag", "sprio", "sreport", "sshare", "sstat", "strigger",
    "sacctmgr", "slurmctld", "slurmd", "slurmdbd", "slurmstepd", "munge", "unmunge", "munged",
)


def install(bin_dir: Path, **bodies: str) -> Path:
    """Write an executable shim into ``bin_dir`` for every program of ``CLIENT_PROGRAMS``.

    ``bodies[name]`` is the shell body of that program's shim (after ``#!/bin/sh``); a program without
    one records its arguments in ``bin_dir/unexpected.log`` and fails ("<name>: not expected by this
    test"). Returns ``bin_dir``."""
    unknown = set(bodies) - set(CLIENT_PROGRAMS)
    if unknown:
        raise ValueError(f"not SLURM client programs: {sorted(unknown)}")
    bin_dir.mkdir(parents=True, exist_ok=True)
    for name in CLIENT_PROGRAMS:
        body = bodies.get(name)
        if body is None:
            body = (f'echo "{name} $*" >> "{bin_dir / "unexpected.log"}"\n'
                    f'echo "{name}: not expected by this test (a shim)" >&2\nexit 1\n')
        path = bin_dir / name
        path.write_text("#!/bin/sh\n" + body)
        path.chmod(0o755)
    return bin_dir


def use(bin_dir: Path, monkeypatch, **bodies: str) -> Path:
    """:func:`install` the shims and put them first on PATH for the test (``monkeypatch`` undoes it).
    The launch tests' conftest forgets the cached MaxArraySize around every test, so a shimmed
    ``scontrol`` is asked afresh. Returns ``bin_dir``."""
    install(bin_dir, **bodies)
    monkeypatch.setenv("PATH", path_with(bin_dir))
    return bin_dir


def path_with(bin_dir: Path) -> str:
    """A PATH where the shims come first and nothing else of SLURM's can be found before them."""
    return f"{bin_dir}{os.pathsep}/usr/bin{os.pathsep}/bin"
