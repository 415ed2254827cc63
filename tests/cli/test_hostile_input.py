"""The second round of hostile input (issue 25), case by case: every case is one ``error:`` line,
exit 2, no traceback, the workspace and the specs byte-identical, no sbatch call
(tests/support/bad_input.py), and no secret in what is printed. The families are fuzzed in
tests/cli/test_fuzz_input.py."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from bad_input import launch_args

KEY = "planted-key-0123456789"
RUN = ["run", "ablation-vr", "--arm", "grpo"]


@pytest.fixture
def key(monkeypatch):
    monkeypatch.setenv("WANDB_API_KEY", KEY)
    return KEY


# 1. no resolver can read the environment, however the interpolation is built
BUILT = {
    "decode (as reported)": ["wandb.project=$", "wandb.name='${oc.decode:\"${wandb.project}{oc.env:WANDB_API_KEY}\"}'"],
    "decode into an added key": ["+tiny.task.search.e=${oc.decode:'${oc.env:WANDB_API_KEY}'}"],
    "create": ["wandb.name=${oc.create:'{a: 1}'}"],
    "text that becomes an interpolation": ["wandb.project=$", "wandb.name=${wandb.project}{oc.env:WANDB_API_KEY}"],
    "env inside an allowed resolver": ["eval.grid='${arctl.grid:${scale.budgets},${oc.env:WANDB_API_KEY}}'"],
    "the clock": ["wandb.name=run-${now:%H%M%S}"],
    "hydra's runtime": ["wandb.name=${hydra:runtime.cwd}"],
    "oc.dict": ["wandb.notes=${oc.dict.keys:wandb}"],
    "an escaped interpolation": ["wandb.name=\\${oc.env:WANDB_API_KEY}"],
}


@pytest.mark.parametrize("overrides", BUILT.values(), ids=BUILT.keys())
@pytest.mark.parametrize("command", ["run", "show"])
def test_no_interpolation_reaches_the_environment(sandbox, key, overrides, command):
    args = [*RUN, *overrides, *launch_args(sandbox)] if command == "run" else ["show", "ablation-vr", *overrides]
    result = sandbox.check_refused(*args)
    assert key not in result.err + result.out


def test_an_edited_spec_cannot_decode_the_key_either(sandbox, key):
    (sandbox.specs / "experiments" / "mine.yaml").write_text(
        "description: x\noverrides: [\"wandb.project=$\", "
        "\"wandb.name='${oc.decode:\\\"${wandb.project}{oc.env:WANDB_API_KEY}\\\"}'\"]\n"
        "arms:\n  a: [algo=grpo, prior=base]\n")
    result = sandbox.check_refused("run", "mine", *launch_args(sandbox))
    assert key not in result.err and "oc.decode" in result.err


def test_arctls_own_interpolations_still_work(sandbox):
    ok = sandbox.run("show", "ablation-vr", "--arm", "grpo", "--json", "thinking.budgets=[${scale.budgets.1}]",
                     "eval.grid='${arctl.grid:${scale.budgets},${eval.grid_size}}'")
    assert ok.code == 0, ok.err


def test_the_grid_resolver_is_bounded_by_the_grid_size_range(sandbox):
    result = sandbox.check_refused(*RUN, "eval.grid='${arctl.grid:${scale.budgets},100000000}'", *launch_args(sandbox))
    assert "eval.grid_size" in result.err


# 2. YAML bombs and other shapes that blow up whatever walks them
def _bomb(levels: int = 9) -> str:
    lines = ["l0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    lines += [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9)}]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


SPEC = "description: x\narms:\n  a: [algo=grpo, prior=base]\n"
BAD_YAML = {
    "billion laughs": SPEC + _bomb(),
    "nested 3000 deep": SPEC + "deep: " + "[" * 3000 + "]" * 3000 + "\n",
    "a recursive alias": SPEC + "loop: &a [*a]\n",
    "over 1 MiB": SPEC + "# " + "x" * (1 << 20) + "\n",
}


@pytest.mark.parametrize("text", BAD_YAML.values(), ids=BAD_YAML.keys())
@pytest.mark.parametrize("command", [["run", "mine"], ["show", "mine"], ["ls"]])
def test_a_yaml_bomb_in_a_spec_is_one_line(sandbox, text, command):
    (sandbox.specs / "experiments" / "mine.yaml").write_text(text)
    result = sandbox.check_refused(*command, *(launch_args(sandbox) if command[0] == "run" else []))
    assert "mine.yaml" in result.err


def test_a_yaml_bomb_in_a_sweep_grid_is_one_line(sandbox):
    (sandbox.specs / "sweeps" / "bomb.yaml").write_text(
        "description: x\nexperiments: [ablation-vr]\n" + _bomb() + "grid: {thinking.lam: *l8}\n")
    assert "bomb.yaml" in sandbox.check_refused("sweep", "bomb", *launch_args(sandbox)).err


# 5. accepted but wrong, now refused
@pytest.mark.parametrize("args", [
    ["cluster.mem_gb=0.0001"],  # would be --mem=0MB: the whole node
    ["experiment=../../x"], ["arm=../y"], ["seed=7"], ["+seed=7"],  # identity is not an override
    ["+tiny.x=[nan,inf]"], ["+tiny.x=[1e300]"], ["+verl.y=[[1,nan]]"], ["+tiny.z={a: [inf]}"],
    ["--scale", "tiny", "scale=paper"], ["--scale", ""], ["--executor", ""], ["--workdir", ""],
    ["thinking.lam=" + "[" * 5000 + "]" * 5000], ["thinking.lam=" + "1" * 5000],
], ids=["mem-0", "experiment", "arm", "seed", "+seed", "nan-list", "huge-list", "nested-nan", "dict-inf",
        "scale-conflict", "empty-scale", "empty-executor", "empty-workdir", "nested-5000", "long-5000"])
def test_values_once_accepted_but_wrong_are_refused(sandbox, args):
    base = [a for a in launch_args(sandbox) if not (args[0] in ("--executor", "--workdir") and a in (args[0],))]
    if args[0] in ("--executor", "--workdir"):  # the case replaces the option, not adds a second one
        i = launch_args(sandbox).index(args[0])
        base = launch_args(sandbox)[:i] + launch_args(sandbox)[i + 2:]
    sandbox.check_refused(*RUN, *args, *base)


def test_an_empty_workdir_is_refused_by_every_command_that_takes_one(sandbox):
    for command in (["status"], ["logs", "x"], ["cancel", "x"], ["resume", "x"], ["report", "--claims"], ["repair"]):
        sandbox.check_refused(*command, "--workdir", "")


def test_logs_tail_must_not_be_negative(sandbox):
    sandbox.add_runs()
    sandbox.check_refused("logs", "main-grpo_grpo_s0", "--tail", "-1", "--workdir", str(sandbox.ws))


def test_terminal_escapes_in_user_text_are_printed_escaped(sandbox):
    result = sandbox.check_refused(*RUN, "thinking.lam=\x1b]0;pwned\x07\x1b[2J", *launch_args(sandbox))
    assert "\x1b" not in result.err and "\x07" not in result.err and "\\x1b" in result.err


def test_a_spec_linked_to_a_file_outside_its_folder_is_refused_without_echoing_it(sandbox, tmp_path):
    secret = tmp_path / "private.yaml"
    secret.write_text("hunter2_token: s3cr3t-value\n")
    (sandbox.specs / "experiments" / "leak.yaml").symlink_to(secret)
    result = sandbox.check_refused("run", "leak", *launch_args(sandbox))
    assert "hunter2" not in result.err and "s3cr3t" not in result.err and "outside" in result.err


def test_a_long_name_or_filter_is_one_line(sandbox):
    sandbox.add_runs()
    sandbox.check_refused("run", "a" * 300, *launch_args(sandbox))
    sandbox.check_refused("show", "b" * 300)
    sandbox.check_refused("cp", "c" * 300)
    sandbox.check_refused("status", "x" * 100_000, "--workdir", str(sandbox.ws))


# 3. a damaged or odd workspace: one line naming it, and how to recover
def _truncate(ws):
    path = ws / "registry.sqlite"
    path.write_bytes(path.read_bytes()[:700])


def _garbage(ws):
    (ws / "registry.sqlite").write_bytes(b"this is not a database\n" * 50)


def _foreign_sqlite(ws):  # another program's database in its place (arctl added its tables to it before)
    import sqlite3

    path = ws / "registry.sqlite"
    path.unlink()
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)")
    conn.commit()
    conn.close()


def _old_schema(ws):
    path = ws / "registry.sqlite"
    path.unlink()
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE runs (run_id TEXT PRIMARY KEY, experiment TEXT, arm TEXT)")


def _schema_not_utf8(ws):
    """Found by the 5,000-example fuzz run: two bytes over the schema text, SQLite's error message
    quotes them and Python's decoding of the message raised UnicodeDecodeError (a traceback)."""
    path = ws / "registry.sqlite"
    data = bytearray(path.read_bytes())
    at = int(len(data) * 0.125)
    data[at:at + 2] = b'"\x80'
    path.write_bytes(bytes(data))


