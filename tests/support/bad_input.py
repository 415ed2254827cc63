"""Harness for bad-input tests: run ``arctl ARGS`` in-process (``arctl.cli.main.main``, the console
script's entry) against a workspace that already holds a registry, with every SLURM command on
PATH replaced by a shim that records its calls, and check the contract for a user mistake:

- exit code 2, and exactly one line of stderr starting with ``error:`` (stdout empty);
- no traceback (an exception escaping ``main`` is a failure, reported with its traceback);
- the workspace byte-identical (every file, every directory), the spec folders untouched;
- no ``sbatch`` call (nothing submitted).
"""

from __future__ import annotations

import atexit
import hashlib
import io
import os
import shutil
import sys
import tempfile
import traceback
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path

import slurm_shims  # tests/support/slurm_shims.py

LT_SPEC = ("description: three quick runs\nseeds: [0]\n"
           "overrides: [trainer.total_steps=2, wandb.mode=disabled]\n"
           "arms:\n  a: [algo=grpo, prior=base]\n  b: [algo=grpo-vr, prior=base]\n  c: [algo=anytime, prior=uniform]\n")
# add_run_dirs' workspaces, one per set of inputs in this process: {key: (workspace, its sandbox's root, run ids)}
_RUN_DIRS: dict[tuple, tuple[Path, Path, tuple[str, ...]]] = {}


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
        COMPLETED runs with real run folders (config.yaml, status.json). Returns their ids.

        ~120 tests start from these runs and the launch costs 0.5-1 s, so a process launches once for each
        set of inputs (the specs' bytes, arctl's environment, the fresh registry) and later sandboxes get a
        copy of that workspace, its paths rewritten to theirs (tests/cli/test_bad_input_harness.py checks that
        a copy reads as the launch does). A sandbox whose workspace is no longer fresh gets a launch."""
        (self.specs / "experiments" / "lt.yaml").write_text(LT_SPEC)
        key = self._run_dirs_key()
        made = _RUN_DIRS.get(key) if key else None
        if made:
            self._copy_run_dirs(*made[:2])
            return list(made[2])
        ids = self._launch_run_dirs()
        if key:
            keep = Path(tempfile.mkdtemp(prefix="arctl-test-run-dirs-"))
            atexit.register(shutil.rmtree, keep, True)
            shutil.copytree(self.ws, keep / "ws", symlinks=True)
            _RUN_DIRS[key] = (keep / "ws", self.root, tuple(ids))
        return ids

    def _run_dirs_key(self) -> tuple | None:
        """What a launch of ``lt`` reads besides arctl's code: the specs, the environment, and the workspace (None
        where it holds more than the fresh registry: a test changed it, so it gets a launch of its own)."""
        if sorted(os.listdir(self.ws)) != ["registry.sqlite"]:
            return None
        digest = hashlib.sha256((self.ws / "registry.sqlite").read_bytes())
        for path in sorted(self.specs.rglob("*")):
            if path.is_file():
                digest.update(f"\0{path.relative_to(self.specs)}\0".encode() + path.read_bytes())
        env = tuple(sorted((k, v) for k, v in os.environ.items()
                           if k.startswith(("ARCTL_", "WANDB_", "SUBMITIT_")) and k != "ARCTL_SPECS"))
        return digest.hexdigest(), env, self.path.split(os.pathsep, 1)[1]

    def _copy_run_dirs(self, made: Path, made_root: Path) -> None:
        """The workspace ``made`` (launched in the sandbox at ``made_root``) as this sandbox's, every file's mention
        of ``made_root`` now of this one's root."""
        shutil.rmtree(self.ws)
        shutil.copytree(made, self.ws, symlinks=True)
        old, new = os.fsencode(made_root), os.fsencode(self.root)
        for path in self.ws.rglob("*"):
            if path.is_file() and not path.is_symlink():
                data = path.read_bytes()
                if old in data:
                    assert path.name != "registry.sqlite", "a path in the registry: a copy cannot rewrite it"
                    stat = path.stat()
                    path.write_bytes(data.replace(old, new))
                    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))

    def _launch_run_dirs(self) -> list[str]:
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
