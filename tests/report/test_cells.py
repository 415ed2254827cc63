"""One run per cell (arctl.report.cells): a workspace with several runs of one arm and seed (two sweeps
that set something differently, a grid, a rerun with an override) gives a report that reads one of
them, the one the report's sweep composes, or one error line saying how to choose; never a seed
counted twice or configurations mixed without a word."""

from __future__ import annotations

import json
import os

import numpy as np
import pandas as pd
import pytest
from resolved_runs import write_resolved_run  # tests/support/resolved_runs.py
from typer.testing import CliRunner

from arctl.cli.main import app
from arctl.report.cells import one_run_per_cell, parse_where, same_value
from arctl.report.errors import ReportError
from arctl.track.runs import Runs

runner = CliRunner()


def runs_of(*rows: dict) -> Runs:
    """A :class:`Runs` of ``rows`` (run_id, experiment, arm, seed, config.*), each with one metric."""
    table = pd.DataFrame.from_records(rows)
    history = pd.DataFrame({"run_id": table["run_id"], "experiment": table["experiment"], "arm": table["arm"],
                            "seed": table["seed"], "step": 0, "metric": "eval/toy/final_acc",
                            "value": np.arange(len(table), dtype=float)})
    return Runs(history=history, runs=table)


def row(run_id: str, seed: int = 0, arm: str = "grpo", **config) -> dict:
    out = {"run_id": run_id, "experiment": "main-grpo", "arm": arm, "seed": seed, "config.scale": "tiny",
           "config.thinking.lam": 0.5, "config.budget_control.forcing_extensions": 0, "config.wandb.name": run_id,
           "config.machine": "AMD EPYC | AVX512"}
    out.update({f"config.{k.replace('__', '.')}": v for k, v in config.items()})
    return out


def composed(**config):
    cell = {"scale": "tiny", "thinking.lam": 0.5, "budget_control.forcing_extensions": 0}
    cell.update({k.replace("__", "."): v for k, v in config.items()})
    return lambda experiment, arm, seed, scale: dict(cell)


def kept(runs: Runs) -> list[str]:
    return sorted(runs.runs["run_id"])


def test_values_compare_as_a_user_means_them():
    assert same_value(2, 2.0) and same_value(np.int64(2), 2.0) and same_value([48, 96], (48, 96))
    assert same_value(float("nan"), None) and same_value(np.array([1, 2]), [1, 2])
    assert not same_value(0, None) and not same_value(True, 1) and not same_value("0.5", 0.5)
    assert parse_where(["thinking.lam=0.75", "config.summary.decoupled=true", "eval.budgets=[48, 96]", "tag=x"]) == [
        ("thinking.lam", 0.75, None), ("summary.decoupled", True, None), ("eval.budgets", [48, 96], None),
        ("tag", "x", None)]
    assert parse_where(["grpo:optim.lr=1e-4", "evx/grpo-vr:model.path=/a:b"]) == [
        ("optim.lr", 1e-4, "grpo"), ("model.path", "/a:b", "evx/grpo-vr")]
    for bad in ("thinking.lam", "=3"):
        with pytest.raises(ReportError, match="expected KEY=VALUE"):
            parse_where([bad])


def test_one_run_per_cell_is_left_alone_and_machines_and_names_never_count():
    runs = runs_of(row("a0"), row("a1", seed=1), row("u0", arm="ar-uniform"))
    assert kept(one_run_per_cell(runs, compose=None)) == ["a0", "a1", "u0"]
    # two runs that differ only in what a job records beside its config: the composed cell decides nothing
    # there, so they are undecided, but never by the machine or the W&B name
    two = runs_of(row("a", **{"machine": "x"}), row("b", **{"machine": "y", "thinking__lam": 0.75}))
    assert kept(one_run_per_cell(two, compose=composed())) == ["a"]


def test_a_run_read_as_a_cell_it_serves_is_not_said_to_differ_by_its_names():
    """AR-base's run serves ablation-vr's grpo-vr-decouple (shared.json, or by config from W&B): read
    under that cell's names, its own experiment and arm are not a difference worth a warning."""
    shared = row("main-ar-base_ar-base_s0", arm="grpo-vr-decouple", experiment="ablation-vr", wandb__group="paper")
    shared.update({"experiment": "ablation-vr", "config.experiment": "main-ar-base", "config.arm": "ar-base"})
    cell = composed(experiment="ablation-vr", arm="grpo-vr-decouple", wandb__group="ablation-vr")
    assert one_run_per_cell(runs_of(shared), compose=cell).warnings == []
    other = dict(shared, **{"config.thinking.lam": 0.75})
    (said,) = one_run_per_cell(runs_of(other), compose=cell).warnings
    assert " in thinking.lam: main-ar-base_ar-base_s0;" in said


def test_the_cell_the_sweep_composes_wins_and_the_history_follows():
    runs = runs_of(row("plain"), row("forced", budget_control__forcing_extensions=2), row("other", seed=1))
    out = one_run_per_cell(runs, compose=composed(budget_control__forcing_extensions=2))
    assert kept(out) == ["forced", "other"] and sorted(out.history["run_id"]) == ["forced", "other"]
    assert out.history.set_index("run_id").loc["forced", "value"] == 1.0  # its own values, not the plain run's
    runs = runs_of(row("plain"), row("forced", budget_control__forcing_extensions=2))
    assert kept(one_run_per_cell(runs, compose=composed())) == ["plain"]


