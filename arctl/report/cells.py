"""One run per cell: which of a workspace's runs a report reads.

A workspace can hold several runs of one cell (experiment, arm, seed): the same arm launched by
two sweeps that set something differently (``arctl sweep baselines`` evaluates with budget forcing,
``arctl sweep paper`` without), a ``--grid`` of ``thinking.lam`` over ``main-ar-uniform``, a rerun
with a command-line override. Averaging them, or taking whichever sorts first, would count a seed
twice or mix configurations without saying so. So a report keeps one run per cell:

1. ``--where KEY=VALUE`` (any number): only runs whose resolved config has that value, or that read nothing
   of KEY (GRPO beside ``--where reward.alpha=0.1``: it has no length penalty, and a sweep's grid over
   ``reward.alpha`` launched it once for every value, :func:`not_read`);
2. a cell that still has several runs keeps the one whose config is the cell as the report's sweep
   (or, without one, the experiment alone) composes it at the run's scale: on the keys where the
   runs differ, its values equal the composed cell's;
3. a cell still undecided is one error line naming the runs, the key they differ in, and the
   ``--where`` that chooses;
4. a kept run that is not its cell as composed (the only run of its cell, from another sweep or a
   rerun with an override) is read, and a warning names it and the keys it differs in.

The keys that only say where a run ran or logged (:data:`arctl.launch.run_id.LAUNCH_ONLY_KEYS`) never
count, nor what a job records beside its config (warm-up, machine: not in the composed config).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
from collections.abc import Callable, Sequence
from pathlib import PurePath

from arctl.report.errors import ReportError
from arctl.track.metrics_schema import CONFIG_PREFIX  # the runs table's flattened-config columns


def parse_where(items: Sequence[str] | None) -> list[tuple[str, object, str | None]]:
    """``["thinking.lam=0.5", "grpo:optim.lr=3e-4", ...]`` → ``[("thinking.lam", 0.5, None), ("optim.lr", 0.0003,
    "grpo"), ...]``: (key, value, the arm it applies to). Each value is read as a launch reads an override's
    (:func:`where_value`); ``ARM:KEY=VALUE`` (or ``EXPERIMENT/ARM:KEY=VALUE``) filters that arm's runs alone, the
    others' kept as they are (from a hunt: after one arm's learning rate was edited, ``--where optim.lr=NEW`` dropped
    every other arm from the figure); a plain ``KEY=VALUE`` filters every arm's (:func:`where_applies`)."""
    out: list[tuple[str, object, str | None]] = []
    for item in items or []:
        key, sep, text = str(item).partition("=")
        scope, colon, key = key.strip().rpartition(":")
        key, scope = key.strip(), (scope.strip() or None) if colon else None
        if not sep or not key or (colon and not scope):
            raise ReportError(f"--where {item!r}: expected KEY=VALUE or ARM:KEY=VALUE (a config key, e.g. --where "
                              "thinking.lam=0.5, or --where grpo:optim.lr=3e-4 for the runs of arm grpo alone)")
        value = where_value(text)
        key = key.removeprefix(CONFIG_PREFIX)
        if any(key == k and scope == a for k, _, a in out):
            raise ReportError(f"--where {scope + ':' if scope else ''}{key}=... is given twice: a run has one value "
                              "per key; keep one")
        out.append((key, value, scope))
    return out


def where_applies(scope: str | None, experiment, arm) -> bool:
    """Whether a ``--where`` of ``scope`` (:func:`parse_where`: None, ``ARM`` or ``EXPERIMENT/ARM``) filters the
    runs of ``experiment``/``arm``."""
    return scope is None or scope in (str(arm), f"{experiment}/{arm}")


def conditions_for(conditions: list[tuple[str, object, str | None]], experiment, arm) -> list[int]:
    """The indexes of the ``conditions`` (:func:`parse_where`) that filter the runs of ``experiment``/``arm``: those
    of every arm and those of its own, an arm's own on a key replacing every arm's on it (``--where optim.lr=1e-4
    --where grpo:optim.lr=5e-4``: grpo's runs at 5e-4, the others at 1e-4; from a review: both applied to grpo,
    which no run met, and the figure dropped grpo)."""
    own = {k for k, _, scope in conditions if scope is not None and where_applies(scope, experiment, arm)}
    return [i for i, (k, _, scope) in enumerate(conditions)
            if where_applies(scope, experiment, arm) and (scope is not None or k not in own)]


def where_text(key: str, value, scope: str | None) -> str:
    """``--where`` as a user wrote it, for messages."""
    return f"--where {scope + ':' if scope else ''}{key}={_shown(value)}"


def where_value(text: str):
    """The value of ``--where KEY=<text>`` as Hydra's override grammar reads ``KEY=<text>`` on a launch's command
    line (:func:`arctl.compose.overrides.parse_overrides`): ``3e-4`` the number 0.0003, the run ``optim.lr=3e-4``
    trains (from a hunt: read as YAML 1.1, where a float needs a dot, it stayed text and matched no run), quoted text
    as text; where that grammar reads no single value (``a,b`` sweeps, a parse error) as YAML, else as written."""
    import yaml
    from hydra.errors import HydraException

    from arctl.compose.overrides import parse_overrides

    if not text.strip():
        return ""
    try:
        (parsed,) = parse_overrides([f"where={text.strip()}"])
        if not parsed.is_sweep_override():
            return parsed.value()
    except (HydraException, ValueError):
        pass
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        return text


def same_value(a, b) -> bool:
    """Config values equal as a user means it: 2 == 2.0, [48, 96] == (48, 96), missing == missing."""
    a, b = _plain(a), _plain(b)
    if isinstance(a, int | float) and isinstance(b, int | float) and not isinstance(a, bool) and not isinstance(b, bool):
        return float(a) == float(b)
    return json.dumps(a, sort_keys=True, default=str) == json.dumps(b, sort_keys=True, default=str)