def _edit(ws, sql: str) -> None:
    conn = sqlite3.connect(ws / "registry.sqlite")
    with conn:
        conn.execute(sql)
    conn.close()


def _text_metric(ws):
    _edit(ws, "UPDATE runs SET metric_value='not a number'")


def _shell_job_id(ws):
    _edit(ws, "UPDATE runs SET job_id='--user=root'")


def _value_not_utf8(ws):
    _edit(ws, "UPDATE runs SET state=CAST(X'80FF' AS TEXT)")


def _path_run_id(ws):
    _edit(ws, "UPDATE runs SET run_id='../../../../elsewhere/x' WHERE arm='a'")


FILE_DAMAGE = {"truncated": _truncate, "not sqlite": _garbage, "old schema": _old_schema,
               "schema not utf-8": _schema_not_utf8, "another program's sqlite": _foreign_sqlite}
ROW_DAMAGE = {"text metric": _text_metric, "job id that is an option": _shell_job_id,
              "run id that is a path": _path_run_id, "value not utf-8": _value_not_utf8}
DAMAGE = {**FILE_DAMAGE, **ROW_DAMAGE}
READ_ROWS = [["status"], ["status", "--no-refresh"], ["status", "lt"], ["cancel", "lt"], ["resume", "lt"]]
COMMANDS = [*READ_ROWS, ["logs", "lt_b"], ["run", "lt", "--executor", "slurm"], ["sweep", "priors", "--executor", "slurm"]]
def _deleted(ws):  # status said "no arctl workspace", not the run folders and `arctl repair` (from an audit)
    (ws / "registry.sqlite").unlink()