def test_a_cell_nothing_decides_is_one_error_line_naming_the_runs_the_key_and_the_choice():
    runs = runs_of(row("lam25", thinking__lam=0.25), row("lam75", thinking__lam=0.75))
    with pytest.raises(ReportError) as err:
        one_run_per_cell(runs, compose=composed(), source="/ws")
    msg = str(err.value)
    assert "\n" not in msg and msg.startswith("main-grpo/grpo seed 0 has 2 runs in /ws that differ in thinking.lam")
    assert "0.25: lam25; 0.75: lam75" in msg and msg.endswith("choose with --where thinking.lam=VALUE")
    with pytest.raises(ReportError, match="choose with --where thinking.lam=VALUE"):
        one_run_per_cell(runs, compose=lambda *a: None)  # the cell cannot be composed: the same line
    out = one_run_per_cell(runs_of(row("lam25", thinking__lam=0.25), row("lam75", thinking__lam=0.75)),
                           where=["thinking.lam=0.75"], compose=composed())
    assert kept(out) == ["lam75"]


def test_where_filters_every_run_and_says_what_is_wrong():
    runs = runs_of(row("a", thinking__lam=0.25), row("b", seed=1), row("c", seed=2, thinking__lam=1))
    assert kept(one_run_per_cell(runs, where=["thinking.lam=1.0"])) == ["c"]
    with pytest.raises(ReportError, match=r"no run in /ws has config key 'lam'; did you mean thinking\.lam\?"):
        one_run_per_cell(runs_of(row("a")), where=["lam=0.5"], source="/ws")
    with pytest.raises(ReportError, match=r"--where thinking\.lam=0\.3: none of the 1 runs in /ws has that config"):
        one_run_per_cell(runs_of(row("a")), where=["thinking.lam=0.3"], source="/ws")


def test_an_arm_s_where_filters_its_runs_alone():
    """``ARM:KEY=VALUE`` (or ``EXPERIMENT/ARM:KEY=VALUE``) filters that arm's runs; every other arm's are kept as
    they are. A plain ``KEY=VALUE`` still filters every arm's; an arm no run has, or no arm, is one error line."""
    runs = lambda: runs_of(row("old", optim__lr=1e-4), row("new", optim__lr=5e-4),  # noqa: E731
                           row("vr", arm="grpo-vr", optim__lr=1e-4))
    assert kept(one_run_per_cell(runs(), where=["grpo:optim.lr=5e-4"])) == ["new", "vr"]
    assert kept(one_run_per_cell(runs(), where=["main-grpo/grpo:optim.lr=0.0005"])) == ["new", "vr"]
    assert kept(one_run_per_cell(runs(), where=["optim.lr=5e-4"])) == ["new"]
    assert kept(one_run_per_cell(runs(), where=["grpo:optim.lr=5e-4", "grpo-vr:optim.lr=1e-4"])) == ["new", "vr"]
    with pytest.raises(ReportError, match=r"^--where ppo:optim\.lr=0\.0005: no run in /ws is of arm 'ppo'; the arms "
                                          r"read are grpo, grpo-vr$"):
        one_run_per_cell(runs(), where=["ppo:optim.lr=5e-4"], source="/ws")
    # an arm's own condition on a key replaces every arm's on it (from a review: both applied, grpo was dropped)
    assert kept(one_run_per_cell(runs(), where=["optim.lr=1e-4", "grpo:optim.lr=5e-4"])) == ["new", "vr"]
    assert kept(one_run_per_cell(runs(), where=["grpo:optim.lr=5e-4", "optim.lr=1e-4"])) == ["new", "vr"]
    with pytest.raises(ReportError, match=r"is of arm 'other/grpo'; the arms read are main-grpo/grpo, "
                                          r"main-grpo/grpo-vr$"):
        one_run_per_cell(runs(), where=["other/grpo:optim.lr=5e-4"], source="/ws")
    with pytest.raises(ReportError, match=r"expected KEY=VALUE or ARM:KEY=VALUE"):
        one_run_per_cell(runs(), where=[":optim.lr=5e-4"])
    with pytest.raises(ReportError, match=r"--where grpo:optim\.lr=\.\.\. is given twice"):
        one_run_per_cell(runs(), where=["grpo:optim.lr=5e-4", "grpo:optim.lr=1e-4"])