def _plain(v):
    """numpy scalars/arrays and pandas' NaN-for-missing as plain Python values (None for missing)."""
    if hasattr(v, "tolist"):
        v = v.tolist()
    if isinstance(v, float) and math.isnan(v):
        return None
    if isinstance(v, tuple):
        return list(v)
    return v


def _shown(v) -> str:
    v = _plain(v)
    return "unset" if v is None else json.dumps(v, default=str) if not isinstance(v, str) else v


def run_scale(rec: dict, prefix: str = CONFIG_PREFIX) -> str | None:
    """The scale a runs-table row ran at (its config's ``scale.name``; ``scale`` in an older layout);
    ``prefix=""`` reads a flattened config instead of a runs-table row."""
    for key in ("scale.name", "scale"):
        v = _plain(rec.get(prefix + key))
        if v is not None and not isinstance(v, dict):
            return str(v)
    return None


def of_scale(rec: dict, scale: str | None) -> bool:
    """Whether a runs-table row ran at ``scale`` (any, for None)."""
    return scale is None or str(run_scale(rec)) == scale


def finished_run(rec: dict) -> bool:
    """Whether a runs-table row's history ended with W&B's exit record of a clean finish *at its last step*
    (``trainer.total_steps`` of its config; a table without the columns, from an earlier reader, counts every
    run finished). A run that stops (preempted, cancelled) or fails closes its W&B run on the way out, with
    exit code 0 in the runs of arctl before 2026-12-05 and in verl's task runner after a stop: the exit record
    alone took them for finished, and their last evaluation, mid-training, for the final one (from a hunt). An
    eval-only run (``verl.eval_only``) trains no step and is finished by its exit record."""
    return _end(rec) is None


# the states of arctl.track.run_data.RunData other than "finished", as the report says them
_UNFINISHED = {"incomplete": "running or killed", "failed": "failed", "empty": "nothing logged"}
STOPPED_EARLY = "stopped before its last step"  # W&B's clean exit record short of trainer.total_steps


JOB_STATE = "job_state"  # a runs-table column: what the run's job said (arctl.report.export.job_states)


def with_job_states(table, states: dict[str, str]):
    """``table`` (a runs table) with :data:`JOB_STATE` from ``states`` (``{run_id: state}``; None where absent)."""
    if len(table):
        table[JOB_STATE] = [states.get(str(r)) for r in table["run_id"]]
    return table


def _end(rec: dict) -> str | None:
    """How a runs-table row's run did not finish (:data:`_UNFINISHED`, :data:`STOPPED_EARLY`, its job's word), or
    None."""
    state = str(rec.get("state", "finished"))
    if state != "finished":
        return _UNFINISHED.get(state, state)
    job = rec.get(JOB_STATE)
    if isinstance(job, str) and job and job != "completed":  # its job's word: e.g. preempted at the paper scale
        return f"its job says {job}"
    total, last = _plain(rec.get(CONFIG_PREFIX + "trainer.total_steps")), _plain(rec.get("last_step"))
    if _plain(rec.get(CONFIG_PREFIX + "verl.eval_only")) is True:
        return None
    numbers = all(isinstance(v, int | float) and not isinstance(v, bool) for v in (total, last))
    return STOPPED_EARLY if numbers and last < total else None


def unfinished(runs_table, scale: str | None = None) -> list[str]:
    """The runs of ``scale`` that have not finished (:func:`finished_run`: still running, failed, killed, or
    stopped before their last step), each as "RUN_ID (STATE at step K of N)":
    a report of final values leaves them out (their last values are not the final evaluation's)."""
    out = []
    for rec in runs_table.to_dict("records") if len(runs_table) else []:
        if of_scale(rec, scale) and not finished_run(rec):
            last, total = rec.get("last_step"), rec.get("config.trainer.total_steps")
            at = f" at step {_int_text(last)}" if _int_text(last) != "?" else ""
            at += f" of {_int_text(total)}" if at and _int_text(total) != "?" else ""
            out.append(f"{rec['run_id']} ({_end(rec)}{at})")
    return out


def unfinished_warning(left_out: Sequence[str], where: str = "", waiting: str | None = None) -> str:
    """The warning of a report of final values that left out the runs :func:`unfinished` listed; ``where`` names
    the workspace in its command (:func:`arctl.launch.workspace.workdir_arg`); ``waiting``: what to do instead of
    `arctl status` (an export's: :func:`arctl.report.export.waiting_in_export`)."""
    return (f"left out {len(left_out)} run(s) that have not finished (their last values are not the final "
            f"evaluation's; {waiting or f'`arctl status{where}`'}): {listed(left_out)}")


def listed(items: Sequence[str], most: int = 6) -> str:
    """``a, b, c and 4 more``."""
    return ", ".join(items[:most]) + (f" and {len(items) - most} more" if len(items) > most else "")


def _int_text(x) -> str:
    return str(int(x)) if isinstance(x, int | float) and not (isinstance(x, float) and math.isnan(x)) else "?"


def _launch_only(key: str) -> bool:
    """A key outside what a run computes: a launch-only section, a key never in the identity
    (``verl.keep_checkpoints``: what stays on disk), the run a run started from."""
    from arctl.launch.run_id import LAUNCH_ONLY_KEYS, NOT_COMPUTED

    section, _, rest = key.partition(".")
    return section in LAUNCH_ONLY_KEYS or (section, rest) in NOT_COMPUTED or key == "trainer.init_run"


def _names_the_run(key: str, *, seed: bool = True) -> bool:
    """A key that names a run or says where it ran, not what it computes: its experiment, arm and (unless
    ``seed=False``: a seed is what a run computes when the cell's seed is given) seed (a run shared with
    another cell is read under that cell's names) and the launch-only sections."""
    return key in ("experiment", "arm") or (seed and key == "seed") or _launch_only(key)


