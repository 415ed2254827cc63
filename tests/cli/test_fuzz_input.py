"""Fuzzed bad input (hypothesis): generated overrides, options, targets and spec files that are all
wrong in at least one place. For each: exit 2, exactly one ``error:`` line, no traceback, the
workspace and the spec folder byte-identical, no ``sbatch`` or ``scancel`` call (SLURM shims on
PATH record every call): tests/support/bad_input.py.

Issue 25 added the families of its second round: interpolations built by resolvers, YAML anchors and
aliases, damaged SQLite registries, and read-only or full filesystems (subprocesses in a private
mount namespace: a tenth of the examples).

Example counts: ``ARCTL_FUZZ_EXAMPLES`` per test (default 150; in CI). In CI
(``CI=true``) the examples are derandomized, so a red run is reproducible; run locally with a
larger count to search further."""

from __future__ import annotations

import math
import os

import pytest
import yaml
from bad_input import launch_args
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from arctl.compose.limits import list_ranges, ranges
from arctl.config.ranges import SEED_MAX, Range

RANGES, LIST_RANGES = ranges(), list_ranges()

EXAMPLES = int(os.environ.get("ARCTL_FUZZ_EXAMPLES", "150"))
FUZZ = settings(
    max_examples=EXAMPLES, deadline=None, database=None, derandomize=os.environ.get("CI") == "true",
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
EXPERIMENTS = ["main-grpo", "main-ar-uniform", "ablation-vr"]
SWEEPS = ["priors"]
VALID = ["trainer.total_steps=5", "wandb.mode=offline", "data.train_batch_size=4", "cluster.time_min=30", "algo=grpo",
         "thinking.lam=0.5", "trainer.save_freq=2"]
# rich markup, shell and Hydra syntax, control characters, non-ASCII
HOSTILE = st.lists(st.sampled_from(list("[]/=${}:,'\"\\ \t\n;`|&<>*?!#%^~()") + [
    "[/]", "[link=file:///etc/passwd]", "[bold]", "é", "\x00", "\x1b[31m", "a", "Z", "0"]),
    min_size=1, max_size=8).map("".join)


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else repr(float(x))


def out_of_range(r: Range) -> list[str]:
    """Values that ``r`` refuses, as override text."""
    bad = ["abc", "nan", "inf", "-inf", "true", "9" * 26, "-" + "9" * 26, "'[/]'", "[1,2]", "{a: 1}"]
    if not r.nullable:
        bad.append("null")
    if math.isfinite(r.lo):
        bad.append(_num(r.lo) if r.lo_open else _num(r.lo - 1))
    if math.isfinite(r.hi):
        bad.append(_num(r.hi) if r.hi_open else _num(r.hi + 1))
    if r.integer and r.lo + 0.5 <= r.hi:
        bad.append(repr(r.lo + 0.5))
    return [b for b in bad if not _accepts(r, b)]


def _accepts(r: Range, text: str) -> bool:
    try:
        value = yaml.safe_load(text)
    except yaml.YAMLError:
        return False
    return r.contains(value)


BAD_NUMERIC = st.sampled_from(sorted(RANGES)).flatmap(
    lambda key: st.sampled_from(out_of_range(RANGES[key])).map(lambda v: f"{key}={v}"))
BAD_LIST = st.sampled_from(sorted(LIST_RANGES)).flatmap(
    lambda key: st.sampled_from(out_of_range(LIST_RANGES[key])).map(lambda v: f"{key}=[16,32,{v}]"))
BAD_ENV = st.builds(lambda key, var, shape: shape.format(key=key, var=var),
                    st.sampled_from(["wandb.name", "wandb.project", "wandb.notes", "cluster.partition"]),
                    st.sampled_from(["WANDB_API_KEY", "HOME", "PATH", "NOPE"]),
                    st.sampled_from(["{key}=${{oc.env:{var}}}", "{key}=${{oc.env:{var},dflt}}", "{key}=pre-${{oc.env:{var}}}",
                                     "{key}='${{oc.env:{var}}}'", "{key}=${{oc.env:${{oc.env:{var}}}}}"]))
BAD_HOSTILE = st.one_of(
    st.tuples(st.sampled_from(sorted(RANGES)), HOSTILE).filter(lambda kv: not _accepts(RANGES[kv[0]], kv[1])).map(
        lambda kv: f"{kv[0]}={kv[1]}"),  # text for a number (not one the range takes: HOSTILE can make "0")
    HOSTILE.map(lambda t: f"nosuch{t}=1"),  # an unknown key
)
BAD_OVERRIDE = st.one_of(BAD_NUMERIC, BAD_LIST, BAD_ENV, BAD_HOSTILE)


@FUZZ
@given(data=st.data())
def test_fuzzed_overrides_are_refused(sandbox, data):
    bad = data.draw(BAD_OVERRIDE, label="bad override")
    # a valid override of the bad one's key, after it, would replace it (the last value wins, as in Hydra)
    same_key = [v for v in VALID if v.split("=")[0] == bad.split("=")[0]]
    good = data.draw(st.lists(st.sampled_from([v for v in VALID if v not in same_key]), max_size=3, unique=True),
                     label="valid overrides")
    overrides = data.draw(st.permutations([*good, bad]), label="order")
    command, name = data.draw(st.sampled_from([("run", e) for e in EXPERIMENTS] + [("sweep", s) for s in SWEEPS]))
    sandbox.check_refused(command, name, *overrides, *launch_args(sandbox))


BAD_SEEDS = st.one_of(
    st.integers(SEED_MAX + 1, 10**30).map(str),
    st.integers(-(10**30), -1).map(str),
    st.tuples(st.integers(0, 10**9), st.integers(1, 10**9)).map(lambda ab: f"{ab[0] + ab[1]}-{ab[0]}"),  # reversed
    st.integers(1001, 10**12).map(lambda n: f"0-{n}"),  # too many seeds
    HOSTILE.filter(lambda t: not t.strip().replace(",", "").replace("-", "").isdigit()),
)
BAD_PARALLELISM = st.one_of(st.integers(-(10**30), 0).map(str), HOSTILE.filter(lambda t: not t.strip().isdigit()))


@FUZZ
@given(data=st.data())
def test_fuzzed_options_are_refused(sandbox, data):
    kind = data.draw(st.sampled_from(["seeds", "array-parallelism"]))
    value = data.draw(BAD_SEEDS if kind == "seeds" else BAD_PARALLELISM, label=kind)
    command, name = ("run", "main-grpo") if kind == "seeds" else ("sweep", "priors")
    sandbox.check_refused(command, name, f"--{kind}", value, *launch_args(sandbox))


BAD_NAME = st.one_of(
    HOSTILE,
    st.sampled_from(["../sweeps/lambda", "../outside", "/etc/passwd", "..", ".", "Main-GRPO", "main-grpo/", "-x", "_x"]),
    st.text(alphabet="abcxyz-_.", min_size=1, max_size=8).map(lambda t: "nosuch" + t),
)


@FUZZ
@given(data=st.data())
def test_fuzzed_names_and_targets_are_refused(sandbox, data):
    """Spec names that are not (existing) names; empty or blank targets, with live runs in the registry."""
    if not getattr(sandbox, "seeded", False):
        sandbox.add_runs()
        sandbox.seeded = True
    if data.draw(st.booleans(), label="target command"):
        command = data.draw(st.sampled_from(["cancel", "resume", "status", "logs", "show"]))
        target = data.draw(st.sampled_from(["", " ", "\t", "  \n"]))
        sandbox.check_refused(command, target, "--workdir", str(sandbox.ws))
    else:
        command = data.draw(st.sampled_from(["run", "sweep"]))
        sandbox.check_refused(command, data.draw(BAD_NAME, label="name"), *launch_args(sandbox))


def _valid_experiment() -> dict:
    return {"description": "fuzz", "seeds": [0], "overrides": ["trainer.total_steps=4"],
            "arms": {"a": ["algo=grpo", "prior=base"], "b": ["algo=anytime", "prior=uniform"]}}


EXPERIMENT_FAULTS = st.one_of(
    st.tuples(st.just("figure"), st.one_of(st.integers(), st.lists(st.integers(), max_size=2), HOSTILE.filter(
        lambda t: not t[:1].isalnum() or any(c not in "abcdefghijklmnopqrstuvwxyz0123456789._-" for c in t))),
        ),
    st.tuples(st.just("description"), st.one_of(st.integers(), st.lists(st.text(max_size=3), min_size=1, max_size=2))),
    st.tuples(st.just("seeds"), st.one_of(
        st.lists(st.integers(SEED_MAX + 1, 10**30), min_size=1, max_size=2),
        st.lists(st.integers(-(10**9), -1), min_size=1, max_size=2),
        st.just([]), st.just("x"), st.just([0.5]), st.just([0, 0]), st.just([True]))),
    st.tuples(st.just("overrides"), BAD_OVERRIDE.map(lambda o: [o])),
    st.tuples(st.just("arms"), st.one_of(
        st.just({}), st.just([]), st.just("a"),
        HOSTILE.map(lambda t: {f"A{t}": ["algo=grpo"]}),
        st.just({"a": "algo=grpo"}), st.just({"a": ["algo=nosuch"]}), st.just({"a": [{"x": 1}]}),
        BAD_OVERRIDE.map(lambda o: {"a": [o]}))),
    st.tuples(st.just("groups"), st.one_of(st.just("model"), st.just({"model": "nosuch"}), st.just({"nosuch": "x"}))),
    st.tuples(HOSTILE.map(lambda t: f"unknown{t}"), st.integers()),
)
SWEEP_FAULTS = st.one_of(
    st.tuples(st.just("experiments"), st.one_of(
        st.just([]), st.just("main-grpo"), st.just(["../outside"]), st.just(["/etc/passwd"]),
        BAD_NAME.map(lambda n: [n]))),
    st.tuples(st.just("seeds"), st.lists(st.integers(SEED_MAX + 1, 10**30), min_size=1, max_size=2)),
    st.tuples(st.just("overrides"), BAD_OVERRIDE.map(lambda o: [o])),
    st.tuples(HOSTILE.map(lambda t: f"unknown{t}"), st.integers()),
)
RAW_FAULTS = st.sampled_from([
    "description: caf\xe9\narms: {a: [algo=grpo]}\n".encode("latin-1"),  # not UTF-8
    b"\xff\xfe\x00a",
    b"arms: [unclosed\n",  # not YAML
    b"- a\n- b\n",  # not a mapping
    b"",  # empty
    b"description: x\narms: {a: [algo=grpo]}\narms: {b: [algo=grpo]}\n",  # duplicate key
    b"description: &a [*a]\n",  # recursive anchor
])


@FUZZ
@given(data=st.data())
def test_fuzzed_spec_files_are_refused(sandbox, data):
    kind = data.draw(st.sampled_from(["experiment", "sweep", "raw"]), label="file kind")
    folder = "sweeps" if kind == "sweep" else "experiments"
    path = sandbox.specs / folder / "fuzzed.yaml"
    if kind == "raw":
        path.write_bytes(data.draw(RAW_FAULTS, label="bytes"))
    else:
        doc = _valid_experiment() if kind == "experiment" else {"description": "fuzz", "experiments": ["main-grpo"],
                                                                 "seeds": [0]}
        key, value = data.draw(EXPERIMENT_FAULTS if kind == "experiment" else SWEEP_FAULTS, label="fault")
        doc[key] = value
        path.write_text(yaml.safe_dump(doc, allow_unicode=True))
    try:
        sandbox.check_refused("sweep" if kind == "sweep" else "run", "fuzzed", *launch_args(sandbox))
    finally:
        path.unlink()


def test_the_fuzz_sees_every_numeric_key_refuse_something():
    """The generators reach every key with a range (a key added to RANGES is fuzzed too)."""
    assert all(out_of_range(r) for r in [*RANGES.values(), *LIST_RANGES.values()])


@pytest.mark.parametrize("key", sorted(RANGES))
def test_every_numeric_key_refuses_its_out_of_range_values(sandbox, key):
    """Each key of RANGES, through the CLI, with each of its out-of-range values (exhaustive, not sampled)."""
    for value in out_of_range(RANGES[key]):
        sandbox.check_refused("run", "main-grpo", f"{key}={value}", *launch_args(sandbox))


# --- issue 25: the second round's families -------------------------------------------------------------
PLANTED = "planted-key-0123456789"
RESOLVER = st.sampled_from(["oc.env", "oc.decode", "oc.create", "now", "hydra", "oc.dict.keys", "oc.dict.values",
                            "nosuch", "OC.ENV", "oc.env "])
ARG = st.one_of(st.just("WANDB_API_KEY"), st.just("'${oc.env:WANDB_API_KEY}'"), st.just("%H%M"), st.just("runtime.cwd"),
                st.just("wandb"), st.just('"${wandb.project}{oc.env:WANDB_API_KEY}"'), HOSTILE)
CALL = st.builds(lambda r, a: "${" + f"{r}:{a}" + "}", RESOLVER, ARG)
NESTED = st.builds(lambda outer, inner: outer.replace("WANDB_API_KEY", inner, 1), CALL, CALL)
INTERPOLATION = st.one_of(
    CALL, NESTED,
    st.builds(lambda c: f"pre-{c}-post", CALL),
    st.builds(lambda c: f"'{c}'", CALL),
    st.builds(lambda c: f"[1,{c}]", CALL),
    st.builds(lambda c: "${arctl.grid:${scale.budgets}," + c + "}", CALL),  # inside an allowed resolver
    st.just("${wandb.project}{oc.env:WANDB_API_KEY}"),  # text that becomes an interpolation
)
TARGET_KEY = st.sampled_from(["wandb.name", "wandb.project", "wandb.notes", "+tiny.task.search.e", "cluster.partition",
                              "eval.grid"])


@FUZZ
@given(data=st.data())
def test_fuzzed_interpolations_are_refused_and_never_show_the_key(sandbox, data, monkeypatch):
    monkeypatch.setenv("WANDB_API_KEY", PLANTED)
    override = f"{data.draw(TARGET_KEY)}={data.draw(INTERPOLATION, label='value')}"
    extra = ["wandb.project=$"] if "wandb.project" not in override else []
    if data.draw(st.booleans(), label="in a spec file"):
        (sandbox.specs / "experiments" / "fuzzed.yaml").write_text(yaml.safe_dump(
            {**_valid_experiment(), "overrides": [*extra, override]}))
        try:
            command = data.draw(st.sampled_from(["run", "show"]))
            result = sandbox.check_refused(command, "fuzzed", *(launch_args(sandbox) if command == "run" else []))
        finally:
            (sandbox.specs / "experiments" / "fuzzed.yaml").unlink()
    else:
        command = data.draw(st.sampled_from(["run", "show"]))
        args = [*extra, override] + (launch_args(sandbox) if command == "run" else [])
        result = sandbox.check_refused(command, "ablation-vr", "--arm", "grpo", *args)
    assert PLANTED not in result.err + result.out


def _anchored(levels: int, width: int) -> str:
    lines = [f"l0: &l0 [{', '.join(['x'] * width)}]"]
    lines += [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * width)}]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