def test_where_keeps_the_runs_that_read_nothing_of_its_key():
    """A sweep's grid over reward.alpha launches GRPO, which has no length penalty, once for every value (its
    config keeps the default alpha): ``--where reward.alpha=0.1`` is that grid point's figure, GRPO in it."""
    none, v1 = {"reward__length_penalty": "none"}, {"reward__length_penalty": "v1"}
    runs = runs_of(row("grpo", reward__alpha=0.2, **none), row("lp1", arm="lp", reward__alpha=0.1, **v1),
                   row("lp3", arm="lp", reward__alpha=0.3, **v1))
    assert kept(one_run_per_cell(runs, where=["reward.alpha=0.1"], grid_keys=["reward.alpha"])) == ["grpo", "lp1"]
    runs = runs_of(row("grpo", reward__alpha=0.2, **none), row("lp1", arm="lp", reward__alpha=0.1, **v1))
    assert kept(one_run_per_cell(runs, where=["reward.alpha=0.2"])) == ["grpo"]  # read: the value decides
    runs = runs_of(row("a", thinking__lam=0.25, **none), row("b", seed=1, **none))
    assert kept(one_run_per_cell(runs, where=["thinking.lam=0.25"])) == ["a"]  # a key every run reads
    # an earlier arctl trained GRPO at every value of such a grid: the run at the value asked for is read (from a
    # hunt: both survived every --where, and the error that followed asked for the same --where)
    for value, point in ((0.2, "2"), (0.3, "3")):
        runs = runs_of(row("grpo2", reward__alpha=0.2, **none), row("grpo3", reward__alpha=0.3, **none),
                       row("lp2", arm="lp", reward__alpha=0.2, **v1), row("lp3", arm="lp", reward__alpha=0.3, **v1),
                       row("grpo-s1", seed=1, reward__alpha=0.2, **none))
        out = one_run_per_cell(runs, where=[f"reward.alpha={value}"], grid_keys=["reward.alpha"])
        assert kept(out) == sorted([f"grpo{point}", f"lp{point}", "grpo-s1"])


def test_the_cell_is_composed_at_the_scale_each_run_ran_at():
    asked = []

    def compose(experiment, arm, seed, scale):
        asked.append((experiment, arm, seed, scale))
        return {"thinking.lam": 0.5, "scale.name": scale}

    paper = {"scale": None, "scale__name": "paper"}
    runs = runs_of(row("a", thinking__lam=0.25, **paper), row("b", **paper), row("c", seed=1, **{"scale.name": "tiny"}))
    assert kept(one_run_per_cell(runs, compose=compose)) == ["b", "c"]
    assert ("main-grpo", "grpo", 0, "paper") in asked and ("main-grpo", "grpo", 1, "tiny") in asked


def test_a_grid_point_is_a_cell_of_its_own():
    runs = runs_of(row("lam25", thinking__lam=0.25), row("lam75", thinking__lam=0.75))
    assert kept(one_run_per_cell(runs, compose=composed(), grid_keys=["thinking.lam"])) == ["lam25", "lam75"]


def _write(ws, run, values: dict[int, float]) -> str:
    """A real offline W&B run of the resolved ``run`` (config.yaml as the launcher writes it), whose
    final evaluation logs ``values`` as eval/toy/acc@BUDGET (and the same mean as the summary keys)."""
    mean = float(np.mean(list(values.values())))
    return write_resolved_run(ws, run, final=lambda cfg: {
        **{f"eval/toy/acc@{b}": v for b, v in values.items()}, "eval/toy/anytime_acc": mean,
        "eval/toy/grid_anytime_acc": mean, "eval/toy/final_acc": values[max(values)], "eval/toy/think_len": 30.0})