def with_keys_added_later(table):
    """The runs table with each config key added since a run was written (:func:`arctl.launch.run_id.
    with_keys_added_later`) at the value that run computed with, in every row that has the key's
    section: a workspace that spans an upgrade is read as one (``--where verl.grader=math-verify`` finds
    the runs from before the key; their cell does not differ from its composed config by a key they lack)."""
    from arctl.launch.run_id import keys_added_later, plugin_keys_added_later

    if not len(table):
        return table
    table = table.copy()
    backends = [_plain(b) for b in table["config.backend"]] if "config.backend" in table.columns else [None] * len(table)
    added = {b: keys_added_later(b) for b in set(backends)}
    for section, key in keys_added_later(None):  # the same keys for every backend
        # a missing key and a null value look alike in the flattened table; the keys whose default is null
        # fill null with null
        _fill_missing(table, (section,), key, [added[b][(section, key)] for b in backends])
    column = f"{CONFIG_PREFIX}budget_control.method"
    methods = [_plain(m) for m in table[column]] if column in table.columns else [None] * len(table)
    for pair in set(zip(backends, methods)):  # a plugin's keys (run_id.plugin_keys_added_later): its rows only
        found = plugin_keys_added_later({"backend": pair[0], "budget_control": {"method": pair[1]}})
        for (*parents, key), value in found.items():
            _fill_missing(table, parents, key, [value if (b, m) == pair else _NOT_HERE for b, m in zip(backends, methods)])
    return table


_NOT_HERE = object()


def _fill_missing(table, parents, key: str, values: list) -> None:
    """In place: the column ``config.<parents>.<key>`` at ``values[i]`` in each row ``i`` whose section holds other
    keys and not this one (``_NOT_HERE``: a row the key is not added to)."""
    prefix = CONFIG_PREFIX + ".".join(parents) + "."
    siblings = [c for c in table.columns if c.startswith(prefix)]
    if not siblings:
        return
    column = prefix + key
    has_section = table[siblings].notna().any(axis=1)
    current = table[column].tolist() if column in table.columns else [None] * len(table)
    table[column] = [fill if fill is not _NOT_HERE and has and _plain(v) is None else v
                     for fill, has, v in zip(values, has_section, current)]


def one_run_per_cell(runs, *, where: Sequence[str] | None = None, compose: Callable[[str, str, int, str | None], dict | None]
                     | None = None, grid_keys: Sequence[str] = (), source: str = "the workspace"):
    """Keep one run per (experiment, arm, seed) of ``runs`` (a :class:`arctl.track.runs.Runs`), in place
    and returned: ``where`` filters first (``KEY=VALUE``), then a cell with several runs keeps the run
    matching ``compose(experiment, arm, seed, scale)`` (the cell's resolved config, flattened; None when
    it cannot be composed) on the keys where its runs differ. ``grid_keys`` (a grid sweep's keys) are
    part of the cell: runs at two grid points are two cells. :class:`ReportError` (one line) for an
    unknown ``--where`` key, a ``--where`` no run matches, and a cell it cannot decide."""
    table = runs.runs = with_keys_added_later(runs.runs)
    if not len(table):
        return runs
    keep = [True] * len(table)
    loose = [False] * len(table)  # kept by a --where only as a run that reads nothing of its key (not_read)
    records = table.to_dict("records") if where else []
    conditions = parse_where(where)
    active = [set(conditions_for(conditions, rec.get("experiment"), rec.get("arm"))) for rec in records]
    for index, (key, value, scope) in enumerate(conditions):
        column = CONFIG_PREFIX + key
        if column not in table.columns:
            known = sorted(c[len(CONFIG_PREFIX):] for c in table.columns if c.startswith(CONFIG_PREFIX))
            near = [k for k in known if k.rsplit(".", 1)[-1] == key.rsplit(".", 1)[-1]][:3]
            hint = f"did you mean {', '.join(near)}?" if near else "keys look like thinking.lam, budget_control.method"
            raise ReportError(f"{where_text(key, value, scope)}: no run in {source} has config key {key!r}; {hint}")
        if scope is not None and not any(where_applies(scope, r.get("experiment"), r.get("arm")) for r in records):
            arms = sorted({f"{r.get('experiment')}/{r.get('arm')}" if "/" in scope else str(r.get("arm"))
                           for r in records})
            raise ReportError(f"{where_text(key, value, scope)}: no run in {source} is of arm {scope!r}; the arms "
                              f"read are {', '.join(arms[:8])}{', ...' if len(arms) > 8 else ''}")
        applies = [index in a for a in active]
        exact = [not a or same_value(v, value) for v, a in zip(table[column], applies)]
        unread = [not e and k and not_read(rec, key) for e, k, rec in zip(exact, keep, records)]
        keep = [k and (e or u) for k, e, u in zip(keep, exact, unread)]
        loose = [s or u for s, u in zip(loose, unread)]
    if any(loose):  # a run at exactly the value asked for goes before one of its cell that reads nothing of it (from
        # a hunt: an earlier arctl's grid over reward.alpha trained GRPO at every value; each survived every --where,
        # and the error that followed asked for the same --where)
        exact_cells = {_arm_seed(rec) for rec, k, s in zip(records, keep, loose) if k and not s}
        keep = [k and not (s and _arm_seed(rec) in exact_cells) for k, s, rec in zip(keep, loose, records)]
    if conditions and not any(keep):
        said = " ".join(where_text(*c) for c in conditions)
        raise ReportError(f"{said}: none of the {len(table)} runs in {source} has that config; "
                          "drop or change --where (`arctl status` lists the runs, config.yaml in each run dir says its config)")
    rows = [r for r, k in zip(table.to_dict("records"), keep) if k]
    cells: dict[tuple, list[dict]] = {}
    for rec in rows:
        seed = _plain(rec.get("seed"))
        point = tuple(json.dumps(_plain(rec.get(CONFIG_PREFIX + k)), default=str) for k in grid_keys)
        cells.setdefault((str(rec.get("experiment")), str(rec.get("arm")), seed, point), []).append(rec)
    chosen: set[str] = set()
    decided: list[str] = []  # one note per cell decided: which run was read, which left out
    for (experiment, arm, seed, _), recs in sorted(cells.items(), key=lambda kv: str(kv[0])):
        if len(recs) == 1 or seed is None:
            chosen.update(row_key(r) for r in recs)
            continue
        chosen.add((_decide(experiment, arm, int(seed), recs, compose, source, decided), experiment, arm))
    runs.warnings = list(runs.warnings) + decided
    keep_rows(runs, chosen)
    if compose is not None:
        runs.warnings = list(runs.warnings) + _not_composed(runs.runs, compose, grid_keys)
    return runs


