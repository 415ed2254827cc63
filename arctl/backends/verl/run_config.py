"""The verl run of one arctl config: its override list and checked verl config (eval-only mode
included), the data files that config reads, and the W&B settings verl's tracker gets through Ray's
runtime env. Used by the trainer (:mod:`arctl.backends.verl.trainer`) and by the smoke checks
(:mod:`arctl.backends.verl.smoke`), which go through the same steps as the real run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from arctl.backends.verl.history import VERL_LOG
from arctl.backends.verl.overrides import (
    build_verl_config,
    dataset_file,
    fmt_value,
    verl_overrides,
    verl_setting,
)
from arctl.backends.verl.settings import EVAL_MODEL
from arctl.track.identity import WandbIdentity


def eval_only_overrides(config: dict, run_dir: Path | None) -> list[str]:
    """Extra overrides of the eval-only mode: validation only, grid budgets, final eval datasets."""
    ev = config["eval"]
    datasets = list(ev.get("final_datasets") or ev["datasets"])
    files = [str(dataset_file(config, name, "test")) for name in datasets]
    out = [
        "trainer.val_only=true",
        "trainer.val_before_train=true",
        f"data.val_files={fmt_value(files)}",
        f"arctl.eval_datasets={fmt_value(datasets)}",
        "arctl.eval_only=true",
    ]
    ckpt = verl_setting(config, "eval_checkpoint")
    if ckpt == EVAL_MODEL:  # model.path itself: nothing to resume (never a checkpoint of the run dir)
        out.append("trainer.resume_mode=disable")
    elif ckpt:
        out += ["trainer.resume_mode=resume_path", f"trainer.resume_from_path={fmt_value(str(ckpt))}"]
    return out


def _with_eval_only(config: dict, run_dir: Path | None) -> dict:
    """The config whose ``verl.overrides`` start with the eval-only mode's (the config itself when not
    eval-only)."""
    if not bool(verl_setting(config, "eval_only")):
        return config
    from copy import deepcopy

    config = deepcopy(config)
    config.setdefault("verl", {})
    extra = list(config["verl"].get("overrides") or [])
    config["verl"]["overrides"] = eval_only_overrides(config, run_dir) + extra
    return config


def run_overrides(config: dict, run_dir: Path | None) -> list[str]:
    """The override list the trainer runs (eval-only mode included), without composing verl's config:
    what the sbatch script shows."""
    return verl_overrides(_with_eval_only(config, run_dir), run_dir)


def verl_run_config(config: dict, run_dir: Path | None) -> tuple[list[str], Any]:
    """Overrides and the checked verl config of this arctl config (eval-only mode included)."""
    return build_verl_config(_with_eval_only(config, run_dir), run_dir)


def data_files(cfg: Any) -> list[str]:
    """The train and validation files of a composed verl config (each key a path or a list)."""
    from omegaconf import OmegaConf

    files = []
    for key in ("data.train_files", "data.val_files"):
        value = OmegaConf.select(cfg, key)
        if value is not None:
            files += [str(v) for v in value] if OmegaConf.is_list(value) or isinstance(value, (list, tuple)) else [str(value)]
    return [f for f in files if f]


def wandb_env(config: dict, run_dir: Path) -> dict[str, str]:
    """W&B settings for verl's tracker (its ``wandb.init`` reads them); never the API key. verl
    names the run itself (``trainer.experiment_name``), so no ``WANDB_NAME``."""
    identity = WandbIdentity.from_config(config, run_dir, arm_default=None)
    return identity.env(name=False, extra={"VERL_FILE_LOGGER_PATH": str(run_dir / VERL_LOG)})


def platform_env(config: dict) -> dict[str, str]:
    """``VERL_PLATFORM=cpu`` for ``verl.device=cpu`` (verl's platform registry selects arctl's CPU
    platform by it), else nothing."""
    from arctl.backends.verl.cpu_platform import PLATFORM, PLATFORM_ENV
    from arctl.backends.verl.overrides import on_cpu

    return {PLATFORM_ENV: PLATFORM} if on_cpu(config) else {}


def with_wandb_env(cfg: Any, config: dict, run_dir: Path) -> Any:
    """Put the W&B settings (and the platform of ``verl.device=cpu``) into
    ``ray_kwargs.ray_init.runtime_env.env_vars`` of the verl config.

    Ray actors (verl's TaskRunner logs to W&B) get them through the runtime env; the API key stays
    in the process environment that Ray workers inherit and is never put in the config, which
    verl prints.
    """
    from omegaconf import OmegaConf

    existing = OmegaConf.select(cfg, "ray_kwargs.ray_init.runtime_env.env_vars", default=None)
    env_vars = dict(OmegaConf.to_container(existing)) if OmegaConf.is_config(existing) else {}
    env_vars.update(wandb_env(config, Path(run_dir)))
    env_vars.update(platform_env(config))
    OmegaConf.update(cfg, "ray_kwargs.ray_init.runtime_env.env_vars", env_vars, force_add=True)
    return cfg