def test_a_workspace_with_two_sweeps_runs_of_one_arm_reports_each_sweep_s_own(tmp_path):
    """`arctl sweep paper` and `arctl sweep baselines` (budget forcing on) both train main-grpo seed 0: the
    baselines report reads the forced run, the claims the plain one; a third run of another lambda is
    never read; without the plain run, the claims are one error line until --where chooses."""
    import wandb

    from arctl.compose.experiment import load_experiment
    from arctl.compose.resolve import resolve_arm

    os.environ.setdefault("WANDB_SILENT", "true")
    os.environ["WANDB_MODE"] = "offline"
    ws = tmp_path / "ws"
    grpo, uniform = load_experiment("main-grpo"), load_experiment("main-ar-uniform")
    budgets = resolve_arm(grpo, "grpo", 0, "tiny").config["eval"]["budgets"]
    plain = _write(ws, resolve_arm(grpo, "grpo", 0, "tiny"), {b: 0.2 for b in budgets})
    forced = _write(ws, resolve_arm(grpo, "grpo", 0, "tiny", sweep_overrides=["budget_control.forcing_extensions=2"],
                                    sweep="baselines"), {b: 0.4 for b in budgets})
    lam = _write(ws, resolve_arm(grpo, "grpo", 0, "tiny", user_overrides=["thinking.lam=0.75"]), {b: 0.9 for b in budgets})
    ar = _write(ws, resolve_arm(uniform, "ar-uniform", 0, "tiny"), {b: 0.3 for b in budgets})
    wandb.teardown()

    res = runner.invoke(app, ["report", "--table", "final", "--sweep", "baselines", "--workdir", str(ws),
                              "--out", str(tmp_path / "b"), "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    used = {(r["arm"], r["seed"]): r["run_id"] for r in doc["runs"]}
    assert used[("grpo", 0)] == forced and len(used) == 2
    # AR-uniform's only run is the paper sweep's (no forcing): read, and said
    (said,) = [w for w in doc["warnings"] if "differ from their cell" in w]
    assert said.startswith("1 run(s) differ from their cell as the report's sweep composes it, in "
                           "budget_control.forcing_extensions: " + ar), said

    res = runner.invoke(app, ["report", "--claims", "paper", "--scale", "tiny", "--workdir", str(ws),
                              "--out", str(tmp_path / "c"), "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    used = {(r["arm"], r["seed"]): r["run_id"] for r in doc["runs"] if r["arm"] == "grpo"}
    assert used == {("grpo", 0): plain} and not [w for w in doc["warnings"] if "differ from their cell" in w]

    import shutil

    shutil.rmtree(ws / "runs" / plain)
    shutil.rmtree(ws / ".arctl-cache", ignore_errors=True)
    res = runner.invoke(app, ["report", "--claims", "paper", "--scale", "tiny", "--workdir", str(ws),
                              "--out", str(tmp_path / "d")])
    lines = res.output.strip().splitlines()
    assert res.exit_code == 2 and len(lines) == 1 and "main-grpo/grpo seed 0 has 2 runs" in lines[0], res.output
    assert forced in lines[0] and lam in lines[0] and "--where" in lines[0] and not (tmp_path / "d").exists()
    res = runner.invoke(app, ["report", "--claims", "paper", "--scale", "tiny", "--workdir", str(ws),
                              "--where", "thinking.lam=0.75", "--out", str(tmp_path / "e"), "--json"])
    assert res.exit_code == 0, res.output
    assert {r["run_id"] for r in json.loads(res.stdout)["runs"]} == {lam}  # --where filters every arm


class _OnlineRun:
    """A run as wandb.Api lists it: its resolved config, and a history only read when scanned."""

    def __init__(self, run, final: float):
        from arctl.launch.run_id import make_run_id

        self.config = {**run.config, "run_id": make_run_id(run.config)}
        self.id = self.config["run_id"]
        self.entity, self.project, self.state = "team", "proj", "finished"
        self.name, self.group = f"{run.arm}-s{run.seed}", run.experiment
        self.summary, self._attrs, self.final, self.scans = {}, {"heartbeatAt": "2026-11-29T00:00:00"}, final, 0

    def scan_history(self, page_size=1000):
        self.scans += 1
        yield {"_step": 0, "trainer/global_step": 0, "eval/toy/final_acc": 0.0}
        yield {"_step": 1, "trainer/global_step": 1, "eval/toy/final_acc": self.final}


class _Api:
    def __init__(self, runs):
        self._runs, self.calls = runs, []

    def runs(self, path, filters=None):
        self.calls.append((path, filters))
        return list(self._runs)


def test_a_w_and_b_project_s_shared_runs_serve_the_cells_they_are_by_config(tmp_path):
    """#31: W&B has no shared.json. The paper's sweep trains AR-base once and shares it with
    ablation-vr's grpo-vr-decouple (the same config), and GRPO once for every experiment: a report of
    ablation-vr read from the project finds them by config; a run of another config serves nothing
    and its history is never downloaded."""
    from arctl.compose.experiment import load_experiment
    from arctl.compose.resolve import resolve_arm
    from arctl.report.data import read_report_runs

    def resolved(experiment, arm, seed, *user):
        return resolve_arm(load_experiment(experiment), arm, seed, "tiny", user_overrides=list(user), sweep="paper")

    grpo = _OnlineRun(resolved("main-grpo", "grpo", 0), 0.30)
    vr = _OnlineRun(resolved("ablation-vr", "grpo-vr", 0), 0.31)
    base = _OnlineRun(resolved("main-ar-base", "ar-base", 0), 0.34)
    other = _OnlineRun(resolved("main-ar-base", "ar-base", 1, "thinking.lam=0.75"), 0.9)
    uniform = _OnlineRun(resolved("main-ar-uniform", "ar-uniform", 0), 0.36)
    api = _Api([grpo, vr, base, other, uniform])
    data = read_report_runs({"experiments": ["ablation-vr"]}, metrics=["eval/*"], wandb_project="team/proj",
                            api=api, cache_dir=tmp_path / "cache", progress=False)
    used = {(r["experiment"], r["arm"], r["seed"]): r["run_id"] for r in data.used_runs()}
    assert used == {("ablation-vr", "grpo", 0): grpo.id, ("ablation-vr", "grpo-vr", 0): vr.id,
                    ("ablation-vr", "grpo-vr-decouple", 0): base.id}
    assert (other.scans, uniform.scans) == (0, 0)  # listed, never downloaded
    finals = data.history.drop_duplicates(["run_id", "metric"], keep="last").set_index("arm")["value"]
    assert finals.to_dict() == {"grpo": 0.30, "grpo-vr": 0.31, "grpo-vr-decouple": 0.34}


def test_a_spec_may_show_only_the_arms_it_lists(workspace, tmp_path):
    """budget_methods lists the methods; ThinkPrune's rounds 1-2 are runs the last round starts from:
    with ``only_listed_arms`` they are not drawn (without it, unlisted arms come after the listed)."""
    from arctl.report.data import read_report_runs

    spec = {"experiments": ["ablation-dense"], "arms": ["grpo-dense"]}
    common = dict(metrics=["eval/*"], workdir=workspace, cache_dir=tmp_path / "cache", progress=False, processes=1)
    assert {r["arm"] for r in read_report_runs(spec, **common).used_runs()} == {"grpo", "grpo-dense"}
    data = read_report_runs({**spec, "only_listed_arms": True}, **common)
    assert {r["arm"] for r in data.used_runs()} == {"grpo-dense"} and set(data.history["arm"]) == {"grpo-dense"}


def test_a_bad_where_is_one_error_line_and_writes_nothing(workspace, tmp_path):
    for args, said in ((["--where", "thinking.lam"], "expected KEY=VALUE"),
                       (["--where", "lamda=0.5"], "has config key 'lamda'"),
                       (["--where", "thinking.lam=0.3"], "none of the")):
        for command in (["report", "--table", "final", "--workdir", str(workspace)],
                        ["report", "--claims", "priors", "--workdir", str(workspace)]):
            res = runner.invoke(app, [*command, *args, "--out", str(tmp_path / "out")])
            lines = res.output.strip().splitlines()
            assert res.exit_code == 2 and len(lines) == 1 and lines[0].startswith("error: ") and said in lines[0], res.output
            assert not (tmp_path / "out").exists()


def test_a_report_of_final_values_leaves_out_runs_that_have_not_finished(workspace, tmp_path):
    """A running or killed run's last values are an earlier evaluation's: a table or score curve
    (final values) leaves it out and says so, as the claims do; a training-curve figure keeps it."""
    from wandb_workspace import TRUNCATED, run_id

    cut = run_id(*TRUNCATED)
    res = runner.invoke(app, ["report", "--table", "final", "--experiment", TRUNCATED[0], "--workdir", str(workspace),
                              "--out", str(tmp_path / "t"), "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert cut not in {r["run_id"] for r in doc["runs"]} and doc["runs"]
    (said,) = [w for w in doc["warnings"] if w.startswith("left out")]
    assert said.startswith("left out 1 run(s) that have not finished") and f"{cut} (running or killed at step" in said
    res = runner.invoke(app, ["report", "--figure", "ablation_vr", "--workdir", str(workspace), "--out", str(tmp_path / "f"),
                              "--json"])
    assert res.exit_code == 0 and cut in {r["run_id"] for r in json.loads(res.stdout)["runs"]}, res.output
    import shutil

    only = tmp_path / "only" / "runs"
    shutil.copytree(workspace / "runs" / cut, only / cut)
    res = runner.invoke(app, ["report", "--table", "final", "--experiment", TRUNCATED[0], "--workdir", str(only.parent),
                              "--out", str(tmp_path / "n")])
    lines = res.output.strip().splitlines()
    assert res.exit_code == 2 and len(lines) == 1 and lines[0].startswith("error: no finished runs in "), res.output
    assert f"wait for them (`arctl status --workdir {only.parent}`)" in lines[0] and not (tmp_path / "n").exists()


def test_a_workspace_that_spans_an_upgrade_is_read_as_one():
    """Runs written before a key existed hold the value they computed with: --where finds them, and
    their cell does not differ from the composed one by the key they lack (before, the old verl run was
    not found by --where verl.grader=math-verify and every old run 'differed' on optim.kl_coef)."""
    old_verl = row("old-verl", seed=0, backend="verl", verl__tree_attention="flex", optim__lr=1e-6)
    new_verl = row("new-verl", seed=1, backend="verl", verl__tree_attention="flex", verl__grader="deepscaler",
                   optim__lr=1e-6, optim__kl_coef=0.0)
    old_tiny = row("old-tiny", seed=2, backend="tiny", verl__tree_attention="flex", optim__lr=1e-6)
    assert kept(one_run_per_cell(runs_of(old_verl, new_verl, old_tiny), where=["verl.grader=math-verify"])) == ["old-verl"]
    assert kept(one_run_per_cell(runs_of(old_verl, new_verl, old_tiny), where=["verl.grader=deepscaler"])) == [
        "new-verl", "old-tiny"]  # a tiny run grades nothing: it is at the key's default
    out = one_run_per_cell(runs_of(old_tiny), compose=composed(backend="tiny", optim__kl_coef=0.0, optim__lr=1e-6))
    assert kept(out) == ["old-tiny"] and not [w for w in out.warnings if "kl_coef" in w]


def test_a_key_outside_the_run_identity_does_not_make_a_run_differ_from_its_cell():
    """Found by a docs pass: every evidence run "differed from its cell" in verl.keep_checkpoints (its default
    changed after they ran), a key that changes what stays on disk, not what a run computes (not in the run id);
    a computed key that differs is still said."""
    import pandas as pd

    from arctl.report.cells import _not_composed

    cell = {"experiment": "e", "arm": "a", "seed": 0, "thinking.lam": 0.5, "verl.keep_checkpoints": 2}
    table = pd.DataFrame([
        {"run_id": "r0", "experiment": "e", "arm": "a", "seed": 0, "config.thinking.lam": 0.5,
         "config.verl.keep_checkpoints": 5},
        {"run_id": "r1", "experiment": "e", "arm": "a", "seed": 1, "config.thinking.lam": 0.75,
         "config.verl.keep_checkpoints": 5},
    ])
    (said,) = _not_composed(table, lambda experiment, arm, seed, scale: cell)
    assert said.startswith("1 run(s) differ from their cell as the report's sweep composes it, in thinking.lam: r1;"), said


def test_an_arm_with_several_runs_at_one_seed_is_refused_not_averaged_as_seeds():
    """Found by a review: cells are (experiment, arm, seed, grid point), but figures and tables average by
    arm: a lambda sweep's four points became one row whose interval was their spread, and one arm name in
    two experiments counted seed 0 twice. Such runs are one error line saying how to choose."""
    from arctl.report.cells import one_run_per_arm_seed

    grid = pd.DataFrame([{"run_id": f"lam{lam}-s{s}", "experiment": "main-ar-uniform", "arm": "ar-uniform", "seed": s,
                          "config.thinking.lam": lam} for lam in (0.25, 0.5) for s in (0, 1)])
    with pytest.raises(ReportError, match=r"arm 'ar-uniform' has 2 runs at seed 0, at 2 grid points "
                                          r"\(thinking.lam = 0.25, 0.5\).*--where thinking.lam=VALUE$"):
        one_run_per_arm_seed(grid, ["thinking.lam"])
    one_run_per_arm_seed(grid[grid["config.thinking.lam"] == 0.5], ["thinking.lam"])  # one point: read as seeds
    exps = pd.DataFrame([{"run_id": f"{e}-s0", "experiment": e, "arm": "grpo", "seed": 0} for e in ("r1-7b", "ablation-vr")])
    with pytest.raises(ReportError, match=r"has 2 runs at seed 0, in 2 experiments \(ablation-vr, r1-7b\).*--experiment NAME$"):
        one_run_per_arm_seed(exps)
    # one run listed under two experiments (a shared arm serving both) is one run
    one_run_per_arm_seed(pd.concat([exps.iloc[:1], exps.iloc[:1].assign(experiment="ablation-dense")]))
    one_run_per_arm_seed(exps.assign(seed=[None, None]))  # runs without a seed have no seed to be counted at


def test_compare_paper_on_a_table_the_paper_does_not_have_is_one_error():
    """Found by a review: `--table budget_auc --compare-paper` wrote our rows alone, no paper rows and no word."""
    from arctl.report.tables import paper_rows

    with pytest.raises(ReportError, match=r"the paper has no table 'budget_auc' \(the paper's tables here: anytime, final\)"):
        paper_rows({"name": "budget_auc", "key": "eval/{dataset}/curve_auc"}, ["AMC22", "Avg"])
    assert len(paper_rows({"name": "table_final", "paper_table": "final"}, ["AMC22", "Avg"]))


def test_a_run_without_a_seed_draws_no_seed_line():
    """The history says seed -1 for a run without one: it counts in the mean and draws no "seed -1" line
    (two such runs of an arm were one zig-zag line)."""
    from arctl.report.score_curve import seed_table

    acc = pd.DataFrame({"arm": ["grpo"] * 6, "seed": [-1, -1, -1, -1, 0, 0], "dataset": ["toy"] * 6,
                        "budget": [16, 32, 16, 32, 16, 32], "value": [.1, .2, .5, .6, .3, .4]})
    assert seed_table(acc)["seed"].tolist() == [0, 0]


def test_a_run_is_finished_when_its_clean_exit_record_comes_at_its_last_step():
    """From a hunt: a stopped (preempted, cancelled) run closes its W&B run cleanly, before its last step; the
    exit record alone took it for finished. An eval-only run trains no step; an earlier reader's table, without
    the columns, counts every run finished."""
    from arctl.report.cells import finished_run

    done = {"state": "finished", "last_step": 10, "config.trainer.total_steps": 10}
    assert finished_run(done) and finished_run({**done, "last_step": 11})
    assert not finished_run({**done, "last_step": 7}) and not finished_run({**done, "state": "failed"})
    assert finished_run({**done, "last_step": 0, "config.verl.eval_only": True})
    assert finished_run({"state": "finished"}) and finished_run({})


def test_a_run_of_an_arm_removed_from_its_experiment_is_named_when_it_is_read(tmp_path):
    """From a hunt: an arm removed from an experiment after it ran (or renamed) kept its runs in the workspace, and
    the experiment's figure and tables read them beside the new runs without a word (a run whose cell still exists
    but differs is named: `differ from their cell`)."""
    import wandb

    from arctl.compose.experiment import load_experiment
    from arctl.compose.resolve import resolve_arm

    os.environ.setdefault("WANDB_SILENT", "true")
    os.environ["WANDB_MODE"] = "offline"
    ws = tmp_path / "ws"
    grpo = load_experiment("main-grpo")
    budgets = resolve_arm(grpo, "grpo", 0, "tiny").config["eval"]["budgets"]
    kept = _write(ws, resolve_arm(grpo, "grpo", 0, "tiny"), {b: 0.2 for b in budgets})
    old = resolve_arm(grpo, "grpo", 1, "tiny")
    old.config["arm"] = "grpo-removed"  # an arm the experiment had when it ran
    removed = _write(ws, old, {b: 0.4 for b in budgets})
    wandb.teardown()
    res = runner.invoke(app, ["report", "--table", "final", "--experiment", "main-grpo", "--workdir", str(ws),
                              "--out", str(tmp_path / "t"), "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert {r["run_id"] for r in doc["runs"]} == {kept, removed}
    (said,) = [w for w in doc["warnings"] if "no longer compose" in w]
    assert said == (f"1 run(s) of main-grpo/grpo-removed, which the project's specs no longer compose (an arm or "
                    f"experiment removed or renamed since they ran, or a plugin missing), are read as they ran: {removed}")


def test_a_run_its_job_says_stopped_is_left_out_of_final_values_at_the_paper_scale_and_from_an_export(tmp_path):
    """From a hunt: at the paper scale `trainer.total_steps` is null (an epoch), so a run preempted (verl's task
    runner closes its W&B run cleanly after a stop) looked finished to its W&B files alone. The job's word
    (status.json; the state an export's index keeps) says it has not completed."""
    import wandb

    from arctl.compose.experiment import load_experiment
    from arctl.compose.resolve import resolve_arm
    from arctl.launch.status_file import write_status

    os.environ.setdefault("WANDB_SILENT", "true")
    os.environ["WANDB_MODE"] = "offline"
    ws = tmp_path / "ws"
    grpo = load_experiment("main-grpo")
    runs = [resolve_arm(grpo, "grpo", seed, "paper", user_overrides=["trainer.total_steps=null"]) for seed in (0, 1)]
    budgets = runs[0].config["eval"]["budgets"]
    assert runs[0].config["trainer"]["total_steps"] is None
    done, stopped = (_write(ws, run, {b: 0.2 for b in budgets}) for run in runs)
    wandb.teardown()
    write_status(ws / "runs" / done, state="completed")
    write_status(ws / "runs" / stopped, state="preempted")
    for where, extra in ((ws, []), (tmp_path / "export", ["--unfinished"])):
        if extra:  # the export keeps the job's word in its index
            res = runner.invoke(app, ["export", "--workdir", str(ws), "--out", str(where), *extra, "--json"])
            assert res.exit_code == 0, res.output
        res = runner.invoke(app, ["report", "--table", "final", "--experiment", "main-grpo", "--workdir", str(where),
                                  "--out", str(tmp_path / f"t{len(extra)}"), "--json"])
        assert res.exit_code == 0, res.output
        doc = json.loads(res.stdout)
        assert {r["run_id"] for r in doc["runs"]} == {done}, (where, doc["runs"])
        (said,) = [w for w in doc["warnings"] if w.startswith("left out")]
        assert f"{stopped} (its job says preempted at step" in said, said


def test_an_exports_guess_of_unknown_is_not_taken_for_its_jobs_word(tmp_path):
    """From a review: an export of a run without status.json whose W&B files do not say it completed (every
    paper-scale run: total_steps null) records state "unknown"; a report read that as the job's word and left the
    run out as "its job says unknown"."""
    from arctl.launch.status_file import write_status
    from arctl.report.export import INDEX_FILE, UNKNOWN_STATE, job_states

    (tmp_path / "runs" / "a").mkdir(parents=True)
    (tmp_path / "runs" / "b").mkdir(parents=True)
    write_status(tmp_path / "runs" / "b", state="preempted")
    (tmp_path / INDEX_FILE).write_text(json.dumps({"runs": {
        "a": {"state": UNKNOWN_STATE, "files": {}}, "c": {"state": "completed", "files": {}}}}))
    assert job_states(tmp_path, ["a", "b", "c", "d"]) == {"b": "preempted", "c": "completed"}


def test_a_run_that_matches_the_cell_only_where_the_runs_differ_is_not_the_cell():
    """From a hunt: two runs of a cell launched with scale.budgets=[8,16,24,32], one of them with the cell's
    optim.loss_norm_len: neither is what the sweep composes, but that one was read, silently (after an upgrade
    that derived loss_norm_len from the budgets, the old run was read, not the one just launched)."""
    cell = composed(optim__loss_norm_len=32, eval__budgets=[48, 96, 144, 192])
    both = [row("old", optim__loss_norm_len=192, eval__budgets=[8, 16, 24, 32]),
            row("new", optim__loss_norm_len=32, eval__budgets=[8, 16, 24, 32])]
    with pytest.raises(ReportError) as err:
        one_run_per_cell(runs_of(*both), compose=cell, source="/ws")
    msg = str(err.value)
    assert "\n" not in msg and "has 2 runs in /ws that differ in optim.loss_norm_len" in msg
    assert "none is the cell as the report's sweep composes it" in msg
    assert kept(one_run_per_cell(runs_of(*both), where=["optim.loss_norm_len=32"], compose=cell)) == ["new"]
    # a third run that is the cell wins, and keys a run does not compute with never count
    exact = row("exact", optim__loss_norm_len=32, eval__budgets=[48, 96, 144, 192])
    assert kept(one_run_per_cell(runs_of(*both, exact), compose=cell)) == ["exact"]
    inactive = composed(optim__loss_norm_len=32, budget_control__method="none", budget_control__l1_targets=[1, 2])
    two = [row("a", optim__loss_norm_len=192, budget_control__method="none", budget_control__l1_targets=[1, 2]),
           row("b", optim__loss_norm_len=32, budget_control__method="none", budget_control__l1_targets=[3])]
    out = one_run_per_cell(runs_of(*two), compose=inactive)
    # an inactive method's knob is not a difference: the one warning names the run read and the one left out
    assert kept(out) == ["b"] and len(out.warnings) == 1 and "l1_targets" not in out.warnings[0]
    assert "read b (optim.loss_norm_len=32" in out.warnings[0] and "left out a (optim.loss_norm_len=192)" in out.warnings[0]


def _write_launched(ws, experiment, arm, seed, value, *user) -> str:
    """A run of ``experiment``/``arm`` at ``seed`` (tiny scale, ``user`` overrides) as a launch freezes its config,
    with one offline W&B row (``eval/toy/final_acc`` = ``value``); returns its run id."""
    import yaml

    from arctl.compose.experiment import load_experiment
    from arctl.compose.resolve import resolve_arm
    from arctl.launch.launcher import items_from_resolved
    from arctl.track.writer import open_run

    os.environ.setdefault("WANDB_SILENT", "true")
    run = resolve_arm(load_experiment(experiment), arm, seed, "tiny", user_overrides=list(user))
    (item,) = items_from_resolved([run])  # the config as the launch freezes it (run id, W&B id)
    config = {**item.config, "wandb": {**item.config["wandb"], "mode": "offline"}}
    run_dir = ws / "runs" / config["run_id"]
    run_dir.mkdir(parents=True)
    (run_dir / "config.yaml").write_text(yaml.safe_dump(config))
    w = open_run(config, run_dir)
    w.log({"trainer/global_step": 0, "eval/toy/final_acc": value})
    w.finish()
    return config["run_id"]


def test_a_workspace_run_launched_on_its_own_serves_the_cells_it_is_by_config(tmp_path):
    """From a hunt: `arctl run main-grpo --seeds 8-21` writes no shared.json (only a share_arms sweep does), so Fig. 5
    (ablation-decouple) drew GRPO from the 8 runs the paper's sweep had marked, where claim 5 paired all 22. A
    workspace run of another experiment whose config is a requested cell's, names aside, is that cell's run, as a
    W&B project's is; a run of another config serves nothing."""
    from arctl.report.data import read_report_runs

    def write(*args):
        return _write_launched(tmp_path / "ws", *args)

    grpo = [write("main-grpo", "grpo", seed, 0.3 + seed / 100) for seed in (0, 1, 3)]
    other = write("main-grpo", "grpo", 2, 0.9, "thinking.lam=0.75")  # a config no ablation-decouple cell has
    decouple = write("ablation-decouple", "grpo-decouple", 0, 0.5)
    import wandb

    wandb.teardown()
    # a config.yaml that cannot be read: the run is read by its W&B config, and serves by it, in the first read too
    (tmp_path / "ws" / "runs" / grpo[2] / "config.yaml").write_text("{{{: [")
    for _ in range(2):  # cold, then from the read's cache: the same runs
        data = read_report_runs({"experiments": ["ablation-decouple"]}, metrics=["eval/*"], workdir=tmp_path / "ws",
                                cache_dir=tmp_path / "cache", progress=False, processes=1)
        used = {(r["experiment"], r["arm"], r["seed"]): r["run_id"] for r in data.used_runs()}
        assert used == {("ablation-decouple", "grpo", 0): grpo[0], ("ablation-decouple", "grpo", 1): grpo[1],
                        ("ablation-decouple", "grpo", 3): grpo[2], ("ablation-decouple", "grpo-decouple", 0): decouple}
        assert other not in set(data.history["run_id"])


def test_one_computation_run_under_two_experiments_names_is_read_once_not_refused(tmp_path):
    """From a review: `arctl run ablation-vr`, then `arctl run ablation-decouple` trains GRPO twice (no share_arms
    across two commands); a report of main-grpo read both as its GRPO run, and stopped: "2 runs that differ in
    experiment", whose `--where experiment=...` then left other arms out. One computation is one cell's run: the
    cell's own run where there is one, else the first by id, with a note; a run of another config still counts."""
    import warnings

    from arctl.report.data import read_report_runs

    ws = tmp_path / "ws"
    vr = _write_launched(ws, "ablation-vr", "grpo", 0, 0.30)
    dec = _write_launched(ws, "ablation-decouple", "grpo", 0, 0.31)
    import wandb

    wandb.teardown()
    common = dict(metrics=["eval/*"], workdir=ws, cache_dir=tmp_path / "cache", progress=False, processes=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        data = read_report_runs({"experiments": ["main-grpo"]}, **common)
    assert [(r["experiment"], r["arm"], r["seed"], r["run_id"]) for r in data.used_runs()] == [
        ("main-grpo", "grpo", 0, min(vr, dec))]
    assert any("2 runs of the same config" in w and f"left out {max(vr, dec)}" in w for w in data.runs.warnings)
    # the cell's own run where there is one: ablation-decouple's own GRPO, not ablation-vr's
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        data = read_report_runs({"experiments": ["ablation-decouple"]}, **common)
    assert {(r["arm"], r["run_id"]) for r in data.used_runs()} == {("grpo", dec)}