@pytest.mark.parametrize("command", [["status"], ["logs", "lt_a"], ["cancel", "lt"], ["resume", "lt"]])
def test_an_export_is_said_to_be_one_not_a_registry_to_repair(sandbox, command):
    """A review of the deleted-registry message: an export has runs/ and never a registry; repair refuses it."""
    sandbox.add_run_dirs()
    (sandbox.ws / "registry.sqlite").unlink()
    (sandbox.ws / "export.json").write_text('{"runs": {}}')
    err = sandbox.check_refused(*command, "--workdir", str(sandbox.ws)).err
    assert "is an arctl export: reports read it" in err and "arctl repair" not in err


# (a launch of other runs into a workspace whose registry was deleted makes a new one: the folders stay pointed out)
CASES = ([pytest.param(d, c, id=f"{' '.join(c)}-{n}") for n, d in FILE_DAMAGE.items() for c in COMMANDS]
         + [pytest.param(_deleted, c, id=f"{' '.join(c)}-deleted") for c in COMMANDS if c[0] != "sweep"]
         + [pytest.param(d, c, id=f"{' '.join(c)}-{n}") for n, d in ROW_DAMAGE.items() for c in READ_ROWS])


@pytest.mark.parametrize("damage, command", CASES)
def test_a_damaged_registry_is_one_line_naming_the_way_to_recover(sandbox, damage, command):
    """A file that is not a usable registry fails every command; a row that is wrong fails every command
    that reads it (a job id that is an option never reaches scancel, a run id that is a path never
    names a folder)."""
    sandbox.add_run_dirs()
    damage(sandbox.ws)
    result = sandbox.check_refused(*command, "--workdir", str(sandbox.ws))
    assert "registry.sqlite" in result.err and "arctl repair" in result.err, result.err
    assert not (sandbox.root / "elsewhere").exists()
    assert "scancel" not in (sandbox.calls.read_text() if sandbox.calls.exists() else "")


