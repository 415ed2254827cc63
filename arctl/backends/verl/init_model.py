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
That checkpoint is looked up by its folder's name in the other run's folder as this run finds it now
(``init_dir``: a workspace moved or copied since), the path ``init.json`` wrote only where that folder
does not exist, and is used only where it is the one merged (its identity, kept in ``init.json``).
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

from arctl.backends.base import INIT_MODEL_DIR, INIT_RECORD
from arctl.backends.verl import checkpoints
from arctl.backends.verl.overrides import VerlConfigError
from arctl.config.files import atomic_write


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
            return _merged_again(run_dir, init_dir, target)  # the weights it started from
        return None  # resumes from its own checkpoint, which holds its weights
    step, _ = checkpoints.newest_complete(init_dir / "checkpoints")
    if step == 0:
        raise VerlConfigError(f"run {init_dir.name} has no complete checkpoint to start from "
                              f"({init_dir / 'checkpoints'}): `arctl run` it first")
    actor = checkpoints.folder(init_dir / "checkpoints", step) / "actor"
    identity = checkpoint_identity(actor.parent)
    merge_actor(actor, target)
    atomic_write(run_dir / INIT_RECORD, json.dumps({"run_id": init_dir.name, "step": step,
                                                    "checkpoint": str(actor.parent), "identity": identity}, indent=1))
    print(f"arctl: starts from run {init_dir.name}, step {step} ({actor.parent}), merged into {target}", flush=True)
    return str(target)


def _merged_again(run_dir: Path, init_dir: Path, target: Path) -> str:
    """``init_model/`` of a run with a KL term, deleted after the run had checkpoints of its own: merged
    again from the checkpoint ``init.json`` names (from a review: verl builds the KL reference from
    ``model.path``, so the reference had silently become the base model for the rest of the run).
    That checkpoint is found by name in ``init_dir``, the other run's folder in this run's workspace now,
    as the tiny backend finds its own (from a review: after the workspace was moved, the absolute path
    ``init.json`` wrote was gone and the run was told to start over; after a copy it would have named the
    old workspace's folder, rerun there since); the recorded path only where ``init_dir`` has no such folder."""
    try:
        record = json.loads((run_dir / INIT_RECORD).read_text())
        recorded = Path(record["checkpoint"])
        identity = record.get("identity")  # (an init.json written before it was kept: none)
    except FileNotFoundError:
        raise VerlConfigError(f"{target} and {run_dir / INIT_RECORD} were deleted: the KL term's reference (the "
                              "weights the run started from) is unknown; `arctl run --force` starts the run again") from None
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as err:
        raise VerlConfigError(f"{run_dir / INIT_RECORD} cannot be read ({err}); its KL reference (the weights the "
                              "run started from) is unknown: `arctl run --force` starts the run again") from None
    here = init_dir / "checkpoints" / recorded.name
    step_dir = recorded if not here.exists() and recorded.exists() else here  # (a parent outside it: its own path)
    why = _why_not_merged_from(step_dir, identity)
    if why is not None:
        raise VerlConfigError(f"{target} was deleted and the checkpoint it was merged from ({step_dir}) {why}: the KL "
                              "term's reference (the weights the run started from) cannot be rebuilt; restore that "
                              f"checkpoint of run {record.get('run_id', init_dir.name)} to {here}, or "
                              "`arctl run --force` starts the run again")
    merge_actor(step_dir / "actor", target)
    print(f"arctl: {target} merged again from {step_dir} (the KL term's reference)", flush=True)
    return str(target)


def _why_not_merged_from(step_dir: Path, identity: dict | None) -> str | None:
    """Why ``step_dir`` cannot be merged again as the checkpoint recorded with ``identity``, or None."""
    step = int(step_dir.name.rsplit("_", 1)[-1]) if step_dir.name.startswith("global_step_") else -1
    if not (step_dir / "actor").is_dir() or checkpoints.problem(step_dir.parent, step) is not None:
        return "is gone or incomplete"
    try:
        same = identity is None or checkpoint_identity(step_dir) == identity
    except (OSError, ValueError, KeyError, TypeError) as err:
        return f"cannot be read ({err})"
    if not same:
        return "is not the one merged (its files differ from those init.json recorded: that run rerun since?)"
    return None


SAMPLE_BYTES = 1 << 20


def checkpoint_identity(step_dir: Path) -> dict:
    """What tells a complete checkpoint (``global_step_N/``) from another: every file's size (its
    completion marker's list) and the sha256 of 1 MiB from the middle of each file, where a rerun's
    weights differ even with every size the same (reading 3-15 GB of shards whole would cost a minute)."""
    files = json.loads((step_dir / checkpoints.MARKER).read_text())["files"]
    digest = hashlib.sha256()
    for name, size in sorted(files.items()):
        with open(step_dir / name, "rb") as f:
            f.seek(max(0, (int(size) - SAMPLE_BYTES) // 2))
            digest.update(name.encode() + b"\0" + f.read(SAMPLE_BYTES))
    return {"files": files, "sample_sha256": digest.hexdigest()}


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
