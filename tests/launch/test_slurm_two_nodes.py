"""The multi-node Ray-on-SLURM job body, run for real on two nodes (issue 32).

tests/launch/slurm/setup_two_nodes.sh makes a two-node SLURM on this machine: two network namespaces,
each a node with its own address, host name and slurmd, one slurmctld, accounting in the session's
slurmdbd. `arctl run ... --scale paper --executor slurm` with ``cluster.nodes=2`` then goes the
production path: sbatch -N 2 -> the verl backend's Ray body (head on node 0, a worker joining from node 1
through the head's routable address, with the job's Ray token in srun's environment) -> arctl's job
entry -> the verl backend. Nothing is shimmed. After each test no process of the run is left on either
node (every process in a node's namespace is its slurmd).
"""

from __future__ import annotations

import json
import os
import subprocess
import textwrap
import time
from pathlib import Path

import pytest
from extras import NO_VERL, verl_missing  # tests/support/extras.py
from rehearsal_progress import progress, running  # tests/support/rehearsal_progress.py

# one pytest-xdist worker for the module: one two-node cluster (the module fixture) serves its tests
pytestmark = [pytest.mark.slurm, pytest.mark.slow, pytest.mark.verl, pytest.mark.usefixtures("slurm_cluster"),
              pytest.mark.xdist_group("two-nodes")]

if verl_missing():
    pytest.skip(NO_VERL, allow_module_level=True)

HERE = Path(__file__).resolve().parent
# names, subnet and ports of this process's two-node cluster: distinct per pytest-xdist worker (each
# worker that runs a test here makes its own cluster; two at once must not share a port or a subnet)
_WORKER = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
_INDEX = int(_WORKER[2:]) if _WORKER[2:].isdigit() else 0
PREFIX = f"a2n{os.getpid() % 100000}"


def _free_net(first: int) -> str:
    """The first 10.77.x (x = first, first + 8, ...) no interface holds: a killed run's bridge keeps its
    subnet, and a second bridge on it loses the route (CI: both nodes' slurmd "connect failure")."""
    try:
        held = subprocess.run(["ip", "-o", "-4", "addr", "show"], capture_output=True, text=True).stdout
    except OSError:  # no `ip`: the fixture skips or setup_two_nodes.sh says what is missing
        held = ""
    for x in range(first, 250, 8):
        if f" 10.77.{x}." not in held:
            return f"10.77.{x}"
    return f"10.77.{first}"  # setup_two_nodes.sh names the interface that holds it


NET = _free_net(20 + _INDEX)
PORT = 6917 + 10 * _INDEX  # slurmctld; slurmd at PORT + 1
# job ids of its own: every cluster of the test run shares /tmp, where a verl job keeps its Ray files in
# /tmp/arctl-ray-<job id> (CI: two clusters' job 2 shared it, and one job's cleanup removed the other's)
FIRST_JOB_ID = 100000 + 10000 * _INDEX
TERMINAL = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "PREEMPTED", "NODE_FAIL", "OUT_OF_MEMORY")


@pytest.fixture(scope="module")
def two_nodes(tmp_path_factory):
    """``{"conf": SLURM_CONF of the two-node cluster, "prefix": ..., "net": ...}``."""
    if os.geteuid() != 0:
        pytest.skip("a two-node SLURM in network namespaces needs root")
    base = tmp_path_factory.mktemp("two-nodes")
    env = {**os.environ, "SLURM2_BASE": str(base), "SLURM2_PREFIX": PREFIX, "SLURM2_NET": NET, "SLURM2_PORT": str(PORT),
           "SLURM2_FIRST_JOB_ID": str(FIRST_JOB_ID)}
    env.pop("SLURM_CONF", None)
    proc = subprocess.run(["bash", str(HERE / "slurm" / "setup_two_nodes.sh")], capture_output=True, text=True,
                          env=env, timeout=300)
    if proc.returncode != 0:
        subprocess.run(["bash", str(HERE / "slurm" / "teardown_two_nodes.sh")], env=env, capture_output=True, timeout=120)
        pytest.fail("setup_two_nodes.sh failed: " + " | ".join((proc.stdout + proc.stderr).strip().splitlines()[-8:]))
    try:
        yield {"conf": str(base / "slurm.conf"), "prefix": PREFIX, "net": NET, "base": base}
    finally:
        down = subprocess.run(["bash", str(HERE / "slurm" / "teardown_two_nodes.sh")], env=env, capture_output=True,
                              text=True, timeout=180)
        assert "killing what was left" not in down.stdout, down.stdout