@pytest.mark.parametrize("damage", DAMAGE.values(), ids=DAMAGE.keys())
def test_repair_rebuilds_the_registry_from_the_run_folders(sandbox, damage):
    import json

    ids = sandbox.add_run_dirs()
    fields = ("run_id", "experiment", "arm", "seed", "state", "executor", "job_id", "attempts", "wandb_id", "error")

    def rows():
        return sorted(tuple(r[f] for f in fields)
                      for r in json.loads(sandbox.run("status", "--workdir", str(sandbox.ws), "--json").out))

    before = rows()
    damage(sandbox.ws)
    done = sandbox.run("repair", "--workdir", str(sandbox.ws), "--json")
    assert done.code == 0, done.err + (done.crash or "")
    doc = json.loads(done.out)
    assert sorted(r["run_id"] for r in doc["runs"]) == sorted(ids) and doc["kept"]
    assert rows() == before and {r[4] for r in before} == {"COMPLETED"}
    assert Path(doc["kept"]).is_file() and Path(doc["kept"]).parent == sandbox.ws


def test_a_status_file_that_is_not_a_mapping_is_ignored_not_a_traceback(sandbox):
    ids = sandbox.add_run_dirs()
    (sandbox.ws / "runs" / ids[0] / "status.json").write_text("[1, 2, 3]")
    (sandbox.ws / "runs" / ids[1] / "status.json").write_text("[" * 3000 + "]" * 3000)
    done = sandbox.run("status", "--workdir", str(sandbox.ws))
    assert done.code == 0 and done.crash is None, done.err + (done.crash or "")


@pytest.mark.parametrize("where", ["a file", "/proc/1", "/sys/kernel", "under a file"])
@pytest.mark.parametrize("command", [["status"], ["run", "ablation-vr", "--arm", "grpo", "--executor", "slurm"]])
def test_a_workdir_that_cannot_be_a_workspace_is_one_line(sandbox, where, command):
    target = {"a file": str(sandbox.specs / "experiments" / "ablation-vr.yaml"), "/proc/1": "/proc/1",
              "/sys/kernel": "/sys/kernel", "under a file": str(sandbox.specs / "experiments" / "ablation-vr.yaml" / "ws")}
    sandbox.check_refused(*command, "--workdir", target[where])


@pytest.mark.parametrize("args", [["cp", "ablation-vr", "/proc/1/mine.yaml"],
                                  ["cp", "ablation-vr", "/sys/kernel/mine.yaml"]])
def test_copying_a_spec_where_nothing_can_be_written_is_one_line(sandbox, args):
    sandbox.check_refused(*args)


# 5. arctl resume reads config.yaml back: it is input too
EDITS = {
    "out of range": ("total_steps: 2,", "total_steps: -5,"),
    "an interpolation": ("wandb:\n", "wandb:\n  notes: ${oc.env:WANDB_API_KEY}\n"),
    "another run's identity": ("seed: 0", "seed: 7"),
    "a valid change": ("total_steps: 2,", "total_steps: 3,"),
    "not yaml": ("trainer: {", "trainer: [{"),
}


@pytest.mark.parametrize("old, new", EDITS.values(), ids=EDITS.keys())
def test_resume_refuses_a_hand_edited_config(sandbox, key, old, new):
    ids = sandbox.add_run_dirs()
    path = sandbox.ws / "runs" / ids[0] / "config.yaml"
    text = path.read_text()
    assert old in text, text
    path.write_text(text.replace(old, new, 1))
    result = sandbox.check_refused("resume", ids[0], "--force", "--executor", "slurm", "--workdir", str(sandbox.ws))
    assert "config.yaml" in result.err and key not in result.err


