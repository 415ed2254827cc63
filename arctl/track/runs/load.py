"""Reading runs: :func:`load_runs`, the front door, and the reading of workspace runs (offline
.wandb files): each run's fragments parsed (:mod:`arctl.track.wandbfile`), stitched
(:mod:`arctl.track.runs.stitch`) and cached (:mod:`arctl.track.runs.cache`), the runs that need
parsing in parallel processes with a progress bar (:mod:`arctl.track.runs.pool`)."""

from __future__ import annotations

import tempfile
import warnings
from collections.abc import Iterable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path

from arctl.track.run_data import RunData
from arctl.track.runs.cache import CACHE_VERSION, WORKSPACE_CACHE, _cached_meta, _write_cache
from arctl.track.runs.discover import (
    RunReadWarning,
    RunSource,
    default_workdir,
    discover_runs,
    read_run_config,
    read_run_yaml,
    read_served,
    run_identity,
)
from arctl.track.runs.online import _load_online, _online_cache_dir
from arctl.track.runs.pool import _run_parallel
from arctl.track.runs.stitch import in_attempt_order, nonfinite_notes, stitch_logged
from arctl.track.runs.tidy import Runs, _assemble


def workspace_cache(workdir: Path, *, probe: bool = True) -> Path:
    """Where the parsed runs of ``workdir`` are cached: ``<workdir>/.arctl-cache/runs``, or where the
    workspace cannot be written (a read-only copy, another user's, an export on a read-only mount)
    ``<user cache>/runs/<hash of the workspace's path>`` (:func:`arctl.config.files.cache_root`). Not ``probe``:
    the workspace's where it is a folder, without trying to create a file there (a reader that writes nothing)."""
    import hashlib

    from arctl.config.files import cache_root, writable_dir

    cache = workdir / WORKSPACE_CACHE / "runs"
    if writable_dir(cache) if probe else cache.is_dir():
        return cache
    return cache_root() / "runs" / hashlib.sha256(str(workdir.resolve()).encode()).hexdigest()[:16]


@contextmanager
def _usable_cache(workdir: Path) -> Iterator[Path]:
    """The cache a read of ``workdir`` writes: :func:`workspace_cache`, or where that cannot be written either (a
    read-only workspace with HOME unset or unwritable, an unwritable ``$ARCTL_CACHE``) a temporary folder, removed
    after the read, said in one note line (stderr) naming both caches and ``$ARCTL_CACHE``: from a hunt, such a
    report failed with "error: /nonexistent: Permission denied" alone. A note, not one of the read's warnings:
    those are what could not be read (a report with no runs counts them as unreadable files)."""
    from arctl.config.files import CACHE_ENV, cache_root, folder_problem

    cache = workspace_cache(workdir)
    if (problem := folder_problem(cache)) is None:
        yield cache
        return
    from rich.console import Console
    from rich.markup import escape

    Console(stderr=True).print(
        "[yellow]note[/]: " + escape(f"neither the workspace's cache ({workdir / WORKSPACE_CACHE}) nor the user cache "
                                     f"({cache_root()}) can be written ({problem}): the runs are read into a temporary "
                                     f"one, parsed again each time; set {CACHE_ENV} to a folder you can write to keep "
                                     "it"), highlight=False, soft_wrap=True)
    with tempfile.TemporaryDirectory(prefix="arctl-runs-") as tmp:
        yield Path(tmp)