YAML_SHAPES = st.one_of(
    st.builds(_anchored, st.integers(6, 12), st.integers(8, 12)).map(lambda t: ("bomb", t)),
    st.integers(65, 3000).map(lambda n: ("deep", "deep: " + "[" * n + "]" * n + "\n")),
    st.integers(65, 400).map(lambda n: ("deep-block", "".join(f"{'  ' * i}k{i}:\n" for i in range(n)) + "  " * n + "v\n")),
    st.just(("recursive", "loop: &a [*a]\n")),
    st.just(("recursive-map", "loop: &a {k: *a}\n")),
)


@FUZZ
@given(data=st.data())
def test_fuzzed_anchors_and_nesting_in_specs_are_refused(sandbox, data):
    kind, text = data.draw(YAML_SHAPES, label="yaml")
    where = data.draw(st.sampled_from(["experiment", "sweep"]), label="spec")
    if where == "experiment":
        path = sandbox.specs / "experiments" / "fuzzed.yaml"
        path.write_text("description: x\narms:\n  a: [algo=grpo, prior=base]\n" + text)
        command = data.draw(st.sampled_from([["run", "fuzzed", *launch_args(sandbox)], ["show", "fuzzed"], ["ls"]]))
    else:
        path = sandbox.specs / "sweeps" / "fuzzed.yaml"
        grid = f"grid: {{thinking.lam: *l{text.count('&l') - 1}}}\n" if kind == "bomb" else ""
        path.write_text("description: x\nexperiments: [ablation-vr]\n" + text + grid)
        command = ["sweep", "fuzzed", *launch_args(sandbox)]
    try:
        assert "fuzzed.yaml" in sandbox.check_refused(*command).err
    finally:
        path.unlink()


