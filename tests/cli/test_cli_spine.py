"""The CLI spine through Typer's runner: ls, show, --version, --json parsed back, exit code 2."""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

import arctl
from arctl.cli.main import app

runner = CliRunner()


def invoke(*args):
    return runner.invoke(app, list(args), catch_exceptions=False)


def test_version():
    result = invoke("--version")
    assert result.exit_code == 0 and result.output.strip() == f"arctl {arctl.__version__}"


def test_ls_experiments_json_lists_every_spec_with_its_arms():
    result = invoke("ls", "experiments", "--json")
    assert result.exit_code == 0
    rows = {r["name"]: r for r in json.loads(result.stdout)}
    assert rows["ablation-vr"]["arms"] == ["grpo", "grpo-vr", "grpo-vr-decouple"]
    assert rows["ablation-vr"]["figure"] == "ablation_vr"
    assert "main-ar-linear" in rows and "ctx-16k" in rows


def test_ls_names_where_a_spec_comes_from_and_json_holds_its_path(tmp_path, monkeypatch):
    from arctl.compose.paths import PROJECT_ROOT

    mine = tmp_path / "mine"
    (mine / "experiments").mkdir(parents=True)
    (mine / "experiments" / "ablation-vr.yaml").write_text((PROJECT_ROOT / "experiments" / "ablation-vr.yaml").read_text())
    monkeypatch.setenv("ARCTL_SPECS", str(mine))
    monkeypatch.chdir(tmp_path)  # not a project: the rest are the shipped specs
    rows = {r["name"]: r for r in json.loads(invoke("ls", "--json").stdout)}
    assert (rows["ablation-vr"]["source"], rows["ablation-vr"]["path"]) == (
        "$ARCTL_SPECS", str(mine / "experiments" / "ablation-vr.yaml"))
    assert rows["main-grpo"]["source"] == "shipped" and Path(rows["main-grpo"]["path"]).is_file()
    table = CliRunner().invoke(app, ["ls"], env={"COLUMNS": "80"}, catch_exceptions=False).stdout
    assert "$ARCTL_SPECS" in table and "shipped" in table and str(PROJECT_ROOT) not in table  # no paths
    shown = invoke("show", "ablation-vr", "--arm", "grpo").stdout
    assert shown.splitlines()[0] == f"ablation-vr: {mine / 'experiments' / 'ablation-vr.yaml'} ($ARCTL_SPECS)"
    doc = json.loads(invoke("show", "main-grpo", "--json").stdout)
    assert doc[0]["source"] == "shipped" and doc[0]["path"] == rows["main-grpo"]["path"]
    monkeypatch.chdir(PROJECT_ROOT)  # the checkout is a project: its specs come from there
    assert {r["source"] for r in json.loads(invoke("ls", "figures", "--json").stdout)} == {"project"}


def test_ls_sweeps_table_and_json():
    table = invoke("ls", "sweeps")
    assert table.exit_code == 0 and "priors" in table.stdout and "ablations" in table.stdout
    rows = json.loads(invoke("ls", "sweeps", "--json").stdout)
    assert {r["name"] for r in rows} >= {"priors", "ablations"}


def test_show_json_round_trips_the_resolved_configs():
    result = invoke("show", "ablation-vr", "thinking.lam=0.25", "--scale", "paper", "--seeds", "0-1", "--json")
    assert result.exit_code == 0, result.output
    runs = json.loads(result.stdout)
    assert [(r["arm"], r["seed"]) for r in runs] == [
        ("grpo", 0), ("grpo", 1), ("grpo-vr", 0), ("grpo-vr", 1), ("grpo-vr-decouple", 0), ("grpo-vr-decouple", 1)
    ]
    assert all(r["config"]["thinking"]["lam"] == 0.25 for r in runs)
    assert runs[2]["config"]["thinking"]["budgets"] == [2000, 4000, 6000, 8000]


def test_show_refuses_what_run_refuses_and_shows_an_arm_given_twice_once():
    """From a review: `show` resolved no trainer.init_from (a name of no arm was shown, and refused by `run`),
    and printed an arm given twice twice (`run` launches it once)."""
    result = invoke("show", "main-grpo", "trainer.init_from=nope")
    assert result.exit_code == 2 and "experiment 'main-grpo' has no arm 'nope'" in result.output, result.output
    result = invoke("show", "ablation-vr", "--arm", "grpo", "--arm", "grpo", "--json")
    assert result.exit_code == 0 and [r["arm"] for r in json.loads(result.stdout)] == ["grpo"]