def row_key(rec: dict) -> tuple[str, str, str]:
    """A runs-table row's (run_id, experiment, arm): a run read for several cells (a shared run, one row per cell it
    serves) is one row per cell, told apart by the cell."""
    return str(rec.get("run_id")), str(rec.get("experiment")), str(rec.get("arm"))


def keep_rows(runs, keys: set[tuple[str, str, str]]) -> None:
    """In place: ``runs``' table and history (a :class:`arctl.track.runs.Runs`) with only the rows whose
    :func:`row_key` is in ``keys``."""
    table = runs.runs
    if len(table):
        runs.runs = table[[k in keys for k in zip(*(table[c].astype(str) for c in ("run_id", "experiment", "arm")))]
                          ].reset_index(drop=True)
    h = runs.history
    if len(h):
        h = h[h["run_id"].astype(str).isin({k[0] for k in keys})]
        cols = ["run_id", "experiment", "arm"]
        # the (run, cell) pairs of a run kept for another of its cells (few): the rows of each, left out
        drop = [p for p in h[cols].drop_duplicates().itertuples(index=False) if tuple(map(str, p)) not in keys]
        mask = None
        for run_id, experiment, arm in drop:
            rows = (h["run_id"] == run_id) & (h["experiment"] == experiment) & (h["arm"] == arm)
            mask = rows if mask is None else mask | rows
        runs.history = (h if mask is None else h[~mask]).reset_index(drop=True)


def _arm_seed(rec: dict) -> tuple[str, str, object]:
    return str(rec.get("experiment")), str(rec.get("arm")), _plain(rec.get("seed"))


def not_read(rec: dict, key: str) -> bool:
    """Whether the run of ``rec`` (a runs-table row) reads nothing of its config's ``key``: the compose layer's
    :func:`arctl.compose.validate.unread_settings` on the config its columns hold. Such a run is the same run at
    every value of ``key``: a sweep whose grid or overrides set it launched it once, without it
    (:func:`arctl.compose.resolve._as_read`), so ``--where KEY=VALUE`` keeps it at every value. A key only another
    scale's backend reads (``verl.*`` of a tiny run: :func:`arctl.compose.validate.read_at_another_scale`) is not
    such a key: the sweep leaves it in, and the run holds it at its default."""
    from arctl.compose.validate import read_at_another_scale, reads_none_of

    config: dict = {}
    for column, value in rec.items():
        if isinstance(column, str) and column.startswith(CONFIG_PREFIX):
            *parents, leaf = column[len(CONFIG_PREFIX):].split(".")
            node = config
            for part in parents:
                node = node.setdefault(part, {})
                if not isinstance(node, dict):
                    break
            else:
                node[leaf] = _plain(value)
    return not read_at_another_scale(key, config) and reads_none_of(config, [key])


def one_run_per_arm_seed(table, grid_keys: Sequence[str] = (), relaunch: Callable | None = None) -> None:
    """:class:`ReportError` (one line) where an arm has several runs at one seed after
    :func:`one_run_per_cell`: runs at two grid points of a sweep (``thinking.lam=0.25`` and ``0.5``), or
    two runs of the same arm name in two experiments (whatever their configs: the seed would count twice;
    one run serving both is one). A figure or table averages an arm's runs
    over seeds, so they would be read as seeds of one arm (a lambda sweep's four points as a mean with
    their spread as its interval); the error names what differs and how to choose (``relaunch``: see
    :func:`one_config_per_arm`)."""
    if not len(table) or "arm" not in table.columns:
        return
    groups: dict[tuple, list[dict]] = {}
    for rec in table.to_dict("records"):
        seed = _plain(rec.get("seed"))
        if seed is not None:
            groups.setdefault((str(rec.get("arm")), seed), []).append(rec)
    for (arm, seed), recs in sorted(groups.items(), key=lambda kv: str(kv[0])):
        if len({str(r["run_id"]) for r in recs}) < 2:
            continue
        differ = [k for k in grid_keys if len({json.dumps(_plain(r.get(CONFIG_PREFIX + k)), default=str) for r in recs}) > 1]
        if differ:
            values = ", ".join(sorted({_shown(r.get(CONFIG_PREFIX + differ[0])) for r in recs}))
            what = f"at {len(recs)} grid points ({differ[0]} = {values})"
            how = f"--where {differ[0]}=VALUE"
        else:
            what = f"in {len(recs)} experiments ({', '.join(sorted({str(r.get('experiment')) for r in recs}))})"
            how = "--experiment NAME"
        raise ReportError(f"arm {arm!r} has {len(recs)} runs at seed {seed}, {what}: a figure or table averages an "
                          f"arm's runs over seeds and would read them as seeds of one arm; choose one with {how}")
    by_arm: dict[str, list[tuple[int, dict]]] = {}
    for rec in table.to_dict("records"):
        seed = _plain(rec.get("seed"))
        if seed is not None:
            by_arm.setdefault(str(rec.get("arm")), []).append((int(seed), rec))
    for arm, seeded in sorted(by_arm.items()):
        one_config_per_arm(arm, seeded, AVERAGED, grid_keys, relaunch)