def test_resume_of_an_untouched_config_is_accepted(sandbox):
    ids = sandbox.add_run_dirs()
    result = sandbox.run("resume", ids[0], "--force", "--executor", "slurm", "--workdir", str(sandbox.ws))
    assert result.code == 2 and "sbatch refused" in result.err  # got as far as submitting (the shim refuses)


# 3. a read-only workspace, a full disk (a private mount namespace: tests/support/mounts.py)
@pytest.fixture
def cli_in(sandbox):
    """``cli_in(args, read_only=..., full=...)``: ``arctl ARGS`` in a subprocess, under those mounts."""
    import os
    import sys

    import fresh_machine
    import mounts

    why = fresh_machine.available()
    if why:
        pytest.skip(f"cannot make mounts here: {why}")
    env = {**os.environ, "PATH": sandbox.path, "ARCTL_SPECS": str(sandbox.specs)}
    env.pop("ARCTL_TEST_BACKEND", None)

    def run(args, **mounted):
        return mounts.run([sys.executable, "-m", "arctl.cli.main", *args], env=env, **mounted)

    return run


def _one_error_line(proc) -> str:
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2 and len(lines) == 1 and lines[0].startswith("error:"), (proc.returncode, proc.stderr)
    assert "Traceback" not in proc.stderr + proc.stdout
    return lines[0]


def test_a_read_only_workspace_answers_what_reads_and_refuses_what_writes_in_one_line(sandbox, cli_in):
    from bad_input import snapshot

    ids = sandbox.add_run_dirs()
    ws = str(sandbox.ws)
    before = snapshot(sandbox.ws)
    for args in (["status", "--no-refresh"], ["status"], ["status", "lt", "--json"], ["logs", ids[0]]):
        proc = cli_in([*args, "--workdir", ws], read_only=sandbox.ws)
        assert proc.returncode == 0 and ids[0] in proc.stdout, (args, proc.stderr)
    # the sweep's plan of an export only reads (from a review: it opened the registry to write, and a read-only
    # workspace, an export's usual source, was refused); a dry run says the launch would be refused, and why
    out = sandbox.ws.parent / "exported"
    proc = cli_in(["export", "--workdir", ws, "--out", str(out), "--sweep", "paper", "--seeds", "0"],
                  read_only=sandbox.ws)
    assert "registry.sqlite" not in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    for args in (["run", "lt", "--dry-run"], ["sweep", "paper", "--scale", "tiny", "--seeds", "0", "--dry-run"]):
        line = _one_error_line(cli_in([*args, "--workdir", ws], read_only=sandbox.ws))
        assert "launch would be refused" in line and "read-only" in line.lower(), line
    for args in (["run", "lt", "--force", "--executor", "slurm"], ["resume", ids[0], "--force", "--executor", "slurm"],
                 ["repair"], ["cp", "ablation-vr", f"{ws}/mine.yaml"]):
        line = _one_error_line(cli_in([*args, "--workdir", ws] if args[0] != "cp" else args, read_only=sandbox.ws))
        assert "read-only" in line.lower(), line
    assert snapshot(sandbox.ws) == before


def test_a_full_disk_is_one_line_and_leaves_no_temporary_file(sandbox, cli_in):
    ids = sandbox.add_run_dirs()
    ws = str(sandbox.ws)
    after = sandbox.ws.parent / f"{sandbox.ws.name}.after"
    for args in (["run", "lt", "--force", "--executor", "slurm", "--workdir", ws],
                 ["resume", ids[0], "--force", "--executor", "slurm", "--workdir", ws],
                 ["run", "ablation-vr", "--arm", "grpo", "--executor", "slurm", "--workdir", f"{ws}/new"],
                 ["repair", "--workdir", ws], ["cp", "ablation-vr", f"{ws}/mine.yaml"]):
        proc = cli_in(args, full=sandbox.ws)
        line = _one_error_line(proc)
        assert "space" in line.lower() or "full" in line.lower(), (args, line)
        assert not [p for p in after.rglob("*") if ".tmp" in p.name], (args, sorted(after.rglob("*tmp*")))
    proc = cli_in(["status", "--workdir", ws], full=sandbox.ws)  # reading needs no space
    assert proc.returncode == 0 and ids[0] in proc.stdout, proc.stderr


