"""Runs of a workspace (offline .wandb files) or of a W&B project → tidy pandas data.

``load_runs`` returns :class:`Runs`: ``history``, one long DataFrame with columns
(run_id, arm, experiment, seed, step, metric, value), and ``runs``, one row per run with its
flattened config. Steps are ``trainer/global_step`` values; fragments of a resumed run (several
.wandb files of one run) are stitched on that key, later fragments winning on overlapping steps.

Each run is parsed once and cached as parquet (one file per group of metrics logged at the same
steps) plus a JSON sidecar keyed on the state of every source file, so re-rendering reads only what
changed (:mod:`~arctl.track.runs.cache`). Runs
that need parsing are read in parallel processes with a progress bar.

Workspace layout: ``<workdir>/runs/<run_id>/config.yaml`` (experiment, arm, seed) and
``<workdir>/runs/<run_id>/wandb/**/run-*.wandb``. A directory without ``runs/`` is searched for
``run-*.wandb`` files directly, one run per W&B run id.

A run may serve cells besides its own (a sweep with ``share_arms: true`` runs a config that several
experiments, or arms of other names, resolve to once): ``<workdir>/runs/<run_id>/shared.json`` =
``{"cells": [[experiment, arm], ...]}`` lists them, and ``load_runs(experiments=...)`` then counts
it as a run of those cells too.

Modules, one concept each:

- :mod:`~arctl.track.runs.discover`: finding the runs of a workspace (fragment files, config.yaml,
  shared.json) and a run's (experiment, arm, seed)
- :mod:`~arctl.track.runs.stitch`: the fragments of a resumed run → one wide table
- :mod:`~arctl.track.runs.cache`: the parquet cache and its JSON sidecar
- :mod:`~arctl.track.runs.pool`: worker processes, progress bar, read-ahead
- :mod:`~arctl.track.runs.tidy`: cached runs → :class:`Runs`
- :mod:`~arctl.track.runs.online`: runs of a W&B project (through the API)
- :mod:`~arctl.track.runs.load`: :func:`load_runs` and the reading of workspace runs
"""

from arctl.track.runs.cache import CACHE_VERSION
from arctl.track.runs.discover import SHARED_FILE, RunSource, default_workdir, discover_runs, run_identity
from arctl.track.runs.load import RunReadWarning, ingest_offline, load_runs
from arctl.track.runs.online import ingest_online
from arctl.track.runs.stitch import stitch_fragments, stitch_logged
from arctl.track.runs.tidy import ID_COLUMNS, Runs, flatten_config

__all__ = [
    "CACHE_VERSION",
    "ID_COLUMNS",
    "SHARED_FILE",
    "RunReadWarning",
    "RunSource",
    "Runs",
    "default_workdir",
    "discover_runs",
    "flatten_config",
    "ingest_offline",
    "ingest_online",
    "load_runs",
    "run_identity",
    "stitch_fragments",
    "stitch_logged",
]