AVERAGED = "a figure or table averages an arm's runs over seeds"  # why one_config_per_arm refuses, in a figure's words
# the run's names, seed and the sections that say where it ran (in W&B, beside its config.yaml: the run's own ids)
NAMING_KEYS = ("config.experiment", "config.arm", "config.seed", "config.run_id", "config.run_dir")
NAMING_SECTIONS = ("config.wandb.", "config.cluster.")


def computed_items(rec: dict) -> dict[str, object]:
    """A runs-table row's config columns without its names, seed and launch-only keys (those a run id leaves out
    too: ``trainer.init_run``, the run it started from, names its seed) and the sections its job recorded in W&B
    beside its config.yaml (the machine, the warm-up's record and time, verl's own config with the run's names in
    it), nor missing values: what the run computes, at the values its columns hold."""
    from arctl.track.runs.tidy import RECORDED

    recorded = tuple(f"{CONFIG_PREFIX}{k}." for k in str(rec.get(RECORDED) or "").split(",") if k)
    recorded_whole = {p[:-1] for p in recorded}
    return {k: _run_path(k, _plain(v)) for k, v in rec.items()
            if isinstance(k, str) and k.startswith(CONFIG_PREFIX) and k not in NAMING_KEYS
            and not k.startswith(NAMING_SECTIONS) and not _launch_only(k[len(CONFIG_PREFIX):])
            and not k.startswith(recorded) and k not in recorded_whole and _plain(v) is not None
            and _schema_key(k[len(CONFIG_PREFIX):])}


def _schema_key(key: str) -> bool:
    """Whether ``key`` (dotted) is a key of an arctl run config: a field of the schema (the registered backends' and
    methods' sections among them), or any key under an open section (``scale``, a backend's open mapping). A run
    read without its config.yaml (a W&B project, an unreadable file) has its job's records beside its config in its
    W&B config, which the ``recorded`` column does not list then (from a review: the machine kind, and verl's own
    config, ``trainer.default_local_dir`` with each seed's run folder, were read as "other configs")."""
    from arctl.compose.plugins import run_config

    return _key_of(run_config(), key)  # (the schema of the methods and backends registered now)


@functools.lru_cache(maxsize=8192)
def _key_of(schema: type, key: str) -> bool:
    import typing

    node: object = schema
    for part in key.split("."):
        if not dataclasses.is_dataclass(node):
            return True  # under an open section (a mapping, or a value of its own)
        try:
            hints = typing.get_type_hints(node)
        except Exception:  # noqa: BLE001 - a type that does not resolve: take the key as the schema's
            return True
        if part not in hints:
            return False
        node = hints[part]
    return True


def _run_path(key: str, value):
    """``value`` of ``key`` as runs at several seeds are compared: the folder's name where the key is a path into
    another run's folder (:data:`arctl.launch.run_id.RUN_PATH_KEYS`: each seed's eval-only run evaluates its own
    seed's checkpoint, from a review: refused as "other configs"), else the value."""
    from arctl.launch.run_id import RUN_PATH_KEYS

    section, _, rest = key[len(CONFIG_PREFIX):].partition(".")
    if (section, rest) in RUN_PATH_KEYS and isinstance(value, str) and value:
        return PurePath(value).name
    return value


def compute_key(rec: dict) -> str | None:
    """A digest of :func:`computed_items`: two runs that share it compute the same thing (None without config
    columns). From a review: two runs of one config on two machine kinds were refused as "other configs"."""
    import hashlib

    items = sorted((k, str(v)) for k, v in computed_items(rec).items())
    if not items:
        return None
    return hashlib.sha256(repr(items).encode()).hexdigest()[:16]


def config_differences(a: dict, b: dict) -> list[str]:
    """The config keys (without ``config.``) in which two runs-table rows compute differently: their
    :func:`computed_items` differ (a key one of them lacks too), and both compute with it (its identity,
    :func:`_computed_keys`; a knob of an inactive section is no difference) and read it (:func:`not_read`: GRPO
    beside another ``reward.alpha``)."""
    mine, theirs = computed_items(a), computed_items(b)
    differ = sorted(k for k in mine.keys() | theirs.keys()
                    if k not in mine or k not in theirs or not same_value(mine[k], theirs[k]))
    if not differ:
        return []
    computed = _computed_keys(mine, CONFIG_PREFIX) | _computed_keys(theirs, CONFIG_PREFIX)
    return [k[len(CONFIG_PREFIX):] for k in differ if k[len(CONFIG_PREFIX):] in computed
            and not not_read(a, k[len(CONFIG_PREFIX):]) and not not_read(b, k[len(CONFIG_PREFIX):])]