def ingest_offline(source: RunSource, cache_dir: str, signature: list | None = None) -> dict:
    """Parse the fragments of one run, stitch them, cache them; return the run's metadata. The cache is
    stamped with ``signature``, the files' state taken before they were read (default: now): a file that
    grows while it is read leaves a cache that the next read finds stale, not one stamped as current."""
    from arctl.track.wandbfile import WandbFileError, read_wandb_file
    from arctl.track.wandbfile.reader import NO_EXIT_RECORD, NO_RECORDS, TAIL_CUT

    notes: list[str] = []
    frags: list[RunData] = []
    for p in source.files:
        try:
            frags.append(read_wandb_file(p, summary=False))
        except (OSError, WandbFileError) as e:
            notes.append(f"{p}: unreadable ({e}); {NO_RECORDS}")
    for f in frags:
        # a file without its exit record that ends inside a record is one being written (wandb-core flushes
        # partway through records) or whose writer was killed: its state, which NO_EXIT_RECORD says, not damage
        # (from a hunt: a report while a run trained called its file unreadable, "check or remove them")
        notes.extend(n for n in f.warnings if not (f.state == "incomplete" and n.endswith(TAIL_CUT)))
    # an unfinished fragment followed by a later one is a resumed run, not damage
    ordered = in_attempt_order(frags)
    notes = [n for n in notes if not (n.endswith(NO_EXIT_RECORD)
                                      and ordered and not n.startswith(ordered[-1].source))]
    config: dict = {}
    if source.config_path is not None:
        try:
            config = read_run_yaml(source.config_path)
        except Exception as e:  # a broken config.yaml: fall back to the W&B config
            notes.append(f"{source.config_path}: unreadable ({e}); used the W&B config")
    recorded_keys: list[str] = []  # top-level keys of `config` that came from W&B's, not config.yaml
    if not config:
        for f in ordered:
            config = f.config or config
    else:  # config.yaml is the resolved config; what the job recorded itself (warmup, machine, init) is in W&B's
        recorded: dict = {}
        for f in ordered:  # the latest attempt's record wins
            recorded.update({k: v for k, v in (f.config or {}).items() if not str(k).startswith("_")})
        recorded_keys = sorted(str(k) for k in recorded if k not in config)
        config = {**{k: v for k, v in recorded.items() if k not in config}, **config}
    last = ordered[-1] if ordered else None
    experiment, arm, seed = run_identity(config, last.name if last else "")
    if not experiment and last is not None:
        experiment = last.group
    wide, logged, stitch_notes = stitch_logged(frags)
    notes.extend(stitch_notes)
    summary: dict = {}
    for f in ordered:
        summary.update(f.summary)
    meta = {
        "version": CACHE_VERSION,
        "run_id": source.run_id,
        "experiment": experiment,
        "arm": arm,
        "seed": seed,
        "state": last.state if last else "empty",
        "exit_code": last.exit_code if last else None,
        "wandb_ids": sorted({f.wandb_id for f in frags}),
        "name": last.name if last else "",
        "group": last.group if last else "",
        "project": last.project if last else "",
        "n_fragments": len(frags),
        "n_steps": int(len(wide)),
        "last_step": int(wide.index.max()) if len(wide) else None,
        "metrics": [str(c) for c in wide.columns],
        "config": config,
        "recorded": recorded_keys,
        "summary": {k: v for k, v in summary.items() if not k.startswith("_")},
        "signature": signature if signature is not None else source.signature(),
        "warnings": notes,
        "nonfinite": [f"run {source.run_id}: {n}" for n in nonfinite_notes(wide, logged)],
    }
    return _write_cache(wide, logged, meta, Path(cache_dir))


def load_runs(
    workdir: str | Path | None = None,
    *,
    experiments: Iterable[str] | None = None,
    metrics: Sequence[str] | None = None,
    wandb_project: str | None = None,
    filters: dict | None = None,
    cache_dir: str | Path | None = None,
    processes: int | None = None,
    progress: bool = True,
    api=None,
    last_only: bool = False,
    serves=None,
) -> Runs:
    """Read the runs of a workspace (default) or of a W&B project (``wandb_project="entity/project"``).

    ``experiments`` keeps only runs of those experiments; ``metrics`` is a list of glob patterns
    (``eval/*/acc@*``) selecting the metrics put in ``history`` (all when ``None``). Damaged files
    give :class:`RunReadWarning` warnings (also listed in ``Runs.warnings``), never an exception.
    ``last_only`` keeps only the last logged value of each (run, metric) — the rows
    ``history.drop_duplicates(["run_id", "metric"], keep="last")`` would keep — read from the
    cache's JSON sidecars without opening any parquet file.

    A workspace run that serves other cells (its ``shared.json``, ``share_arms``: other experiments,
    or arms of another name with the same config) counts as a run of them: when its own experiment
    is not among ``experiments`` but one it serves is, it is kept with ``experiment`` and ``arm`` set
    to the first (sorted) requested cell it serves. Each run is one row whatever it serves; the
    other requested cells it serves are in the ``serves`` column of ``runs`` (JSON
    ``[[experiment, arm], ...]``, "" for none; cells of its own experiment too: a report reads the run as each
    cell its shared.json names, one row per cell, :func:`arctl.report.data.read_for_served_cells`, and the claims
    as each it serves); without ``experiments`` nothing is relabelled and ``serves`` lists every cell. ``serves(config) -> [(experiment, arm), ...]`` (the report layer
    composes the cells) names the requested cells a run serves by its config, and the run is read as
    theirs in the same way: W&B has no ``shared.json``, and a workspace run launched on its own (``arctl
    run main-grpo --seeds 8-21``) has none either, yet is ablation-decouple's GRPO run too (from a hunt:
    Fig. 5 drew GRPO from the 8 runs a shared sweep had marked, where claim 5 paired all 22).
    """
    exp_set = set(experiments) if experiments is not None else None
    notes: list[str] = []  # the run folders the read cannot look into
    with ExitStack() as scope:
        if wandb_project:
            metas = _load_online(wandb_project, filters, exp_set, cache_dir, progress, api, serves)
            cache = Path(cache_dir) if cache_dir else _online_cache_dir(wandb_project)
        else:
            workdir = Path(workdir) if workdir is not None else default_workdir()
            cache = Path(cache_dir) if cache_dir else scope.enter_context(_usable_cache(workdir))
            metas = _load_offline(workdir, exp_set, cache, processes, progress, notes, serves)
        metas.sort(key=lambda m: (m["experiment"], m["arm"], m["seed"] if m["seed"] is not None else -1, m["run_id"]))
        out = _assemble(metas, cache, metrics, last_only)
    out.warnings = [*notes, *out.warnings]
    for w in out.warnings:
        warnings.warn(w, RunReadWarning, stacklevel=2)
    return out