def node_processes(prefix: str) -> dict[int, list[tuple[int, str]]]:
    """node -> [(pid, command line)] of every process in its network namespace but its slurmd."""
    out = {}
    for i in (0, 1):
        pids = subprocess.run(["ip", "netns", "pids", f"{prefix}{i}"], capture_output=True, text=True).stdout.split()
        procs = []
        for pid in map(int, pids):
            try:
                args = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
            except OSError:
                continue
            if not args.startswith("slurmd "):
                procs.append((pid, args))
        out[i] = procs
    return out


def nothing_left(prefix: str, waiter, timeout: float = 90) -> None:
    waiter(lambda: not any(node_processes(prefix).values()), timeout,
           f"no process of the run left on either node (left: {node_processes(prefix)})")


SMOKE = textwrap.dedent(
    """\
    description: verl smoke run on two SLURM nodes
    groups: {model: r1-distill-qwen-1.5b}
    seeds: [0]
    overrides:
      - verl.smoke=true
      - wandb.mode=offline
      - cluster.nodes=2
      - cluster.cpus_per_task=2
      - cluster.mem_gb=3
      - cluster.time_min=10
      - "verl.ray_start_args=['--object-store-memory=100000000','--include-dashboard=false']"
    arms:
      ar: [algo=anytime, prior=uniform]
    """
)


def _status(statuses, ws: Path) -> dict:
    (record,) = statuses(ws)  # in-process: a waiting test's polls (tests/launch/conftest.py)
    return record


def _env(monkeypatch, tmp_path: Path, cluster: dict, experiment: str, text: str) -> Path:
    specs = tmp_path / "specs"
    (specs / "experiments").mkdir(parents=True)
    (specs / "experiments" / f"{experiment}.yaml").write_text(text)
    monkeypatch.setenv("ARCTL_SPECS", str(specs))
    monkeypatch.setenv("SLURM_CONF", cluster["conf"])  # sbatch, squeue, sacct, scontrol: the two-node cluster
    monkeypatch.delenv("ARCTL_TEST_BACKEND", raising=False)  # the real verl backend runs
    monkeypatch.delenv("ARCTL_HOME", raising=False)
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setenv("ARCTL_RAY_HEAD_WAIT_S", "1")  # the smoke waits for the head's port itself
    monkeypatch.setenv("ARCTL_RAY_WORKER_WAIT_S", "2")
    monkeypatch.setenv("ARCTL_DATA_DIR", str(tmp_path / "no-data"))
    return tmp_path / "ws"


def test_a_verl_smoke_run_spans_both_nodes_through_the_ray_job_body(two_nodes, tmp_path, monkeypatch, cli, waiter, statuses):
    ws = _env(monkeypatch, tmp_path, two_nodes, "vsmoke2", SMOKE)
    key = "planted" + "0123456789abcdef" * 2
    monkeypatch.setenv("WANDB_API_KEY", key)
    out = cli("run", "vsmoke2", "--scale", "paper", "--executor", "slurm", "--workdir", str(ws), "--json", check=True)
    (run,) = json.loads(out.stdout)["submitted"]
    run_dir = Path(run["run_dir"])
    record = waiter(lambda: (r := _status(statuses, ws))["state"] in TERMINAL and r, 300, "the smoke job to end")
    if record["state"] != "COMPLETED":
        logs = cli("logs", run["run_id"], "--workdir", str(ws)).stdout
        pytest.fail(f"two-node smoke job {record['state']}: {record['error']}\n{logs[-4000:]}")

    sbatch = (run_dir / "job" / "sbatch.sh").read_text()
    assert "#SBATCH --nodes=2" in sbatch
    summary = json.loads((run_dir / "smoke.json").read_text())
    assert summary["ok"] is True, summary
    ray = summary["ray"]
    prefix, net = two_nodes["prefix"], two_nodes["net"]
    # the head on node 0 at its own address, the worker joined from node 1
    assert ray["address"].startswith(f"{net}.2:") and ray["nodes"] == ray["nodes_expected"] == 2
    assert ray["node_ips"] == [f"{net}.2", f"{net}.3"]
    assert ray["resources"]["CPU"] == 4  # cluster.cpus_per_task on each node
    hosts = sorted(t["host"] for t in ray["tasks"])
    assert hosts == [f"{prefix}-node0", f"{prefix}-node1"]  # the smoke's task ran on each node
    for task in ray["tasks"]:
        assert task["plugin_loaded_by_import_verl"] is True and task["slurm_job_id"] == record["job_id"]
        assert task["slurm_step_id"] not in (None, "batch")  # inside the node's Ray step (srun)
    hits = subprocess.run(["grep", "-rl", key, str(ws)], capture_output=True, text=True).stdout
    assert hits == "", f"the API key leaked into {hits}"  # the token and key travel in srun's environment only

    def job_ended():
        out = subprocess.run(["sacct", "-X", "-n", "-P", "-o", "State", "-j", record["job_id"]],
                             capture_output=True, text=True).stdout
        return out.strip() == "COMPLETED"

    waiter(job_ended, 60, "sacct: the job COMPLETED")
    nothing_left(prefix, waiter)
    assert not Path(ray["temp_dir"]).exists()  # removed after the successful job