def _damage(ws, how: str, at: float, data: bytes) -> None:
    import sqlite3

    path = ws / "registry.sqlite"
    if how in ("truncate", "flip", "overwrite"):
        raw = bytearray(path.read_bytes())
        i = int(at * (len(raw) - 1))
        if how == "truncate":
            raw = raw[:i]
        else:
            raw[i:i + len(data)] = data if how == "overwrite" else bytes(b ^ 0xFF for b in raw[i:i + len(data)])
        path.write_bytes(bytes(raw))
        return
    conn = sqlite3.connect(path)
    with conn:
        if how == "drop-column":
            column = ["state", "job_id", "seed", "metric_value", "phase", "experiment"][int(at * 5.99)]
            conn.execute("DROP INDEX IF EXISTS runs_state")
            conn.execute("DROP INDEX IF EXISTS runs_experiment")
            conn.execute(f"ALTER TABLE runs DROP COLUMN {column}")
        else:  # a value of another kind in a column (NULL only where the schema lets SQLite keep one)
            columns = (["job_id", "metric_value", "step", "started_at", "wandb_id"] if how == "null" else
                       ["job_id", "run_id", "seed", "metric_value", "step", "state", "experiment", "attempts"])
            column = columns[int(at * (len(columns) - 0.01))]
            value = data.decode("latin-1") if how == "text" else (1e300 if how == "huge" else None)
            if column == "run_id":  # unique: damage each id its own way
                conn.execute("UPDATE runs SET run_id = run_id || ?", (value,))
            else:
                conn.execute(f"UPDATE runs SET {column}=?", (value,))
    conn.close()


