"""Harness for bad-input tests: run ``arctl ARGS`` in-process (``arctl.cli.main.main``, the console
script's entry) against a workspace that already holds a registry, with every SLURM command on
PATH replaced by a shim that records its calls, and check the contract for a user mistake:

- exit code 2, and exactly one line of stderr starting with ``error:`` (stdout empty);
- no traceback (an exception escaping ``main`` is a failure, reported with its traceback);
- the workspace byte-identical (every file, every directory), the spec folders untouched;
- no ``sbatch`` call (nothing submitted).
"""

from __future__ import annotations

import io
import os
import sys
import traceback
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path

import slurm_shims  # tests/support/slurm_shims.py


@dataclass
class Outcome:
    code: object
    out: str
    err: str
    crash: str | None  # the traceback of an exception that escaped main()


def snapshot(root: Path) -> dict[str, bytes | None]:
    """Every path under ``root`` with its bytes (None for a directory)."""
    if not root.exists():
        return {}
    return {str(p.relative_to(root)): (None if p.is_dir() else p.read_bytes()) for p in sorted(root.rglob("*"))}


class Sandbox:
    """A workspace with a registry, a specs folder (a copy of the project's; the fixture points
    ``ARCTL_SPECS`` at it), and SLURM shims on PATH while a command runs."""

    def __init__(self, root: Path):
        self.root = root
        self.ws = root / "ws"
        self.specs = root / "specs"
        self.calls = root / "slurm-calls.log"
        shims = slurm_shims.install(root / "shims", **{
            name: f'echo "{name} $*" >> "{self.calls}"\necho "{name}: shim refuses" >&2\nexit 1\n'
            for name in slurm_shims.CLIENT_PROGRAMS})
        self.path = f"{shims}{os.pathsep}{os.environ.get('PATH', '')}"
        import shutil

        from arctl.compose.paths import PROJECT_ROOT

        for folder in ("experiments", "sweeps", "reports"):  # the project's specs, plus what a test adds
            shutil.copytree(PROJECT_ROOT / folder, self.specs / folder, dirs_exist_ok=True)
        from arctl.launch.registry import Registry
        from arctl.launch.workspace import Workspace

        with Registry(Workspace(self.ws).registry_path):
            pass
        assert (self.ws / "registry.sqlite").exists()

    def add_runs(self) -> list[str]:
        """Put two RUNNING and one FAILED SLURM runs of ``main-grpo`` into the registry (a cancel
        or resume that took an empty target for "everything" would touch them)."""
        import time

        from arctl.launch import states
        from arctl.launch.registry import Registry, RunRecord
        from arctl.launch.workspace import Workspace

        records = [RunRecord(run_id=f"main-grpo_grpo_s{i}_0000000000", experiment="main-grpo", arm="grpo", seed=i,
                             executor="slurm", scale="tiny", backend="tiny") for i in range(3)]
        with Registry(Workspace(self.ws).registry_path) as reg:
            claimed = reg.claim(records, token="t").claimed
            now = time.time()
            reg.update_many([(r.run_id, {"state": states.FAILED if i == 2 else states.RUNNING,
                                         "job_id": str(100 + i), "claim": None,
                                         "submitted_at": now, "started_at": now, "updated_at": now})
                             for i, r in enumerate(claimed)])
        return [r.run_id for r in records]

    def add_run_dirs(self) -> list[str]:
        """Launch experiment ``lt`` (3 arms, the counting test backend, the debug executor): three
        COMPLETED runs with real run folders (config.yaml, status.json). Returns their ids."""
        (self.specs / "experiments" / "lt.yaml").write_text(
            "description: three quick runs\nseeds: [0]\n"
            "overrides: [trainer.total_steps=2, wandb.mode=disabled]\n"
            "arms:\n  a: [algo=grpo, prior=base]\n  b: [algo=grpo-vr, prior=base]\n  c: [algo=anytime, prior=uniform]\n")
        saved = {k: os.environ.get(k) for k in ("ARCTL_TEST_BACKEND", "ARCTL_TEST_STEP_S")}
        os.environ.update(ARCTL_TEST_BACKEND="count", ARCTL_TEST_STEP_S="0.01")
        try:
            done = self.run("run", "lt", "--executor", "debug", "--workdir", str(self.ws), "--json")
        finally:
            for k, v in saved.items():
                os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)
        assert done.code == 0 and done.crash is None, done.err + (done.crash or "")
        import json

        return [r["run_id"] for r in json.loads(done.out)["submitted"]]

    def run(self, *args: str) -> Outcome:
        """``arctl ARGS`` in-process; argv is passed as is (no shell)."""
        from arctl.cli.main import main

        out, err = io.StringIO(), io.StringIO()
        saved_argv, saved_path = sys.argv, os.environ.get("PATH", "")
        sys.argv, os.environ["PATH"] = ["arctl", *args], self.path
        code, crash = None, None
        try:
            with redirect_stdout(out), redirect_stderr(err):
                main()
            code = 0
        except SystemExit as exit_:
            code = exit_.code
        except BaseException:  # noqa: BLE001 - a traceback a user would have seen
            crash = traceback.format_exc()
        finally:
            sys.argv, os.environ["PATH"] = saved_argv, saved_path
        return Outcome(code, out.getvalue(), err.getvalue(), crash)

    def check_refused(self, *args: str) -> Outcome:
        """Run and assert the bad-input contract; returns the outcome (for message checks)."""
        before_ws, before_specs = snapshot(self.ws), snapshot(self.specs)
        before_calls = self.calls.read_text() if self.calls.exists() else ""
        result = self.run(*args)
        shown = f"arctl {' '.join(repr(a) for a in args)}\n--- stdout\n{result.out}\n--- stderr\n{result.err}"
        assert result.crash is None, f"{shown}\n--- traceback\n{result.crash}"
        assert "Traceback (most recent call last)" not in result.err + result.out, shown
        assert result.code == 2, f"exit code {result.code!r}\n{shown}"
        lines = [line for line in result.err.splitlines() if line.strip()]
        assert len(lines) == 1 and lines[0].startswith("error:"), f"not one error line\n{shown}"
        assert snapshot(self.ws) == before_ws, f"the workspace changed\n{shown}"
        assert snapshot(self.specs) == before_specs, f"the spec folder changed\n{shown}"
        calls = (self.calls.read_text() if self.calls.exists() else "")[len(before_calls):]
        assert "sbatch" not in calls and "scancel" not in calls, f"SLURM was asked to act: {calls}\n{shown}"
        return result

    def check_survives(self, *args: str, names: str = "") -> Outcome:
        """The contract for a damaged workspace, where a command may still work: no traceback; either
        exit 0, or exit 2 with exactly one ``error:`` line (naming ``names`` when given)."""
        result = self.run(*args)
        shown = f"arctl {' '.join(repr(a) for a in args)}\n--- stdout\n{result.out[-2000:]}\n--- stderr\n{result.err}"
        assert result.crash is None, f"{shown}\n--- traceback\n{result.crash}"
        assert "Traceback (most recent call last)" not in result.err + result.out, shown
        assert result.code in (0, 2), f"exit code {result.code!r}\n{shown}"
        if result.code == 2:
            lines = [line for line in result.err.splitlines() if line.strip()]
            assert len(lines) == 1 and lines[0].startswith("error:") and names in lines[0], f"not one error line\n{shown}"
        return result


def launch_args(sandbox: Sandbox) -> list[str]:
    return ["--executor", "slurm", "--workdir", str(sandbox.ws)]