def rehearsal(steps: int, step_s: float, warning_s: int = 60) -> str:
    return textwrap.dedent(
        f"""\
        description: verl rehearsal on two SLURM nodes
        groups: {{model: r1-distill-qwen-1.5b}}
        seeds: [0]
        overrides:
          - verl.rehearsal_steps={steps}
          - verl.rehearsal_step_s={step_s}
          - trainer.save_freq=1
          - wandb.mode=offline
          - cluster.nodes=2
          - cluster.cpus_per_task=2
          - cluster.mem_gb=3
          - cluster.time_min=10
          - cluster.preempt_warning_s={warning_s}
          - "verl.ray_start_args=['--object-store-memory=100000000','--include-dashboard=false']"
        arms:
          ar: [algo=anytime, prior=uniform]
        """
    )


def _job_story(record: dict, run_dir: Path, job_id: str) -> str:
    """What a failed stop assertion needs to be understood after the fact (a CI run's folders are gone by then):
    the registry's record, the job's status.json with its age, SLURM's steps of the job, and each attempt's log
    tails (from a flake: a scancel'd attempt left "running" behind and nothing said why)."""
    from arctl.launch.status_file import read_status

    status = read_status(run_dir)
    age = time.time() - status["updated_at"] if "updated_at" in status else None
    steps = subprocess.run(["sacct", "-n", "-P", "-o", "JobID,State,ExitCode,Start,End", "-j", job_id],
                           capture_output=True, text=True).stdout
    logs = "".join(f"\n--- {p.name} (last 25 lines)\n" + "\n".join(p.read_text(errors="replace").splitlines()[-25:])
                   for p in sorted((run_dir / "job").glob("*/*_log.*")))
    return f"{record}\nstatus.json ({age} s old): {status}\nsacct:\n{steps}{logs}"


def _steps(run_dir: Path) -> list[int]:
    """The run's W&B history as a W&B server would show it after syncing every fragment (rewinds
    applied), read by the independent reader of tests/support/wandb_reference.py."""
    from wandb_reference import synced_history

    _, rows = synced_history(run_dir)
    return [int(r["trainer/global_step"]) for r in rows]