def _load_offline(workdir: Path, exp_set, cache: Path, processes, progress, notes: list[str],
                  serves=None) -> list[dict]:
    """The metadata of the runs of ``workdir`` (those of ``exp_set``, and those serving one of them: their
    ``shared.json``, or ``serves(config)``), read from ``cache`` where current, else parsed into it; a run folder
    that cannot be looked into is named in ``notes`` and left out."""
    metas: list[dict | None] = []
    todo: list[tuple[int, RunSource, list]] = []  # (index in metas, source, its signature before reading)
    served: list[list] = []  # per source, the cells its shared.json names (read afresh: not in the cache's signature)
    cells_of: dict[str, list] = {}  # per run looked at: its shared.json's cells, and those serves() names

    def keep(run_dir: Path, config_path: Path | None) -> bool:
        """Whether the run of folder ``run_dir`` is one of ``exp_set`` or serves one (by its shared.json, or
        serves(config)), told before its W&B files are searched for, from its config.yaml as cached (read_run_config)."""
        run_id = run_dir.name
        cells = cells_of[run_id] = read_served(run_dir)  # (a folder without config.yaml too:
        # from a hunt, a shared run known by its W&B config served none of the cells its shared.json names)
        if (exp_set is None and serves is None) or config_path is None:
            return True
        try:
            config = read_run_config(config_path, cache, run_id)
        except Exception:  # read, warned about and identified by its W&B config (ingest_offline)
            config = None
        if serves is not None and config is not None:  # the cells it is by its config (no shared.json needed)
            cells += [c for c in map(tuple, serves(config)) if c not in cells]
        exp = str(config.get("experiment", "")) if config is not None else None
        return exp_set is None or exp is None or exp in exp_set or any(e in exp_set for e, _ in cells)

    for s in discover_runs(workdir, notes, keep):
        try:
            sig = s.signature()  # before any read of the files (ingest_offline stamps the cache with it)
        except OSError as e:  # moved while listed (a restart's wandb-discarded/): the next read has it
            warnings.warn(f"run {s.run_id}: its files changed while being listed ({e}); left out of this read",
                          RunReadWarning, stacklevel=3)
            continue
        meta = _cached_meta(cache, s.run_id, sig)
        metas.append(meta)
        served.append(cells_of.get(s.run_id, []))
        if meta is None:
            todo.append((len(metas) - 1, s, sig))
    if todo:
        results = _run_parallel(ingest_offline, [(s, str(cache), sig) for _, s, sig in todo], processes, progress,
                                "reading runs", prefetch=[p for _, s, _ in todo for p in s.files])
        for (i, _, _), meta in zip(todo, results):
            metas[i] = meta
    out = []
    for m, named in zip(metas, served):
        if m is None:
            continue
        if serves is not None:  # by its config as read (from a review: a run whose config.yaml could not be read
            # was asked nothing before its W&B config was, and was left out of the first read only)
            named = [*named, *(c for c in map(tuple, serves(m.get("config") or {})) if c not in named)]
        # an earlier arctl's shared.json names experiments only: the run's own arm (the cache keeps its own names)
        cells = list(dict.fromkeys((e, m["arm"] if a is None else a) for e, a in named))
        if exp_set is not None:
            cells = sorted(c for c in cells if c[0] in exp_set)
            if m["experiment"] not in exp_set:  # not its own: the first cell it serves (a copy)
                if not cells:
                    continue
                m = {**m, "experiment": cells[0][0], "arm": cells[0][1]}
        others = [list(c) for c in cells if c != (m["experiment"], m["arm"])]
        out.append({**m, "serves": others} if others else m)
    return out
