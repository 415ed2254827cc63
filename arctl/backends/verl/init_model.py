"""A verl run that starts from another run's final weights (``trainer.init_from``: L1-Max from
L1-Exact, ThinkPrune's rounds), as the released scripts do it: the other run's newest complete
checkpoint, merged into a Hugging Face model directory by verl's own model merger
(``verl.model_merger``, FSDP backend, which writes bf16 weights, as for any released checkpoint),
becomes this run's ``model.path``. The optimizer, the data
order and the step count are this run's own (step 0); verl's resume of this run's own checkpoints is
unchanged.

The merge runs once, in the job, before verl starts: ``run_dir/init_model/`` (weights, config and
tokenizer), written to a temporary folder and renamed when complete, with ``init.json`` beside it
(the run id, step and checkpoint it came from). A resumed attempt reuses it; a run that already has a
checkpoint of its own and no merged model (deleted) keeps its ``model.path``: its weights come from
its checkpoint; with a KL term it is merged again (verl's reference policy is ``model.path``: the
weights the run started from), or the attempt stops with one line where that checkpoint is gone.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from arctl.backends.verl import checkpoints
from arctl.backends.verl.overrides import VerlConfigError
from arctl.config.files import atomic_write

INIT_MODEL_DIR = "init_model"
INIT_RECORD = "init.json"


def init_model_path(config: dict, run_dir: Path) -> str | None:
    """The model directory this run starts from (merged on first use), or None: ``model.path``."""
    init_dir = config.get("init_dir")
    if not init_dir:
        return None
    run_dir, init_dir = Path(run_dir), Path(init_dir)
    target = run_dir / INIT_MODEL_DIR
    if (run_dir / INIT_RECORD).is_file() and target.is_dir():
        return str(target)
    if checkpoints.newest_complete(run_dir / "checkpoints")[0] > 0:
        if float((config.get("optim") or {}).get("kl_coef") or 0) > 0:  # verl's KL reference is model.path
            return _merged_again(run_dir, target)  # the weights it started from
        return None  # resumes from its own checkpoint, which holds its weights
    step, _ = checkpoints.newest_complete(init_dir / "checkpoints")
    if step == 0:
        raise VerlConfigError(f"run {init_dir.name} has no complete checkpoint to start from "
                              f"({init_dir / 'checkpoints'}): `arctl run` it first")
    actor = checkpoints.folder(init_dir / "checkpoints", step) / "actor"
    merge_actor(actor, target)
    atomic_write(run_dir / INIT_RECORD, json.dumps({"run_id": init_dir.name, "step": step,
                                                    "checkpoint": str(actor.parent)}, indent=1))
    print(f"arctl: starts from run {init_dir.name}, step {step} ({actor.parent}), merged into {target}", flush=True)
    return str(target)


def _merged_again(run_dir: Path, target: Path) -> str:
    """``init_model/`` of a run with a KL term, deleted after the run had checkpoints of its own: merged
    again from the checkpoint ``init.json`` names (from a review: verl builds the KL reference from
    ``model.path``, so the reference had silently become the base model for the rest of the run)."""
    try:
        actor = Path(json.loads((run_dir / INIT_RECORD).read_text())["checkpoint"]) / "actor"
    except FileNotFoundError:
        raise VerlConfigError(f"{target} and {run_dir / INIT_RECORD} were deleted: the KL term's reference (the "
                              "weights the run started from) is unknown; `arctl run --force` starts the run again") from None
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise VerlConfigError(f"{run_dir / INIT_RECORD} cannot be read ({err}); its KL reference (the weights the "
                              "run started from) is unknown: `arctl run --force` starts the run again") from None
    step = int(actor.parent.name.rsplit("_", 1)[-1]) if actor.parent.name.startswith("global_step_") else -1
    if not actor.is_dir() or checkpoints.problem(actor.parent.parent, step) is not None:
        raise VerlConfigError(f"{target} was deleted and the checkpoint it was merged from ({actor.parent}) is gone "
                              "or incomplete: the KL term's reference (the weights the run started from) cannot be "
                              "rebuilt; `arctl run --force` starts the run again")
    merge_actor(actor, target)
    print(f"arctl: {target} merged again from {actor.parent} (the KL term's reference)", flush=True)
    return str(target)


def merge_actor(actor_dir: Path, target: Path) -> None:
    """verl's FSDP model merger: ``actor_dir`` (a ``global_step_N/actor`` folder) -> a Hugging Face
    model directory ``target`` (weights, config, tokenizer), complete or absent."""
    from verl.model_merger.base_model_merger import ModelMergerConfig
    from verl.model_merger.fsdp_model_merger import FSDPModelMerger

    partial = target.with_name(target.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    merger = FSDPModelMerger(ModelMergerConfig(
        operation="merge", backend="fsdp", local_dir=str(actor_dir), target_dir=str(partial),
        hf_model_config_path=str(actor_dir / "huggingface"), use_cpu_initialization=True))
    merger.merge_and_save()
    shutil.rmtree(target, ignore_errors=True)
    partial.rename(target)