def one_config_per_arm(arm: str, seeded: Sequence[tuple[int, dict]], why: str = AVERAGED,
                       grid_keys: Sequence[str] = (), relaunch: Callable | None = None) -> None:
    """:class:`ReportError` (one line) where ``arm``'s runs (``(seed, runs-table row)``) at different seeds are runs
    of other configs (from a hunt: ``arctl sweep paper --seeds 2 optim.lr=0.0005`` beside seeds 0-1 at the default:
    a figure averaged the three as seeds of GRPO, the claims tested them, with a generic warning): only one config's
    runs are seeds of an arm. Runs that differ only in what they do not compute with (:func:`config_differences`)
    are one config. ``why``: what reads them as seeds; ``grid_keys``: a sweep's grid, the key named first.
    ``relaunch(arm, [(a row of each config, its seeds), ...])``: the launch that makes them one config as the specs
    now stand (``arctl sweep S --seeds <the seeds of the configs the specs no longer compose>``), or None; named
    first where given (from a hunt: after one arm's edit and new seeds, the --where the error asked for dropped the
    other arms, which never ran at the edited value)."""
    from arctl.config.ranges import seeds_text

    configs: list[tuple[dict, list[int], list[str]]] = []  # a row of each config, its seeds, how it differs from the first
    by_key: dict[str | None, int] = {}
    for seed, rec in sorted(seeded, key=lambda sr: (sr[0], str(sr[1].get("run_id")))):
        key = compute_key(rec)
        if key not in by_key:
            found = next((i for i, (row, _, _) in enumerate(configs) if not config_differences(row, rec)), None)
            if found is None:
                found = len(configs)
                configs.append((rec, [], config_differences(configs[0][0], rec) if configs else []))
            by_key[key] = found
        configs[by_key[key]][1].append(seed)
    if len(configs) < 2:
        return
    differ = sorted({k for _, _, d in configs for k in d}, key=lambda k: (k not in grid_keys, k))
    key, said = differing_key([row for row, _, _ in configs], differ)
    groups = [f"{'seed' if len(set(s)) == 1 else 'seeds'} {seeds_text(sorted(set(s)))}" for _, s, _ in configs]
    launch = relaunch(arm, [(row, sorted(set(s))) for row, s, _ in configs]) if relaunch is not None else None
    first = f"make them one config as the specs now stand with {launch}, or " if launch else ""
    raise ReportError(f"arm {arm!r}: {', '.join(groups[:-1])} and {groups[-1]} are runs of other configs ({said}): "
                      f"{why}; {first}choose one config with --where {key}=VALUE")


def differing_key(rows: Sequence[dict], differ: Sequence[str] | None = None) -> tuple[str, str]:
    """The first key ``rows`` (runs-table rows, or :func:`computed_items` of them) of other configs differ in and
    how the errors say it: ``("optim.lr", "optim.lr 0.0001 vs 0.0005 and 1 more key(s)")``. ``differ``: the keys in
    order (default: :func:`config_differences` of each row from the first, sorted); ("KEY", "") where none is
    told."""
    if differ is None:
        differ = sorted({k for row in rows[1:] for k in config_differences(rows[0], row)})
    if not differ:
        return "KEY", ""
    key = differ[0]
    more = f" and {len(differ) - 1} more key(s)" if len(differ) > 1 else ""
    return key, f"{key} {' vs '.join(_shown(row.get(CONFIG_PREFIX + key)) for row in rows)}{more}"


def differs_from_cell(rec: dict, cell: dict | None) -> list[str]:
    """The keys of ``cell`` (a composed cell's config, flattened; None or empty: nothing to compare) in
    which the runs-table row ``rec`` differs, its names, seed and launch sections aside, and keys the run
    does not compute with aside (an inactive ``budget_control`` section, another method's knobs: what
    :func:`arctl.launch.run_id.identity_config` leaves out of the run id)."""
    found = [k for k, v in sorted((cell or {}).items()) if not _names_the_run(k)
             and CONFIG_PREFIX + k in rec and not same_value(rec[CONFIG_PREFIX + k], v)]
    if not found:
        return found
    computed = _computed_keys(cell) | _computed_keys(rec, CONFIG_PREFIX)
    return [k for k in found if k in computed]


def _computed_keys(flat: dict, prefix: str = "") -> set[str]:
    """The keys of a flattened config (a composed cell's; a runs-table row's ``config.*`` with
    ``prefix``) that are part of what its run computes: its identity (an inactive ``budget_control``
    section is not: a key counts where either of two configs computes with it)."""
    from arctl.launch.run_id import identity_config
    from arctl.track.runs import flatten_config

    nested: dict = {}
    for key, value in flat.items():
        if not str(key).startswith(prefix):
            continue
        *parents, last = str(key)[len(prefix):].split(".")
        inner = nested
        for part in parents:
            inner = inner.setdefault(part, {})
        if isinstance(inner, dict):
            inner[last] = value
    return set(flatten_config(identity_config(nested)))


def _not_composed(table, compose, grid_keys: Sequence[str] = ()) -> list[str]:
    """A warning per set of keys in which kept runs differ from their cell as composed (a run the
    sweep did not launch as it stands: another sweep's, a rerun with an override): they are read,
    and the report says so. ``grid_keys`` (the sweep's grid) are no such key: a cell is composed with nothing of
    the grid (:func:`cell_composer`), and a run at a grid point is that point's (from a hunt: ``--where
    optim.lr=0.0003``, a grid point, warned that its runs "differ from their cell" in optim.lr)."""
    by_keys: dict[tuple, list[str]] = {}
    gone: dict[str, list[str]] = {}  # experiment/arm -> its runs, of a cell the project no longer composes
    set_by_spec = getattr(compose, "set_by_spec", None)  # cell_composer's: the keys the cell's specs write
    for rec in table.to_dict("records"):
        seed = _plain(rec.get("seed"))
        cell = compose(str(rec.get("experiment")), str(rec.get("arm")), int(seed), run_scale(rec)) if seed is not None else None
        if cell is None:
            if seed is not None:  # from a hunt: an arm removed from its experiment was read beside the new runs silently
                gone.setdefault(f"{rec.get('experiment')}/{rec.get('arm')}", []).append(str(rec["run_id"]))
            continue
        differ = [k for k in differs_from_cell(rec, cell) if k not in grid_keys]
        if differ:
            written = set_by_spec(str(rec.get("experiment")), str(rec.get("arm")), run_scale(rec)) if set_by_spec else set()
            spec = tuple((k, _shown(cell[k]), _shown(rec.get(CONFIG_PREFIX + k))) for k in differ
                         if any(k == w or k.startswith(w + ".") for w in written))
            by_keys.setdefault((spec, tuple(k for k in differ if k not in {s[0] for s in spec})), []).append(
                str(rec["run_id"]))
    out = []
    if gone:
        ids = [i for v in gone.values() for i in v]
        out.append(f"{len(ids)} run(s) of {listed(sorted(gone))}, which the project's specs no longer compose (an arm or "
                   f"experiment removed or renamed since they ran, or a plugin missing), are read as they ran: "
                   f"{listed(ids, 4)}")
    for (spec, keys), ids in sorted(by_keys.items()):
        shown = ", ".join(ids[:4]) + (f" and {len(ids) - 4} more" if len(ids) > 4 else "")
        # the keys the specs set, every one and first (from a hunt: an edited thinking.lam was cut behind three
        # command-line overrides as "and more"), then the others, which only a launch's overrides or another
        # arctl's defaults give
        named = [k for k, _, _ in spec] + list(keys[:3])
        more = f" and {len(keys) - 3} more" if len(keys) > 3 else ""
        edited = ""
        if spec:
            edited = (f"; the specs now set {', '.join(f'{k}={now}' for k, now, _ in spec)} where these runs ran "
                      f"{', '.join(ran for _, _, ran in spec)} (edited since they ran? launch again to train the cell "
                      "as it stands)" + ("; no spec sets the other keys (a launch's command-line overrides?)"
                                         if keys else ""))
        out.append(f"{len(ids)} run(s) differ from their cell as the report's sweep composes it, in "
                   f"{', '.join(named)}{more}: {shown}{edited}; they are read as that cell's runs (--where KEY=VALUE "
                   "leaves them out)")
    return out