def test_run_folders_outside_the_registry_are_pointed_out_and_an_export_is_not_repaired(sandbox):
    """A registry emptied (0 bytes) beside its run folders: `arctl status` says so and names `arctl
    repair` (before: "0 run(s): none", exit 0); `arctl repair` of an export (no registry, states in
    export.json) is one error line, not 48 runs rebuilt as failed and to be resumed."""
    import json

    ids = sandbox.add_run_dirs()
    (sandbox.ws / "registry.sqlite").write_bytes(b"")
    done = sandbox.run("status", "--workdir", str(sandbox.ws), "--no-refresh")
    assert done.code == 0 and f"{len(ids)} run folder(s)" in done.out and "arctl repair --workdir" in done.out
    done = sandbox.run("status", "--workdir", str(sandbox.ws), "--json")
    assert json.loads(done.out) == [] and "arctl repair" in done.err
    (sandbox.ws / "export.json").write_text('{"version": 1, "runs": {}}')
    result = sandbox.check_refused("repair", "--workdir", str(sandbox.ws))
    assert "is an arctl export" in result.err


@pytest.mark.parametrize("where", ["a file", "below a file", "inside runs/", "not writable", "a name too long"])
@pytest.mark.parametrize("command", [["--table", "final", "--experiment", "lt"], ["--claims", "priors"],
                                     ["--figure", "tree_mask"]])
def test_a_report_out_that_cannot_be_a_folder_is_one_line_before_any_run_is_read(sandbox, where, command):
    """Found by an adversarial pass: `--out FILE` was a FileExistsError traceback after every run
    had been read; `--out` inside runs/ wrote report files among the run folders (export refused it).
    Found by a later one: a folder that cannot be made (/proc/x: root may write almost anywhere else)
    or a name over the file system's 255 bytes was a traceback from mkdir (exit 1)."""
    sandbox.add_run_dirs()
    (sandbox.root / "afile").write_text("mine\n")
    out = {"a file": sandbox.root / "afile", "below a file": sandbox.root / "afile" / "x",
           "inside runs/": sandbox.ws / "runs" / "rep", "not writable": Path("/proc/arctl-report"),
           "a name too long": sandbox.root / ("a" * 300)}[where]
    result = sandbox.check_refused("report", *command, "--workdir", str(sandbox.ws), "--out", str(out))
    assert "--out" in result.err and ("choose a folder" in result.err or "choose another folder" in result.err)
    assert (sandbox.root / "afile").read_text() == "mine\n"


@pytest.mark.parametrize("args, says", [
    (["--table", "final", "--experiment", "lt", "--where", "foo"], "expected KEY=VALUE"),
    (["--table", "final", "--experiment", "lt", "--where", "=1"], "expected KEY=VALUE"),
    (["--table", "final", "--experiment", "lt", "--where", "thinking.lam=0.5", "--where", "thinking.lam=0.7"],
     "given twice"),
    (["--figure", "tree_mask", "--where", "thinking.lam=0.5"], "--where does not apply"),
    (["--figure", "tree_mask", "--sweep", "priors", "--where", "a=1"], "--sweep, --where do not apply"),
])
def test_a_report_option_that_cannot_apply_is_one_line_before_any_run_is_read(sandbox, args, says):
    """Found by an adversarial pass: a malformed --where was found only after every run had been read
    (and the run cache written into the workspace); a key given twice matched no run ("none of the 2
    runs has that config"); a figure drawn from no runs ignored --where/--sweep/--experiment (exit 0)."""
    sandbox.add_run_dirs()
    result = sandbox.check_refused("report", *args, "--workdir", str(sandbox.ws), "--out", str(sandbox.root / "rep"))
    assert says in result.err and not (sandbox.root / "rep").exists()


def test_a_report_whose_default_folder_cannot_be_made_says_to_give_out(sandbox):
    """`--workdir /proc/x`: the report would go to /proc/x/report (a traceback from mkdir before)."""
    result = sandbox.check_refused("report", "--figure", "tree_mask", "--workdir", "/proc/arctl-ws")
    assert "the default report folder /proc/arctl-ws/report" in result.err and "give --out" in result.err


