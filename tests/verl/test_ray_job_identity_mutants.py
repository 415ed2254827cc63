"""A verl job's W&B identity as its script exports it, from a mutation hunt of arctl/track/identity.py.

verl's tracker opens its own W&B run from the job's environment: ``wandb.entity`` reaches it in ``WANDB_ENTITY``, the
tags of ``wandb.tags`` in ``WANDB_TAGS`` (comma-separated: wandb splits them there), and the job's environment keeps the caller's variables
beside the ``WANDB_*`` ones (``VERL_FILE_LOGGER_PATH``: where verl writes the metrics arctl reads back).
"""

from __future__ import annotations

import copy
import shlex

from arctl.backends.verl.history import VERL_LOG
from arctl.backends.verl.ray_job import job_script


def _exports(script: str) -> dict[str, str]:
    out = {}
    for line in script.splitlines():
        words = shlex.split(line, comments=True) if line.startswith("export ") else []
        for word in words[1:]:
            name, _, value = word.partition("=")
            out[name] = value
    return out


def test_a_verl_job_gives_w_and_b_each_tag_and_verl_its_metrics_file(paper_config, tmp_path):
    """``wandb.tags=[paper, lam] wandb.entity=lab``: W&B shows the verl run under the entity ``lab`` with the tags
    ``paper`` and ``lam``; verl writes its
    metrics to ``run_dir/<VERL_LOG>``, where arctl's reader looks."""
    cfg = copy.deepcopy(paper_config)
    cfg["wandb"].update(tags=["paper", "lam"], entity="lab")
    exports = _exports(job_script(cfg, tmp_path / "run", python="python3"))
    assert exports["WANDB_TAGS"].split(",") == ["paper", "lam"]
    assert exports["WANDB_ENTITY"] == "lab"
    assert exports["VERL_FILE_LOGGER_PATH"] == str(tmp_path / "run" / VERL_LOG)
