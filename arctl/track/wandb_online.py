"""Reader for runs on a W&B server (wandb.ai or self-hosted): ``wandb.Api().runs`` + exact history.

History comes from ``run.scan_history()`` (every row), never ``run.history()`` (server-sampled).
The server is ``$WANDB_BASE_URL`` when set (self-hosted), else wandb's default. The API key comes
from wandb's own login (``WANDB_API_KEY`` / netrc); arctl never reads, stores or prints it.
"""

from __future__ import annotations

import math
import os

import numpy as np

from arctl.track.run_data import RunData
from arctl.track.wandbfile.values import _is_nan_text


class WandbAccessError(ValueError):
    """The W&B server could not be reached or refused us (no login, wrong URL, no such project)."""


_STATES = {"finished": "finished", "failed": "failed", "crashed": "failed", "killed": "failed"}


def make_api(timeout: int = 60):
    """A ``wandb.Api`` bound to ``$WANDB_BASE_URL`` when that is set."""
    import wandb

    overrides = {}
    base_url = os.environ.get("WANDB_BASE_URL")
    if base_url:
        overrides["base_url"] = base_url.rstrip("/")
    return wandb.Api(overrides=overrides, timeout=timeout)


def list_runs(project: str, filters: dict | None = None, api=None) -> list:
    """Runs of ``entity/project`` matching the Mongo-style ``filters`` (``{"group": "ablation-vr"}``,
    ``{"config.arm": "grpo"}``)."""
    if project.count("/") != 1 or not all(project.split("/")):
        raise ValueError(f"W&B project {project!r} must be written ENTITY/PROJECT (e.g. my-team/arctl)")
    try:
        api = api if api is not None else make_api()
        return list(api.runs(project, filters=filters or {}))
    except Exception as err:  # wandb/requests errors at the network boundary → one clear line
        if isinstance(err, WandbAccessError):
            raise
        server = os.environ.get("WANDB_BASE_URL") or "https://api.wandb.ai"
        first = (str(err).strip().splitlines() or [type(err).__name__])[0]
        raise WandbAccessError(
            f"cannot list the runs of W&B project {project} on {server}: {first} "
            "(log in with `wandb login` or set WANDB_API_KEY; set WANDB_BASE_URL for a self-hosted server)"
        ) from err


def run_signature(run) -> list:
    """What identifies one version of an online run's data (the cache key)."""
    attrs = getattr(run, "_attrs", None) or {}
    return [[
        f"wandb:{getattr(run, 'entity', '')}/{getattr(run, 'project', '')}/{run.id}",
        str(getattr(run, "state", "")),
        str(attrs.get("heartbeatAt") or attrs.get("updatedAt") or ""),
        str(attrs.get("historyLineCount") or ""),
    ]]


def _number(v) -> float:
    if isinstance(v, bool | int | float):
        return float(v)
    if isinstance(v, str):
        try:
            return float(v)  # "NaN"/"Infinity" come back as strings from some servers
        except ValueError:
            return math.nan
    return math.nan


def _logged_nan(v) -> bool:
    """A NaN the run logged (``nan``, or ``"NaN"`` from a server), not a value that is no number."""
    if isinstance(v, float):
        return math.isnan(v)
    return isinstance(v, str) and _is_nan_text(v)


def _unwrap_config(config: dict) -> dict:
    """Older servers return ``{key: {"value": v, "desc": ...}}``; arctl wants ``{key: v}``."""
    return {
        k: (v["value"] if isinstance(v, dict) and "value" in v and set(v) <= {"value", "desc"} else v)
        for k, v in config.items()
        if k != "_wandb"
    }


def read_run(run, page_size: int = 1000) -> RunData:
    """One API run → :class:`RunData`, with its full (unsampled) history."""
    try:
        rows = list(run.scan_history(page_size=page_size))
    except Exception as err:  # network boundary: one clear line
        first = (str(err).strip().splitlines() or [type(err).__name__])[0]
        raise WandbAccessError(f"cannot read the history of W&B run {run.id}: {first}") from err
    col_index: dict[str, int] = {}
    for row in rows:
        for k in row:
            col_index.setdefault(k, len(col_index))
    values = np.full((len(rows), len(col_index)), np.nan)
    nan = np.zeros(values.shape, dtype=bool)
    for i, row in enumerate(rows):
        for k, v in row.items():
            values[i, col_index[k]] = _number(v)
            nan[i, col_index[k]] = _logged_nan(v)
    state = str(getattr(run, "state", "") or "")
    summary = getattr(run, "summary", None)
    try:
        summary = dict(getattr(summary, "_json_dict", None) or summary or {})
    except (TypeError, ValueError):
        summary = {}
    return RunData(
        wandb_id=str(run.id),
        source=f"wandb:{getattr(run, 'entity', '')}/{getattr(run, 'project', '')}/{run.id}",
        project=str(getattr(run, "project", "") or ""),
        entity=str(getattr(run, "entity", "") or ""),
        group=str(getattr(run, "group", "") or ""),
        name=str(getattr(run, "name", "") or ""),
        config=_unwrap_config(dict(run.config or {})),
        summary=summary,
        state=_STATES.get(state, "incomplete"),
        exit_code=None,
        keys=list(col_index),
        values=values,
        nan=nan if nan.any() else None,
    )