DAMAGE_HOW = st.sampled_from(["truncate", "flip", "overwrite", "drop-column", "text", "huge", "null"])
DAMAGE_COMMANDS = st.sampled_from([["status"], ["status", "--no-refresh"], ["status", "lt", "--json"], ["cancel", "lt"],
                                   ["resume", "lt", "--executor", "slurm"], ["logs", "lt_a"], ["run", "lt", "--executor", "slurm"],
                                   ["sweep", "priors", "--executor", "slurm"], ["report", "--table", "final"]])


@settings(FUZZ, max_examples=max(10, EXAMPLES // 3))
@given(data=st.data())
def test_fuzzed_damage_to_the_registry_never_gives_a_traceback(sandbox, data):
    """Whatever happened to registry.sqlite, every command either works or says, in one line naming the
    file, what is wrong (and never hands a damaged value to scancel or a path)."""
    import shutil

    if not getattr(sandbox, "pristine", None):
        sandbox.add_run_dirs()
        sandbox.pristine = sandbox.root / "pristine"
        shutil.copytree(sandbox.ws, sandbox.pristine)
    shutil.rmtree(sandbox.ws)
    shutil.copytree(sandbox.pristine, sandbox.ws)
    how = data.draw(DAMAGE_HOW, label="damage")
    _damage(sandbox.ws, how, data.draw(st.floats(0, 1), label="where"),
            data.draw(st.binary(min_size=1, max_size=64), label="bytes"))
    before = sandbox.calls.read_text() if sandbox.calls.exists() else ""
    result = sandbox.check_survives(*data.draw(DAMAGE_COMMANDS, label="command"), "--workdir", str(sandbox.ws))
    if result.code == 2 and "registry" in result.err:
        assert "arctl repair" in result.err or "space" in result.err or "read-only" in result.err, result.err
    calls = (sandbox.calls.read_text() if sandbox.calls.exists() else "")[len(before):]
    assert "--user" not in calls and ".." not in calls, calls


FS_COMMANDS = st.sampled_from([["status"], ["status", "--no-refresh", "--json"], ["logs", "lt_a"], ["cancel", "lt"],
                               ["resume", "lt", "--force", "--executor", "slurm"], ["run", "lt", "--force", "--executor", "slurm"],
                               ["run", "ablation-vr", "--arm", "grpo", "--executor", "slurm"], ["repair"],
                               ["report", "--table", "final"]])


@settings(FUZZ, max_examples=max(6, EXAMPLES // 10))
@given(data=st.data())
def test_fuzzed_commands_on_a_read_only_or_full_workspace_are_one_line_and_leave_nothing(sandbox, data):
    import sys

    import fresh_machine
    import mounts
    from bad_input import snapshot

    why = fresh_machine.available()
    if why:
        pytest.skip(f"cannot make mounts here: {why}")
    if not getattr(sandbox, "seeded_dirs", False):
        sandbox.add_run_dirs()
        sandbox.seeded_dirs = True
    env = {**os.environ, "PATH": sandbox.path, "ARCTL_SPECS": str(sandbox.specs)}
    env.pop("ARCTL_TEST_BACKEND", None)
    mode = data.draw(st.sampled_from(["read-only", "full"]), label="filesystem")
    args = [*data.draw(FS_COMMANDS, label="command"), "--workdir", str(sandbox.ws)]
    before = snapshot(sandbox.ws)
    mounted = {"read_only": sandbox.ws} if mode == "read-only" else {"full": sandbox.ws,
                                                                       "size_kib": data.draw(st.integers(1024, 4096))}
    proc = mounts.run([sys.executable, "-m", "arctl.cli.main", *args], env=env, **mounted)
    shown = f"{mode}: arctl {' '.join(args)}\n{proc.stdout[-1500:]}\n{proc.stderr}"
    assert "Traceback" not in proc.stderr + proc.stdout and proc.returncode in (0, 1, 2), shown
    if proc.returncode != 0:
        lines = [line for line in proc.stderr.splitlines() if line.strip()]
        assert proc.returncode == 2 and len(lines) == 1 and lines[0].startswith("error:"), shown
    if mode == "read-only":
        assert snapshot(sandbox.ws) == before, shown
    else:
        after = sandbox.ws.parent / f"{sandbox.ws.name}.after"
        assert not [p for p in after.rglob("*") if p.name.endswith(".tmp")], shown