def test_show_pretty_prints_yaml_for_each_arm():
    result = invoke("show", "ablation-decouple", "--arm", "grpo-decouple")
    assert result.exit_code == 0
    assert "ablation-decouple/grpo-decouple/s0" in result.stdout and "group_size: 4" in result.stdout


@pytest.mark.parametrize(
    "args, needle",
    [
        (["show", "ablation-vx"], "unknown experiment 'ablation-vx'"),
        (["show", "ablation-vr", "thinking.budgets=[4000,2000]"], "not strictly increasing"),
        (["show", "ablation-vr", "nope.key=1"], "unknown config key 'nope.key'"),
        (["show", "ablation-vr", "+nope.key=1"], "adds a new key"),
        (["show", "ablation-vr", "prior=gauss"], "unknown prior option 'gauss'"),
        (["show", "ablation-vr", "--arm", "grpx"], "has no arm 'grpx'"),
        (["show", "ablation-vr", "--seeds", "a,b"], "--seeds"),
        (["show", "ablation-vr", "--scale", "huge"], "unknown scale 'huge'"),
        (["show", "main-ar-uniform", "prior=custom", "thinking.probs=[0.5,0.6,0,0]"], "sums to 1.1"),
    ],
)
def test_user_mistakes_print_one_line_and_exit_2(args, needle):
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    err = result.stderr.strip()
    assert needle in " ".join(err.split()), err
    assert err.startswith("error:") and "Traceback" not in result.output