@pytest.mark.parametrize("name, hint", [("nosuch", "choose one of"), ("l_t", "did you mean 'lt'")])
def test_a_report_of_an_experiment_that_does_not_exist_is_one_line(sandbox, name, hint):
    """Found by an adversarial pass: `--experiment nosuch` beside a real one built the report with a
    note (exit 0), and `--experiment main_grpo` alone suggested `arctl run main_grpo`."""
    sandbox.add_run_dirs()
    for args in (["--experiment", "lt", "--experiment", name], ["--experiment", name]):
        result = sandbox.check_refused("report", "--table", "final", *args, "--workdir", str(sandbox.ws),
                                       "--out", str(sandbox.root / "out"))
        assert f"--experiment {name!r}: no such experiment" in result.err and hint in result.err


def test_a_spec_file_whose_name_is_not_a_name_is_named_with_its_path(sandbox):
    """Found by an adversarial pass: `experiments/My Exp.yaml` made `arctl ls` fail with "experiment
    name 'My Exp' is not a name ... (`arctl ls experiments` lists them)": no file named, and the
    advice was the command that failed."""
    bad = sandbox.specs / "experiments" / "My Exp.yaml"
    bad.write_text("arms: {a: {}}\n")
    result = sandbox.check_refused("ls")
    assert str(bad) in result.err and "rename it" in result.err


@pytest.mark.parametrize("args, says", [
    (["report", "--table", "final", "--workdir", "WS", "--wandb-project", "a/b"], "not both"),
    (["report", "--table", "final", "--workdir", "WS", "--processes", "-3"], "--processes"),
    (["data", "prepare", "-s", "aime24=A.jsonl", "-s", "aime24=B.jsonl", "--no-hub", "-o", "OUT"], "given twice"),
], ids=["workdir-and-wandb-project", "processes-negative", "source-twice"])
def test_contradictory_or_invalid_flags_are_one_line(sandbox, args, says):
    """Found by an adversarial pass: each was accepted silently (--workdir ignored, -3 readers, the last
    --source winning)."""
    args = [{"WS": str(sandbox.ws), "OUT": str(sandbox.root / "out")}.get(a, a) for a in args]
    assert says in sandbox.check_refused(*args).err


@pytest.mark.parametrize("command", ["status", "cancel"])
def test_a_sweep_or_experiment_without_runs_here_is_named_as_such(sandbox, command):
    """Found by a black-box pass: `arctl status priors` in a workspace without its runs said "no run, sweep
    or experiment 'priors'", as if the sweep did not exist."""
    sandbox.add_run_dirs()
    err = sandbox.check_refused(command, "priors", "--workdir", str(sandbox.ws)).err
    assert "sweep 'priors' has no runs in" in err and "`arctl sweep priors --workdir" in err
    err = sandbox.check_refused(command, "main-grpo", "--workdir", str(sandbox.ws)).err
    assert "experiment 'main-grpo' has no runs in" in err and "`arctl run main-grpo --workdir" in err
    err = sandbox.check_refused(command, "nosuch", "--workdir", str(sandbox.ws)).err
    assert "no run, sweep or experiment 'nosuch' in" in err


@pytest.mark.parametrize("command", [["status"], ["status", "lt"], ["logs", "lt_b"], ["repair"]])
def test_a_registry_that_is_a_folder_is_one_line_and_repair_leaves_nothing(sandbox, command):
    """Found by a black-box pass: with registry.sqlite a folder, `status` said "no arctl workspace" and
    `arctl repair` failed on "Is a directory" after writing registry.sqlite.new-<pid> beside it."""
    sandbox.add_run_dirs()
    registry = sandbox.ws / "registry.sqlite"
    registry.unlink()
    registry.mkdir()
    err = sandbox.check_refused(*command, "--workdir", str(sandbox.ws)).err  # nothing written, nothing left
    assert "registry.sqlite is a folder, not a registry file" in err and "arctl repair" in err