def test_usr1_and_scancel_reach_the_trainer_on_node_0_and_the_two_node_job_requeues_stops_and_resumes(
        two_nodes, tmp_path, monkeypatch, cli, waiter, statuses):
    from arctl.launch.status_file import read_status

    ws = _env(monkeypatch, tmp_path, two_nodes, "vpre2", rehearsal(6, 6, warning_s=2))
    out = cli("run", "vpre2", "--scale", "paper", "--executor", "slurm", "--workdir", str(ws), "--json", check=True)
    (run,) = json.loads(out.stdout)["submitted"]
    run_dir = Path(run["run_dir"])
    prefix = two_nodes["prefix"]

    # USR1 (the time-limit warning) in the middle of step 3: abandoned, requeued by SLURM, resumed at 2
    waiter(lambda: running(run_dir, 3), 240,
           "rehearsal step 3 to start on both nodes")
    subprocess.run(["scancel", "--signal=USR1", "--batch", run["job_id"]], check=True)
    waiter(lambda: read_status(run_dir).get("attempt") == 2, 150, "the requeued attempt to start")
    assert _status(statuses, ws)["job_id"] == run["job_id"]  # requeued by SLURM, not resubmitted

    # scancel (TERM to every step on both nodes) in the middle of step 4: the run is PREEMPTED with its
    # checkpoint of step 3 and nothing of the job is left on either node
    waiter(lambda: running(run_dir, 4), 240,
           "the requeued attempt to reach step 4")
    subprocess.run(["scancel", run["job_id"]], check=True)
    record = waiter(lambda: (r := _status(statuses, ws))["state"] in TERMINAL and r, 120, "the cancelled job to stop")
    assert record["state"] == "PREEMPTED", _job_story(record, run_dir, run["job_id"])
    nothing_left(prefix, waiter)

    # the next sweep resumes it (a new job, both nodes again) and it completes, every step logged once
    cli("run", "vpre2", "--scale", "paper", "--executor", "slurm", "--workdir", str(ws), "--json", check=True)
    record = waiter(lambda: (r := _status(statuses, ws))["state"] in TERMINAL and r["job_id"] != run["job_id"] and r, 300,
                    "the resumed run to finish")
    if record["state"] != "COMPLETED":
        pytest.fail(f"{record['state']}: {record['error']}\n{cli('logs', run['run_id'], '--workdir', str(ws)).stdout[-3000:]}")
    assert progress(run_dir)["resumed_from"] == 3
    assert _steps(run_dir) == [1, 2, 3, 4, 5, 6]  # every step exactly once, over three attempts
    logs = {p.name: p.read_text(errors="replace") for p in (run_dir / "job").glob("*/*_log.*")}  # every job's
    assert any("abandoning it" in text for text in logs.values())  # the USR1'd step (TERM abandons at once)
    assert any("caught SIGTERM" in text for text in logs.values())  # scancel's TERM reached the job entry on node 0
    assert sum("arctl: ray worker on node1" in text for name, text in logs.items() if name.endswith(".out")) == 2
    nothing_left(prefix, waiter)


def test_killing_the_worker_nodes_ray_fails_the_job_in_one_line_and_a_rerun_resumes(two_nodes, tmp_path, monkeypatch,
                                                                                   cli, waiter, statuses):
    ws = _env(monkeypatch, tmp_path, two_nodes, "vkill2", rehearsal(5, 4))
    out = cli("run", "vkill2", "--scale", "paper", "--executor", "slurm", "--workdir", str(ws), "--json", check=True)
    (run,) = json.loads(out.stdout)["submitted"]
    run_dir = Path(run["run_dir"])
    prefix = two_nodes["prefix"]
    waiter(lambda: running(run_dir, 3), 240,
           "rehearsal step 3 to start on both nodes")
    # node 1's Ray dies (a node lost mid-step): every process of the job there, not its slurmd
    ray_there = [pid for pid, args in node_processes(prefix)[1] if "ray" in args]
    assert ray_there, node_processes(prefix)
    for pid in ray_there:
        try:
            os.kill(pid, 9)
        except ProcessLookupError:
            pass
    record = waiter(lambda: (r := _status(statuses, ws))["state"] in TERMINAL and r, 240, "the job to end")
    assert record["state"] == "FAILED", record
    error = record["error"] or ""
    assert "\n" not in error and "Ray lost a node or worker of the job" in error, error  # one line: what died
    nothing_left(prefix, waiter)  # the EXIT trap stopped node 0's Ray; nothing of node 1's is left

    # the next sweep resumes the failed run from its last checkpoint, on both nodes again
    out = cli("run", "vkill2", "--scale", "paper", "--executor", "slurm", "--workdir", str(ws), "--json", check=True)
    time.sleep(1)
    record = waiter(lambda: (r := _status(statuses, ws))["state"] in TERMINAL and r["job_id"] != run["job_id"] and r, 300,
                    "the resumed run to finish")
    if record["state"] != "COMPLETED":
        pytest.fail(f"{record['state']}: {record['error']}\n{cli('logs', run['run_id'], '--workdir', str(ws)).stdout[-3000:]}")
    assert progress(run_dir)["resumed_from"] == 2
    assert _steps(run_dir) == [1, 2, 3, 4, 5]
    nothing_left(prefix, waiter)