def test_help_imports_no_heavy_modules():
    code = (
        "import sys, runpy; sys.argv=['arctl','--help']\n"
        "try:\n    runpy.run_module('arctl.cli.main', run_name='__main__')\nexcept SystemExit: pass\n"
        "heavy = [m for m in ('torch','verl','wandb','pandas','hydra','matplotlib','transformers','submitit') if m in sys.modules]\n"
        "print('HEAVY=' + ','.join(heavy))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert "HEAVY=\n" in out.stdout or out.stdout.rstrip().endswith("HEAVY="), out.stdout[-500:]
    assert "Commands" in out.stdout


@pytest.mark.parametrize("args", [[], ["data"]])
def test_a_command_group_alone_prints_its_help_once_and_exits_2(args):
    # the help was printed twice: rich prints it when the "no arguments" error is built, and main()
    # printed ctx.get_help() again
    out = subprocess.run([sys.executable, "-m", "arctl.cli.main", *args], capture_output=True, text=True, timeout=60,
                         env={**__import__("os").environ, "COLUMNS": "100"})
    assert out.returncode == 2, out.stdout + out.stderr
    assert out.stdout.count("Usage:") == 1 and "Commands" in out.stdout, out.stdout


def test_main_builds_the_command_tree_once_and_each_call_is_its_own(capsys, monkeypatch):
    from arctl.cli.main import command, main

    def call(*args):
        monkeypatch.setattr(sys, "argv", ["arctl", *args])
        with pytest.raises(SystemExit) as exit_:
            main()
        return exit_.value.code, capsys.readouterr()

    import typer.main

    built, builds = command(), []
    real = typer.main.get_command
    monkeypatch.setattr(typer.main, "get_command", lambda app: builds.append(app) or real(app))
    assert call("--version") == (0, (f"arctl {arctl.__version__}\n", ""))
    code, out = call("ls", "sweeps", "--json")
    assert code == 0 and "priors" in {r["name"] for r in json.loads(out.out)}
    code, out = call("ls", "--bogus")  # a usage mistake after a good call: its own context, one line
    # (typer's vendored click says "No such option: --bogus", plain click 8.2+ "No such option '--bogus'.")
    assert code == 2 and re.match(r"error: No such option:? '?--bogus", out.err) and len(out.err.splitlines()) == 1
    assert call("--version")[0] == 0 and command() is built and builds == []  # one tree served every call


def test_show_prints_unicode_values_as_written_and_as_the_dry_run_does():
    """Found by a black-box pass: show printed `group: "\u65E5\u672C x"` where run --dry-run printed the text."""
    import yaml

    shown = invoke("show", "main-grpo", 'wandb.group="日本 x"')
    assert shown.exit_code == 0 and "group: 日本 x" in shown.stdout and "\\u65E5" not in shown.stdout
    config = yaml.safe_load(shown.stdout.split("\n", 2)[2])  # the YAML after the header and the rule
    assert config["wandb"]["group"] == "日本 x" and config["experiment"] == "main-grpo"


def test_an_override_of_a_grid_key_is_noted_on_stderr():
    """Found by a black-box pass: `arctl sweep lambda thinking.lam=0.1` turned the grid's 4 values into
    one without a word (the command line wins over the grid, as documented: now it says so)."""
    result = invoke("sweep", "lambda", "thinking.lam=0.1", "--dry-run", "--json")
    assert result.exit_code == 0, result.output
    assert {r["config"]["thinking"]["lam"] for r in json.loads(result.stdout)["runs"]} == {0.1}
    assert "note: thinking.lam=0.1 replaces the sweep's grid over thinking.lam (4 values" in result.stderr
    plain = invoke("sweep", "lambda", "--dry-run", "--json")
    assert "note:" not in plain.stderr and len({r["config"]["thinking"]["lam"] for r in json.loads(plain.stdout)["runs"]}) == 4


def test_cp_into_an_arctl_specs_folder_that_does_not_exist_is_refused(tmp_path, monkeypatch):
    """Found by a black-box pass: with ARCTL_SPECS mistyped, `arctl cp main-grpo` made the folder and a spec
    tree in it (exit 0). An existing one still takes the copy."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ARCTL_SPECS", str(tmp_path / "typo"))
    result = invoke("cp", "main-grpo")
    assert result.exit_code == 2 and "ARCTL_SPECS names" in result.stderr and "mkdir" in result.stderr
    assert list(tmp_path.iterdir()) == []
    (tmp_path / "typo").mkdir()
    assert invoke("cp", "main-grpo").exit_code == 0 and (tmp_path / "typo" / "experiments" / "main-grpo.yaml").is_file()


def test_ls_prints_a_specs_description_without_its_control_sequences(tmp_path, monkeypatch):
    """From a review: `arctl ls` escaped rich markup in a spec's description but passed ESC through: a
    description holding ESC[2J cleared the terminal."""
    from typer.testing import CliRunner

    from arctl.cli.main import app

    (tmp_path / "experiments").mkdir()
    (tmp_path / "experiments" / "mine.yaml").write_text('description: "boom \\e[2J gone\\nsecond\\tline"\narms: {a: []}\n')
    monkeypatch.setenv("ARCTL_SPECS", str(tmp_path))
    res = CliRunner().invoke(app, ["ls", "experiments"])
    assert res.exit_code == 0, res.output
    assert "\x1b" not in res.output and "\\x1b" in res.output  # written as an escape (the table folds it)
    assert "\\n" not in res.output and "\\t" not in res.output and "second" in res.output  # lines and tabs kept


def test_logs_follow_prints_what_comes_next_once_whatever_the_bytes(sandbox, monkeypatch):
    """From a review: the followed offset was the length of the decoded text, so a \\r\\n (one byte short) repeated
    what came next and an invalid byte (two long) lost it; a character split between two reads was garbled."""
    import dataclasses

    from arctl.launch import control, refresh, states

    run_id = sandbox.add_runs()[0]
    log = sandbox.root / "job.out"
    log.write_bytes(b"first\r\nbad \xff\xfe bytes\n")
    appended = [b"NEW1 caf\xc3", b"\xa9 NEW2\n"]  # an \u00e9 split between two reads
    calls = []

    def fake_refresh(reg, workspace, records, reading=False):
        calls.append(1)
        if len(calls) > 1 and appended:
            with open(log, "ab") as fh:
                fh.write(appended.pop(0))
        done = len(calls) > 3
        return [dataclasses.replace(r, state=states.COMPLETED if done else states.RUNNING) for r in records]

    monkeypatch.setattr(refresh, "refresh", fake_refresh)
    monkeypatch.setattr(control, "log_files", lambda workspace, rec: [log])
    out = sandbox.run("logs", run_id, "--follow", "--tail", "0", "--workdir", str(sandbox.ws))
    assert out.code == 0 and out.crash is None, out.err
    assert out.out.count("NEW1 caf\u00e9 NEW2\n") == 1 and out.out.count("NEW") == 2, out.out
    assert "first" in out.out and "\ufffd" in out.out  # the invalid bytes shown as such, once


def test_the_closing_figure_command_of_a_run_whose_spec_is_not_here_is_left_out(sandbox):
    """From a hunt: `arctl resume RUN` needs only the run's frozen config, but after its job had trained, the
    closing `arctl report --figure` line loaded the run's experiment spec; run where that spec is not on the
    search path, it was `error: unknown experiment` and exit 2 (the README: an error line means nothing was
    submitted), and the --json document was never printed."""
    from types import SimpleNamespace

    from arctl.cli.launching import figure_lines

    items = [SimpleNamespace(experiment="ablation-vr"), SimpleNamespace(experiment="an-experiment-not-here")]
    assert figure_lines(items, None)[0] == ["arctl report --figure ablation_vr"]