def _decide(experiment: str, arm: str, seed: int, recs: list[dict], compose, source: str,
            notes: list[str] | None = None) -> str:
    """The run id of ``recs`` (runs of one cell) whose config is the composed cell's; ``notes`` gets the line
    naming it and the runs left out, with a key where they differ (from a hunt: a cell of two runs was read
    from one of them without a word of the other)."""
    columns = sorted({c for r in recs for c in r if c.startswith(CONFIG_PREFIX)})
    # not the keys that name a run (a run of another experiment is this cell's by its config: main-grpo's GRPO and
    # ablation-vr's, one computation; from a review: they were "two runs that differ in experiment")
    differ = [c for c in columns if not _names_the_run(c[len(CONFIG_PREFIX):])
              and any(not same_value(r.get(c), recs[0].get(c)) for r in recs[1:])]
    scales = {run_scale(r) for r in recs}
    cell = compose(experiment, arm, seed, scales.pop() if len(scales) == 1 else None) if compose else None
    if cell is not None:
        computed = _computed_keys(cell).union(*(_computed_keys(r, CONFIG_PREFIX) for r in recs))  # recorded
        # beside the config, or a knob none of them computes with: no setting
        differ = [c for c in differ if c[len(CONFIG_PREFIX):] in cell and c[len(CONFIG_PREFIX):] in computed]
        matching = [r for r in recs if all(same_value(r.get(c), cell[c[len(CONFIG_PREFIX):]]) for c in differ)]
        # the one that matches where the runs differ is the cell only if it differs from it nowhere else (from a
        # hunt: two runs both launched with scale.budgets=[...], the cell's loss_norm_len in one of them: that
        # one was read, silently, where neither is what the sweep composes; after an upgrade the old run was
        # read, not the one just launched)
        cells = [r for r in matching if not differs_from_cell(r, cell)]
        if cells:  # the cell's computation; run more than once (under several names, or one twice): the cell's own
            chosen = min(cells, key=lambda r: (not _own_cell(r, experiment, arm), str(r["run_id"])))
            if notes is not None:
                notes.append(_decided_note(experiment, arm, seed, chosen, recs, differ, source) if differ
                             else _same_computation_note(experiment, arm, seed, chosen, recs, source))
            return str(chosen["run_id"])
    key = differ[0][len(CONFIG_PREFIX):] if differ else None
    ids = "; ".join(f"{_shown(r.get(differ[0])) if differ else '?'}: {r['run_id']}" for r in sorted(recs, key=lambda r: str(r["run_id"])))
    what = f"that differ in {key}" if key else "with different configs"
    choose = f"choose with --where {key}=VALUE" if key else "choose with --where KEY=VALUE"
    also = f" (and {len(differ) - 1} more key(s))" if len(differ) > 1 else ""
    raise ReportError(f"{experiment}/{arm} seed {seed} has {len(recs)} runs in {source} {what}{also} ({ids}), and none "
                      f"is the cell as the report's sweep composes it; {choose}")


def _own_cell(rec: dict, experiment: str, arm: str) -> bool:
    """Whether the runs-table row ``rec``, read as cell ``experiment``/``arm``, was launched as that cell (its
    config's names), not as another experiment's run of the same computation."""
    return _launched_as(rec) == (experiment, arm)


def _same_computation_note(experiment: str, arm: str, seed: int, read: dict, recs: list[dict], source: str) -> str:
    """The note of a cell with several runs of one computation (names aside): the run read (the cell's own, else
    the first by id) and the others, which would give the same numbers up to the machine's float sums, with the
    experiment/arm each was launched as (from a review: two arms of one experiment written alike were said to be
    "several experiments' names")."""
    left = sorted((r for r in recs if r is not read), key=lambda r: str(r["run_id"]))
    names = list(dict.fromkeys("/".join(_launched_as(r)) for r in (read, *left)))
    launched = (f"each launched as {names[0]}" if len(names) == 1
                else f"launched as {', '.join(names[:-1])} and {names[-1]}")
    return (f"{experiment}/{arm} seed {seed} has {len(recs)} runs of the same config in {source} ({launched}): "
            f"read {read['run_id']}, left out {', '.join(str(r['run_id']) for r in left)}")


def _launched_as(rec: dict) -> tuple[str, str]:
    """(experiment, arm): the cell runs-table row ``rec`` was launched as (its config's names)."""
    return (str(rec.get(CONFIG_PREFIX + "experiment", rec.get("experiment"))),
            str(rec.get(CONFIG_PREFIX + "arm", rec.get("arm"))))


