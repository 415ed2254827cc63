"""Launch-layer speed: `arctl status` over a 1,000-run workspace, and submitting a 100-cell sweep.

    python benchmarks/bench_launch.py [--runs 1000] [--cells 100] [--repeat 5]

1. status: a workspace with ``--runs`` runs (10% RUNNING on SLURM with fake job ids, the rest
   finished) timed end to end (`arctl status`, a fresh process: imports + registry + refresh +
   table), plus the in-process refresh. A ``sacct`` wrapper first on PATH counts the scheduler
   calls: the refresh must make ONE call for all job ids.
2. submit (needs SLURM): ``--cells`` runs (varying seeds of one resolved config, so the spec layer
   is timed separately) go through ``launch()`` — claim, run dirs, one ``sbatch`` of one array —
   then the array is cancelled. Also times ``resolve_sweep`` of a 100-cell grid sweep (spec layer).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _args import positive_int  # benchmarks/ (the script's folder is on sys.path)

CPU_TIMES: dict[str, float] = {}


def _median_time(cmd: list[str], env: dict, repeat: int) -> tuple[float, subprocess.CompletedProcess]:
    """Median wall time of ``cmd``; its median CPU time (user+sys, load-independent) goes to CPU_TIMES."""
    import resource

    times, cpus, last = [], [], None
    for _ in range(repeat):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        last = subprocess.run(cmd, capture_output=True, text=True, env=env)
        times.append(time.perf_counter() - t0)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
        if last.returncode != 0:
            raise SystemExit(f"{cmd} failed: {last.stderr}")
    CPU_TIMES[" ".join(cmd[3:5] + cmd[6:])] = statistics.median(cpus)
    return statistics.median(times), last


def bench_status(root: Path, n_runs: int, repeat: int) -> dict:
    from arctl.launch import states
    from arctl.launch.refresh import refresh
    from arctl.launch.registry import Registry, RunRecord, new_claim_token
    from arctl.launch.status_file import write_status
    from arctl.launch.workspace import Workspace

    ws = Workspace(root / "ws-status")
    now = time.time()
    with Registry(ws.registry_path) as reg:
        recs = [RunRecord(run_id=f"exp{i % 10}_arm{i % 7}_s{i % 3}_{i:010d}", experiment=f"exp{i % 10}",
                          arm=f"arm{i % 7}", seed=i % 3) for i in range(n_runs)]
        reg.claim(recs, new_claim_token(), members=["big-sweep"])
        updates = []
        for i, rec in enumerate(recs):
            active = i % 10 == 0
            updates.append((rec.run_id, {
                "state": states.RUNNING if active else states.COMPLETED, "executor": "slurm",
                "job_id": f"{990000 + i}_0", "claim": None, "submitted_at": now - 3600, "started_at": now - 3000,
                "ended_at": None if active else now - 60, "step": i, "metric_name": "train/anytime_score",
                "metric_value": 0.5, "wandb_id": rec.run_id}))
            if active:
                ws.run_dir(rec.run_id).mkdir(parents=True, exist_ok=True)
                write_status(ws.run_dir(rec.run_id), state="running", step=i, pid=1)
        reg.update_many(updates)
    # count scheduler calls with a sacct wrapper first on PATH
    shim = root / "shim"
    shim.mkdir(exist_ok=True)
    real = shutil.which("sacct")
    calls = root / "sacct-calls.log"
    body = f'echo "$@" >> {calls}\n' + (f'exec {real} "$@"\n' if real else 'echo "JobID|State"\n')
    (shim / "sacct").write_text("#!/bin/sh\n" + body)
    (shim / "sacct").chmod(0o755)
    env = {**os.environ, "PATH": f"{shim}:{os.environ['PATH']}"}
    cli = [sys.executable, "-m", "arctl.cli.main"]
    t_table, out = _median_time([*cli, "status", "--workdir", str(ws.root)], env, repeat)
    assert f"{n_runs} run(s)" in out.stdout, out.stdout[-300:]
    t_json, _ = _median_time([*cli, "status", "--workdir", str(ws.root), "--json"], env, repeat)
    t_norefresh, _ = _median_time([*cli, "status", "--workdir", str(ws.root), "--no-refresh"], env, repeat)
    calls.unlink(missing_ok=True)
    subprocess.run([*cli, "status", "--workdir", str(ws.root)], capture_output=True, env=env, check=True)
    n_calls = len(calls.read_text().splitlines()) if calls.exists() else 0
    n_ids = len(calls.read_text().split()[-1].split(",")) if n_calls else 0
    t0 = time.perf_counter()
    os.environ["PATH"] = env["PATH"]
    with Registry(ws.registry_path) as reg:
        refresh(reg, ws)
    t_refresh = time.perf_counter() - t0
    t_help, _ = _median_time([*cli, "--help"], env, repeat)
    return {"runs": n_runs, "active": n_runs // 10, "status_table_s": t_table, "status_json_s": t_json,
            "status_no_refresh_s": t_norefresh, "refresh_in_process_s": t_refresh, "arctl_help_s": t_help,
            "sacct_calls_per_status": n_calls, "job_ids_in_that_call": n_ids,
            "cpu_s (median, the process and its children)": dict(CPU_TIMES),
            "load_average": os.getloadavg()[0]}


def bench_submit(root: Path, n_cells: int) -> dict:
    if not shutil.which("sbatch"):
        return {"skipped": "no sbatch on PATH (start SLURM with tests/launch/slurm/setup_slurm.sh)"}
    ping = subprocess.run(["scontrol", "ping"], capture_output=True, text=True)
    if ping.returncode != 0 or "UP" not in ping.stdout:
        return {"skipped": "no SLURM controller answers `scontrol ping` (start one with tests/launch/slurm/setup_slurm.sh)"}
    from arctl.compose import resolve_experiment
    from arctl.launch.launcher import LaunchItem, launch
    from arctl.launch.run_id import make_run_id
    from arctl.launch.rundir import frozen_config
    from arctl.launch.workspace import Workspace

    t0 = time.perf_counter()
    (base,) = resolve_experiment("ablation-vr", ["cluster.cpus_per_task=1", "cluster.mem_gb=1", "cluster.time_min=5"],
                                 arms=["grpo"], seeds=[0])
    t_resolve_one = time.perf_counter() - t0
    items = []
    for seed in range(n_cells):
        cfg = {**base.config, "seed": seed}
        rid = make_run_id(cfg)
        run = dataclasses.replace(base, seed=seed, config=frozen_config(cfg, rid, rid), sweep="bench")
        items.append(LaunchItem(run_id=rid, run=run))
    ws = Workspace(root / "ws-submit")
    t0 = time.perf_counter()
    result = launch(items, ws, executor="slurm", members=["bench"], array_parallelism=1)
    t_launch = time.perf_counter() - t0
    masters = sorted({j.split("_")[0] for j in result.job_ids.values()})
    subprocess.run(["scancel", *masters], check=False)
    # the spec layer's share: resolving a 100-cell sweep (grid over thinking.lam x 1 arm)
    specs = root / "specs"
    (specs / "experiments").mkdir(parents=True, exist_ok=True)
    (specs / "sweeps").mkdir(exist_ok=True)
    (specs / "experiments" / "one.yaml").write_text("seeds: [0]\narms:\n  a: [algo=anytime]\n")
    lams = [round(0.01 * (i + 1), 2) for i in range(n_cells)]
    (specs / "sweeps" / "grid.yaml").write_text(json.dumps({"experiments": ["one"], "grid": {"thinking.lam": lams}}))
    os.environ["ARCTL_SPECS"] = str(specs)
    from arctl.compose import resolve_sweep

    t0 = time.perf_counter()
    cells = resolve_sweep("grid")
    t_resolve = time.perf_counter() - t0
    return {"cells": n_cells, "launch_s": t_launch, "arrays": len(masters), "submitted": len(result.submitted),
            "resolve_one_run_s": t_resolve_one, "resolve_sweep_s": t_resolve, "resolved_cells": len(cells)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=positive_int, default=1000)
    parser.add_argument("--cells", type=positive_int, default=100)
    parser.add_argument("--repeat", type=positive_int, default=5)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-launch-") as tmp:
        root = Path(tmp)
        status = bench_status(root, args.runs, args.repeat)
        print(json.dumps({"status": status}, indent=2), flush=True)
        submit = bench_submit(root, args.cells)
        print(json.dumps({"submit": submit}, indent=2), flush=True)


if __name__ == "__main__":
    main()