def verl_loop(steps: int) -> str:
    """verl's real loop on a CPU (tests/launch/test_slurm_verl_cpu.py's experiment) with one actor
    worker per node: ``verl.n_gpus_per_node=1`` on ``cluster.nodes=2`` is an FSDP world of two, one
    rank on each node, over gloo between the nodes' addresses."""
    import r1_like  # tests/support/r1_like.py

    return r1_like.verl_experiment(
        "verl's real loop on a CPU over two SLURM nodes", "eval.grid=[16,32]", f"trainer.total_steps={steps}",
        f"trainer.save_freq={steps}", f"trainer.test_freq={steps}", "cluster.nodes=2", "cluster.cpus_per_task=2",
        "cluster.mem_gb=3", "cluster.time_min=15",
        "verl.ray_start_args=['--object-store-memory=150000000','--include-dashboard=false']",
    )


def test_verls_real_loop_trains_with_one_actor_worker_on_each_node(two_nodes, tmp_path, monkeypatch, cli, waiter, statuses):
    """verl's loop (tests/launch/test_slurm_verl_cpu.py) with its FSDP world spread over the nodes:
    the actor workers' gloo group and verl's TransferQueue connect across the nodes' addresses."""
    import r1_like  # tests/support/r1_like.py

    inputs = r1_like.verl_inputs(tmp_path / "inputs")
    ws = _env(monkeypatch, tmp_path, two_nodes, "vloop2", verl_loop(2))
    where = [f"model.path={inputs / 'model'}", f"verl.data_dir={inputs / 'data'}"]
    out = cli("run", "vloop2", "--scale", "paper", "--executor", "slurm", "--workdir", str(ws), "--json", *where,
              check=True)
    (run,) = json.loads(out.stdout)["submitted"]
    run_dir = Path(run["run_dir"])
    record = waiter(lambda: (r := _status(statuses, ws))["state"] in TERMINAL and r, 540, "verl's loop over two nodes to end")
    logs = cli("logs", run["run_id"], "--workdir", str(ws), "--tail", "0").stdout
    if record["state"] != "COMPLETED":
        pytest.fail(f"{record['state']}: {record['error']}\n{logs[-6000:]}")
    # an FSDP world of two, one rank on each node (host names are the nodes' own: UTS namespaces)
    prefix = two_nodes["prefix"]
    assert (f"tree-attention patch active in 2 actor workers (FSDPEngineWithLMHead) on {prefix}-node0, "
            f"{prefix}-node1\n") in logs, logs[-4000:]
    from wandb_reference import synced_history  # tests/support: the independent reader of .wandb files

    ids, rows = synced_history(run_dir)
    assert ids == {record["wandb_id"]} and [r["trainer/global_step"] for r in rows] == [0, 1, 2]  # each step once
    by_step = {r["trainer/global_step"]: r for r in rows}
    for step in (1, 2):  # arctl's advantage step and verl's update across the two ranks, on real trees
        assert {"train/score@16", "train/score@32", "train/adv_var/brpo", "actor/pg_loss"} <= set(by_step[step])
    assert any(by_step[s]["actor/grad_norm"] > 0 for s in (1, 2)), r1_like.update_record(by_step)  # the weights moved
    for step in (0, 2):  # validation before training and at the end
        assert {"eval/aime24/acc@16", "eval/aime24/acc@32", "eval/aime24/anytime_acc"} <= set(by_step[step])
    from arctl.backends.verl import checkpoints

    ckpt = run_dir / "checkpoints"  # both ranks' shards saved, intact
    assert checkpoints.saved_steps(ckpt) == [2] and checkpoints.problem(ckpt, 2) is None
    shards = sorted(p.name for p in (ckpt / "global_step_2" / "actor").glob("model_world_size_*.pt"))
    assert shards == ["model_world_size_2_rank_0.pt", "model_world_size_2_rank_1.pt"]  # one per node's rank
    nothing_left(prefix, waiter)