def _decided_note(experiment: str, arm: str, seed: int, read: dict, recs: list[dict], differ: list[str],
                  source: str) -> str:
    """The warning of a cell :func:`_decide` read one of several runs of: the run read and those left out, with
    the first key where they differ and its values."""
    others = sorted((r for r in recs if r is not read), key=lambda r: str(r["run_id"]))
    if differ:
        key = differ[0][len(CONFIG_PREFIX):]
        more = f" (and {len(differ) - 1} more key(s))" if len(differ) > 1 else ""
        left = ", ".join(f"{r['run_id']} ({key}={_shown(r.get(differ[0]))})" for r in others)
        said = f"{read['run_id']} ({key}={_shown(read.get(differ[0]))}, the cell as the report's sweep composes it)"
        how = f"--where {key}=VALUE reads another"
    else:
        more, left = "", ", ".join(str(r["run_id"]) for r in others)
        said = f"{read['run_id']} (the cell as the report's sweep composes it)"
        how = "--where KEY=VALUE reads another"
    return (f"{experiment}/{arm} seed {seed} has {len(recs)} runs in {source}: read {said}, left out {left}{more}; "
            f"{how}")


def cell_composer(sweeps: Sequence[str] | None, overrides: Sequence[str] = ()) -> Callable[[str, str, int, str | None],
                                                                                         dict | None]:
    """``compose(experiment, arm, seed, scale)``: the cell's resolved config, flattened, as the first of
    ``sweeps`` that has the experiment composes it (its overrides and, for a grid, nothing of the grid:
    a grid point is told apart by its own key), else as the experiment alone, with ``overrides`` given on the
    command line (``KEY=VALUE``); None when it cannot be composed (the experiment or arm is no longer in the
    project, a plugin is missing)."""
    from arctl.compose.errors import SpecError
    from arctl.compose.experiment import load_experiment
    from arctl.compose.resolve import resolve_as_launched
    from arctl.compose.sweep import load_sweep
    from arctl.track.runs import flatten_config

    memo: dict[tuple, dict | None] = {}
    loaded: dict[str, list] = {}  # the sweeps' specs, read once, at the first cell composed

    def _sweeps() -> list:
        if "sweeps" not in loaded:
            loaded["sweeps"] = [load_sweep(n) for n in sweeps or []]
        return loaded["sweeps"]

    def compose(experiment: str, arm: str, seed: int, scale: str | None) -> dict | None:
        key = (experiment, arm, scale)  # the seed changes only the key `seed`: composed once, at this seed
        if key not in memo:
            try:
                exp = load_experiment(experiment)
                sweep = next((s for s in _sweeps() if experiment in s.experiments), None)
                # as the launch made it: without the sweep's overrides it reads nothing of (the launch judged them)
                run = resolve_as_launched(exp, arm, seed, scale, list(overrides) or None,
                                          sweep_overrides=sweep.overrides if sweep else None,
                                          sweep=sweep.name if sweep else None)
                memo[key] = flatten_config(run.config)
            except (SpecError, KeyError, OSError, ValueError):
                memo[key] = None
        return None if memo[key] is None else {**memo[key], "seed": seed}

    def set_by_spec(experiment: str, arm: str, scale: str | None) -> set[str]:
        """The keys the cell's specs and ``overrides`` write (the experiment's overrides and groups, its
        ``scales.<scale>``, the arm's, the sweep's overrides; a config-group choice as the keys it sets where
        :data:`arctl.compose.resolve.GROUP_KEYS` knows them); empty where the specs cannot be read."""
        from arctl.compose.overrides import split_overrides
        from arctl.compose.paths import default_option
        from arctl.compose.resolve import GROUP_KEYS, _user_keys

        try:
            exp = load_experiment(experiment)
            sweep = next((s for s in _sweeps() if experiment in s.experiments), None)
            texts = [*exp.overrides, *exp.scales.get(scale or default_option("scale") or "", []), *exp.arms[arm],
                     *(sweep.overrides if sweep else []), *overrides]
            keys = set(_user_keys(split_overrides(texts, str(exp.path))))
        except (SpecError, KeyError, OSError, ValueError):
            return set()
        return keys.union(*(GROUP_KEYS.get(group, ()) for group in exp.groups))

    compose.set_by_spec = set_by_spec  # type: ignore[attr-defined]  # _not_composed names these keys first
    return compose


def grid_keys(sweeps: Sequence[str] | None) -> list[str]:
    """The keys the grids of ``sweeps`` set (a grid point is a cell of its own)."""
    from arctl.compose.sweep import load_sweep

    return sorted({k for name in sweeps or [] for k in load_sweep(name).grid})


def serving(experiments: Sequence[str], sweeps: Sequence[str] | None) -> Callable[[dict], list[tuple[str, str]]]:
    """``serves(config)``: the cells (experiment, arm) of ``experiments`` that a run with this resolved
    config is, names aside: its config equals the cell as ``sweeps`` compose it at the run's scale and
    seed on every key but the run's names and launch sections. What ``shared.json`` says of a
    workspace run (``share_arms``), told from the config alone, for runs read from a W&B project."""
    from arctl.compose.errors import SpecError
    from arctl.compose.experiment import load_experiment
    from arctl.track.runs import flatten_config

    cells = []
    for name in experiments:
        try:
            cells += [(name, arm) for arm in load_experiment(name).arms]
        except SpecError:
            continue
    compose = cell_composer(sweeps)

    def serves(config: dict) -> list[tuple[str, str]]:
        flat = flatten_config(config)
        seed, scale = _plain(flat.get("seed")), run_scale(flat, prefix="")
        if not isinstance(seed, int | float) or isinstance(seed, bool):
            return []
        out = []
        for experiment, arm in cells:
            cell = compose(experiment, arm, int(seed), scale)
            if cell is not None and all(same_value(flat.get(k), v) for k, v in cell.items()
                                        if not _names_the_run(k, seed=False)):
                out.append((experiment, arm))
        return out

    return serves
