"""The verl run of one arctl config: its override list and checked verl config (eval-only mode
included), the data files that config reads, and the W&B settings verl's tracker gets through Ray's
runtime env. Used by the trainer (:mod:`arctl.backends.verl.trainer`) and by the smoke checks
(:mod:`arctl.backends.verl.smoke`), which go through the same steps as the real run.
"""

from __future__ import annotations

import functools
import os
import re
import shlex
from pathlib import Path
from typing import Any

from arctl.backends.verl.history import VERL_LOG, resume_point
from arctl.backends.verl.names import BLOCK_SIZE_ENV
from arctl.backends.verl.overrides import (
    RESUME_PATH_KEY,
    VAL_ONLY_KEY,
    build_verl_config,
    dataset_file,
    fmt_value,
    user_path,
    verl_overrides,
    verl_setting,
    wandb_identity,
)
from arctl.backends.verl.settings import EVAL_MODEL


def eval_only_overrides(config: dict, run_dir: Path | None) -> list[str]:
    """Extra overrides of the eval-only mode: validation only, grid budgets, final eval datasets."""
    ev = config["eval"]
    datasets = list(ev.get("final_datasets") or ev["datasets"])
    files = [str(dataset_file(config, name, "test")) for name in datasets]
    out = [
        f"{VAL_ONLY_KEY}=true",
        "trainer.val_before_train=true",
        f"data.val_files={fmt_value(files)}",
        f"arctl.eval_datasets={fmt_value(datasets)}",
        "arctl.eval_only=true",
    ]
    ckpt = verl_setting(config, "eval_checkpoint")
    if ckpt == EVAL_MODEL:  # model.path itself: nothing to resume (never a checkpoint of the run dir)
        out.append("trainer.resume_mode=disable")
    elif ckpt:
        out += ["trainer.resume_mode=resume_path", f"{RESUME_PATH_KEY}={fmt_value(user_path(ckpt))}"]
    return out


def _mode(config: dict, run_dir: Path | None) -> list[str]:
    """arctl's own overrides of the run's mode: the eval-only mode's, else none."""
    return eval_only_overrides(config, run_dir) if bool(verl_setting(config, "eval_only")) else []


def run_overrides(config: dict, run_dir: Path | None) -> list[str]:
    """The override list the trainer runs (eval-only mode included), without composing verl's config:
    what the sbatch script shows."""
    return verl_overrides(config, run_dir, _mode(config, run_dir))


def verl_run_config(config: dict, run_dir: Path | None) -> tuple[list[str], Any]:
    """Overrides and the checked verl config of this arctl config (eval-only mode included)."""
    return build_verl_config(config, run_dir, _mode(config, run_dir))


DATA_KEYS = ("data.train_files", "data.val_files")


def key_files(cfg: Any, key: str) -> list[str]:
    """The files of one data key of a composed verl config (a path or a list)."""
    from omegaconf import OmegaConf

    value = OmegaConf.select(cfg, key)
    if value is None:
        return []
    files = [str(v) for v in value] if OmegaConf.is_list(value) or isinstance(value, (list, tuple)) else [str(value)]
    return [f for f in files if f]


def data_files(cfg: Any) -> list[str]:
    """The train and validation files of a composed verl config (each key a path or a list)."""
    return [f for key in DATA_KEYS for f in key_files(cfg, key)]


def inputs_problem(config: dict, cfg: Any) -> str | None:
    """Why the run's inputs are not there, or None: a dataset file of the composed verl config (missing, or not
    in verl's row format: :func:`data_format_problem`), or the checkpoint an eval-only run evaluates (missing;
    incomplete where arctl saved it or it lies in an arctl run's checkpoints, :func:`_in_arctl_run`; saved by a
    run of another cell or training, :func:`source_run_problem`). Asked by the job as it starts and by the launch
    (the same shared paths, seen from where it submits)."""
    missing = [f for f in data_files(cfg) if not Path(f).expanduser().exists()]
    if missing:
        from arctl.backends.verl.overrides import data_dir

        folder = data_dir(config)
        if bool(verl_setting(config, "eval_only")) and missing[0] in key_files(cfg, "data.val_files"):
            # from a hunt: the hint named data.val_files, which an eval-only run refuses
            return (f"dataset file {missing[0]} does not exist — an eval-only run evaluates {folder}/<name>/test.parquet "
                    f"of each dataset of eval.final_datasets (else eval.datasets): run `arctl data prepare --out "
                    f"{shlex.quote(str(folder))}`, or name the datasets prepared there with eval.final_datasets=[...] (verl.data_dir "
                    "sets the folder)")
        return (f"dataset file {missing[0]} does not exist — run `arctl data prepare --out {shlex.quote(str(folder))}` "
                "or set data.train_files / data.val_files")
    if problem := data_format_problem(config, cfg):
        return problem
    ckpt = verl_setting(config, "eval_checkpoint") if verl_setting(config, "eval_only") else None
    if ckpt and ckpt != EVAL_MODEL:
        from arctl.backends.verl import checkpoints

        path = Path(str(ckpt)).expanduser()
        if not path.is_dir():
            return f"verl.eval_checkpoint={ckpt} does not exist — give a run's checkpoints/global_step_N folder"
        why = checkpoints.problem(path.parent, int(path.name.rsplit("_", 1)[1]))
        # from a hunt: a folder of an arctl run without its marker (a save killed, or still being written) was taken
        # for one arctl did not save, and verl failed reading its truncated shards once the job held its GPUs
        if why and ((path / checkpoints.MARKER).exists() or _in_arctl_run(path)):
            newest, _ = checkpoints.newest_complete(path.parent)
            choose = (f"the newest complete one there is {checkpoints.folder(path.parent, newest)}" if newest
                      else f"{path.parent} holds no complete one")
            unmarked = "" if (path / checkpoints.MARKER).exists() else \
                f" ({checkpoints.MARKER}: a save killed, or still being written)"
            return (f"verl.eval_checkpoint={ckpt} cannot be loaded: {why}{unmarked} — give a complete global_step_N "
                    f"folder; {choose}")
        if problem := source_run_problem(config, path):
            return f"verl.eval_checkpoint={ckpt} {problem}"
        # from a hunt: evaluating on fewer GPUs than the checkpoint was trained on failed at load, on the GPUs
        if (saved := _other_world(path, cfg)) is not None:
            return (f"verl.eval_checkpoint={ckpt} holds the model in {saved} shards, one per GPU it was trained on, "
                    f"and verl loads the shards of the current {_world(cfg)} GPUs: evaluate it on {saved} GPUs "
                    "(cluster.nodes x cluster.gpus_per_node)")
    return None


RUN_CONFIG = "config.yaml"  # a run folder's frozen config (the launch writes it as it creates the folder)


def _source_run(step_dir: Path) -> Path | None:
    """The arctl run folder a ``RUN_DIR/checkpoints/global_step_N`` folder belongs to (where ``RUN_DIR`` holds the
    run's frozen config), else None."""
    run_dir = Path(os.path.abspath(step_dir)).parent.parent  # (a relative path's too, without following links)
    return run_dir if (run_dir / RUN_CONFIG).is_file() else None


def _in_arctl_run(step_dir: Path) -> bool:
    """Whether a ``global_step_N`` folder lies where arctl saves, so that its save, once complete, has
    :data:`~arctl.backends.verl.checkpoints.MARKER`: in an arctl run's folder, or beside a step that has one."""
    from arctl.backends.verl import checkpoints

    parent = Path(os.path.abspath(step_dir)).parent
    return _source_run(step_dir) is not None or any(
        (checkpoints.folder(parent, s) / checkpoints.MARKER).is_file() for s in checkpoints.saved_steps(parent))


# what an evaluation may set otherwise than the run that trained its checkpoint: where and how it runs and logs
# (cluster, wandb, the run's own id and folders, verl's settings other than the grader, which scored the training),
# what it evaluates (eval.*, budget forcing: an inference-time method), how often the training validated and saved,
# and where the base model lies (its name and shape still count); the scale's values count as the keys they set
NOT_TRAINED = ("eval.", "cluster.", "wandb.", "scale.", "tiny.", "run_id", "run_dir", "init_dir", "model.path",
               "trainer.test_freq", "trainer.save_freq", "budget_control.forcing_")
TRAINED_VERL = ("verl.grader",)


def _trained_keys(config: dict) -> dict:
    """The dotted keys of ``config`` that define the model its training saves (see :data:`NOT_TRAINED`), in the
    config's order with experiment, arm and seed first."""
    from arctl.track.runs.tidy import flatten_config

    flat = flatten_config(config)
    first = {k: flat[k] for k in ("experiment", "arm", "seed") if k in flat}
    return {**first, **{k: v for k, v in flat.items() if k not in first and (
        k in TRAINED_VERL or not (k.startswith("verl.") or k.startswith(NOT_TRAINED)))}}


def _shown(value: Any) -> str:
    """A config value as a command line writes it (Hydra's grammar), else its repr."""
    from arctl.backends.verl.overrides import VerlConfigError

    try:
        return fmt_value(value)
    except VerlConfigError:
        return repr(value)


def source_run_problem(config: dict, step_dir: Path) -> str | None:
    """Why a checkpoint of an arctl run (``RUN_DIR/checkpoints/global_step_N``) is not the model this eval-only
    run's config names, or None: the run that saved it (``RUN_DIR/config.yaml``) must be of the same experiment,
    arm and seed and trained with the same settings (:func:`_trained_keys`; a key one config lacks, written before
    it existed, is not compared), or the evaluation would be recorded and reported as another cell's. A checkpoint
    outside a run folder, or a config that cannot be read, is not compared."""
    from arctl.track.runs.discover import ConfigReadError, read_run_yaml

    run_dir = _source_run(step_dir)
    if run_dir is None:
        return None
    try:
        saved = _trained_keys(read_run_yaml(run_dir / RUN_CONFIG))
    except ConfigReadError:
        return None
    mine = _trained_keys(config)
    for key, value in mine.items():
        if key in saved and saved[key] != value:
            return (f"was trained by run {run_dir.name} with {key}={_shown(saved[key])}, and this run has "
                    f"{key}={_shown(value)}: its evaluation would be recorded as another cell's; evaluate it under "
                    f"its own cell (that run's experiment, arm, seed and settings; eval.*, cluster.* and wandb.* may "
                    "differ), or give a checkpoint of this cell's run")
    return None


def data_format_problem(config: dict, cfg: Any) -> str | None:
    """Why a train or validation file (there) is not what the run reads, or None, from its schema (parquet) or
    first row (json/jsonl), nothing else loaded: the prompt (``data.prompt_key``) as chat messages (without it verl
    drops every row: "num_samples=0"), ``reward_model.ground_truth`` (without it every reward is 0: a run that
    learns nothing, reported completed), and a validation file's ``data_source`` values among the datasets the run
    evaluates (``arctl.eval_datasets``: its metrics are ``eval/<data_source>/...``, and reports read those of
    eval.datasets). A file not readable here is left to the job's own loader; without pyarrow, nothing is read."""
    from omegaconf import OmegaConf

    try:
        import pyarrow.parquet  # noqa: F401
    except ImportError:
        return None
    from arctl.backends.verl.data import DATASETS, data_sources_of, verl_file_lacks
    from arctl.backends.verl.overrides import data_dir

    prompt_key = str(OmegaConf.select(cfg, "data.prompt_key", default=None) or "prompt")
    evaluated = [str(d) for d in OmegaConf.select(cfg, "arctl.eval_datasets", default=None) or []]
    names = "eval.final_datasets" if bool(verl_setting(config, "eval_only")) else "eval.datasets"
    for key in DATA_KEYS:
        val = key == "data.val_files"
        for file in key_files(cfg, key):
            lacks = verl_file_lacks(Path(file), prompt_key, data_source=val)
            if lacks:
                folder = Path(file).expanduser().parent.name
                train = (config.get("data") or {}).get("train_dataset")
                name = folder if folder in DATASETS else str(train) if not val and train in DATASETS else "NAME"
                return (f"dataset file {file} ({key}) is not a verl file as `arctl data prepare` writes it: it has no "
                        f"{' and no '.join(lacks)} — convert its problems and answers with `arctl data prepare "
                        f"--datasets {name} --source {shlex.quote(f'{name}={file}')} "
                        f"--out {shlex.quote(str(data_dir(config)))}`")
            sources = data_sources_of(Path(file)) if val and evaluated else None
            stray = sorted(sources - set(evaluated)) if sources else []
            if stray:
                return (f"dataset file {file} (data.val_files) holds rows of data_source {', '.join(stray)}, which "
                        f"the run does not evaluate ({names}: {', '.join(evaluated)}): their metrics would be written "
                        f"under eval/{stray[0]}/, in no report or figure; write the dataset's name as the rows' "
                        f"data_source (`arctl data prepare` does), or name it in {names}")
    return None


def _world(cfg: Any) -> int:
    """The GPUs of verl's world: ``trainer.n_gpus_per_node x trainer.nnodes``."""
    from omegaconf import OmegaConf

    return int(OmegaConf.select(cfg, "trainer.n_gpus_per_node") or 1) * int(OmegaConf.select(cfg, "trainer.nnodes") or 1)


def _other_world(step_dir: Path, cfg: Any) -> int | None:
    """The number of GPUs a checkpoint (``global_step_N``) was saved from where it is not the current world's,
    else None: verl saves one model shard per rank (``actor/model_world_size_W_rank_R.pt``) and loads the shards of
    the current world size only."""
    worlds = {int(m.group(1)) for f in (Path(step_dir) / "actor").glob("model_world_size_*_rank_*.pt")
              if (m := re.match(r"model_world_size_(\d+)_rank_\d+\.pt$", f.name))}
    return min(worlds) if worlds and _world(cfg) not in worlds else None


def parallel_problem(config: dict, cfg: Any) -> str | None:
    """Why verl's workers would refuse the run's parallel layout once they hold their GPUs, or None
    (verl's ``validate_config`` does not check these): the rollout's tensor x data x pipeline parallel
    size must divide the world (``trainer.n_gpus_per_node x trainer.nnodes``;
    ``verl/workers/engine_workers.py``, at worker start), and the actor's mini-batch in rows
    (``ppo_mini_batch_size x rollout.n x`` rows per tree) must divide by its data-parallel size (the
    world over the Ulysses sequence-parallel size; asserted at the first update, after a rollout)."""
    from omegaconf import OmegaConf

    from arctl.backends.verl.overrides import rows_per_tree

    def get(key: str, default: int = 1) -> int:
        value = OmegaConf.select(cfg, key, default=None)
        return int(value) if value is not None else default

    world = get("trainer.n_gpus_per_node") * get("trainer.nnodes")
    r = "actor_rollout_ref.rollout"
    infer = (get(f"{r}.tensor_model_parallel_size") * get(f"{r}.data_parallel_size")
             * get(f"{r}.pipeline_model_parallel_size"))
    if world % infer:
        return (f"the rollout's parallel size {infer} (tensor {get(f'{r}.tensor_model_parallel_size')} x data "
                f"{get(f'{r}.data_parallel_size')} x pipeline {get(f'{r}.pipeline_model_parallel_size')}) does not "
                f"divide the {world} GPUs (verl.n_gpus_per_node x cluster.nodes): verl's workers refuse it as they "
                "start; choose verl.tensor_model_parallel_size dividing the GPUs")
    if bool(verl_setting(config, "eval_only")):
        return None  # no update: the mini-batch rule is asserted only there
    # verl's engine reads the FSDP config's Ulysses size (the actor's own key is the deprecated alias it copies)
    sp = max(get("actor_rollout_ref.actor.fsdp_config.ulysses_sequence_parallel_size"),
             get("actor_rollout_ref.actor.ulysses_sequence_parallel_size"))
    dp = world // max(1, sp)
    per_tree = rows_per_tree(config)
    rows = get("actor_rollout_ref.actor.ppo_mini_batch_size") * get(f"{r}.n") * per_tree
    if dp and rows % dp:
        return (f"the actor's mini-batch of {rows} rows (data.ppo_mini_batch_size x rollout.n"
                f"{' x rows per tree' if per_tree > 1 else ''}) does not divide by its {dp} data-parallel "
                "ranks: verl refuses it at the first update, after a rollout; choose data.ppo_mini_batch_size so "
                "that it does")
    for role in ("actor", "ref"):  # the engine's own key; arctl pads rows (no remove-padding), which Ulysses needs
        size = get(f"actor_rollout_ref.{role}.fsdp_config.ulysses_sequence_parallel_size")
        if size > 1:
            return (f"actor_rollout_ref.{role}.fsdp_config.ulysses_sequence_parallel_size={size}: Ulysses sequence "
                    "parallelism needs verl's remove-padding path, which arctl turns off (flash-attn's varlen kernels "
                    "are not in verl[vllm]==0.9.1); verl's FSDP engine refuses it as its workers start. Leave it at 1")
    a = "actor_rollout_ref"
    flags = (f"{a}.actor.use_dynamic_bsz", f"{r}.log_prob_use_dynamic_bsz")
    if len({bool(OmegaConf.select(cfg, key, default=False)) for key in flags}) > 1:
        return (f"{flags[0]}={OmegaConf.select(cfg, flags[0])} and {flags[1]}={OmegaConf.select(cfg, flags[1])} differ "
                "(one was set in verl.overrides): verl's workers assert they are equal as they start; set "
                "verl.use_dynamic_bsz, which both follow, and leave them out of verl.overrides")
    longest = get("data.max_prompt_length", 0) + get("data.max_response_length", 0)
    batch = get("data.train_batch_size") * get(f"{r}.n") * per_tree
    # each pass: its dynamic-batch flag, token budget and micro-batch (verl reads the pass's own keys: one set alone
    # in verl.overrides counts), and the rows a rank gets in it: the log-prob passes the batch, the update a mini-batch
    passes = [(f"{p}.log_prob_use_dynamic_bsz", f"{p}.log_prob_max_token_len_per_gpu", f"{p}.log_prob_micro_batch_size_per_gpu",
               batch, "batch (data.train_batch_size", "first log-prob pass") for p in (r, f"{a}.ref")]  # rollout's, ref's
    passes.append((f"{a}.actor.use_dynamic_bsz", f"{a}.actor.ppo_max_token_len_per_gpu",
                   f"{a}.actor.ppo_micro_batch_size_per_gpu", rows, "mini-batch (data.ppo_mini_batch_size", "first update"))
    for flag, budget_key, micro_key, pass_rows, what, when in passes:
        if bool(OmegaConf.select(cfg, flag, default=False)):
            budget = OmegaConf.select(cfg, budget_key, default=None)
            if budget is not None and int(budget) * max(1, sp) < longest:
                return (f"{budget_key}={budget} tokens (verl.max_token_len_per_gpu) is below the longest row, {longest} "
                        "tokens (data.max_prompt_length + the response a tree can fill): verl refuses such a row at "
                        f"the {when}, after a rollout; give verl.max_token_len_per_gpu>={longest} (and this key, where "
                        "verl.overrides sets it)")
            continue
        micro = OmegaConf.select(cfg, micro_key, default=None)
        per_rank = pass_rows // dp if dp else pass_rows
        if micro is not None and per_rank % int(micro):
            return (f"{micro_key}={micro} (verl.micro_batch_size_per_gpu) does not divide the {per_rank} rows each of "
                    f"the {dp} data-parallel ranks gets per {what} x rollout.n"
                    f"{' x rows per tree' if per_tree > 1 else ''} / ranks): verl refuses it at the {when}, after a "
                    f"rollout; choose a divisor of {per_rank}")
    return None


def model_source(path: str) -> str:
    """What Hugging Face's ``from_pretrained`` reads ``model.path`` as: its local folder (``~`` expanded), else the hub id."""
    local = Path(path).expanduser()
    return str(local) if local.is_dir() else path


def model_problem(config: dict, cfg: Any) -> str | None:
    """Why the model cannot serve the run's layout, or None, where its config can be read here (a local
    folder, or Hugging Face's cache: nothing is downloaded): vLLM splits the attention heads over the
    rollout's tensor-parallel ranks (it refuses heads it cannot split as its server starts), and the
    longest row (prompt + the response a tree can fill) must fit the model's context, else generation is
    cut below the thinking budget and a summary request finds no room. Then the tokenizer
    (:func:`tokenizer_problem`)."""
    from omegaconf import OmegaConf

    path = OmegaConf.select(cfg, "actor_rollout_ref.model.path", default=None)
    if not path:
        return None
    return _model_config_problem(cfg, str(path)) or tokenizer_problem(cfg)


TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json")  # a folder with neither holds no tokenizer


def tokenizer_problem(cfg: Any) -> str | None:
    """Why the rollout cannot build its inserted tokens from the model's tokenizer, or None: the agent loop builds
    :meth:`arctl.algo.prompts.InsertedTokens.from_tokenizer` of ``summary.inserted`` as it starts, which refuses a
    tokenizer without ``</think>``; reached only in the first rollout, after Ray and vLLM started (from a hunt: an
    external model whose tokenizer lacks it passed every launch check). Read where the tokenizer (verl's
    ``actor_rollout_ref.model.tokenizer_path``, else ``model.path``) is a local folder, nothing downloaded and no
    remote code run; a hub id, or a folder without a tokenizer (:data:`TOKENIZER_FILES`) or whose tokenizer cannot be
    loaded here, is left to the job."""
    from omegaconf import OmegaConf

    path = OmegaConf.select(cfg, "actor_rollout_ref.model.tokenizer_path", default=None) or \
        OmegaConf.select(cfg, "actor_rollout_ref.model.path", default=None)
    folder = Path(str(path)).expanduser() if path else None
    if folder is None or not any((folder / name).is_file() for name in TOKENIZER_FILES):
        return None  # (transformers builds an empty tokenizer from a folder without its files)
    from arctl.backends.verl.advantage import objective_of

    style = objective_of(OmegaConf.select(cfg, "arctl")).summary.inserted
    why = _inserted_tokens_problem(str(folder), style, _folder_stamp(folder))
    return (f"the tokenizer of {path} cannot give the rollout its inserted tokens (summary.inserted={style}): {why}; "
            "the rollout would fail on it at its first step, after Ray and vLLM started: give model.path a thinking "
            "model whose tokenizer has it") if why else None


def _folder_stamp(folder: Path) -> tuple:
    """The names, sizes and times of a folder's files: a cached answer about it holds while they do."""
    return tuple(sorted((p.name, st.st_size, st.st_mtime_ns) for p in folder.iterdir() if p.is_file()
                        for st in [p.stat()]))


@functools.lru_cache(maxsize=16)
def _inserted_tokens_problem(folder: str, style: str, stamp: tuple) -> str | None:
    """:meth:`InsertedTokens.from_tokenizer`'s refusal of the tokenizer in ``folder``, or None (also where it
    cannot be loaded here). Cached by the folder's files (``stamp``): a sweep's runs share one model."""
    from arctl.algo.prompts import InsertedTokens

    try:
        from transformers import AutoTokenizer

        tok = AutoTokenizer.from_pretrained(folder, local_files_only=True)
    except Exception:  # noqa: BLE001 - not loadable here (remote code, no tokenizer files): the job's own start says
        return None
    try:
        InsertedTokens.from_tokenizer(tok, style)
    except ValueError as err:
        return " ".join(str(err).split())
    return None


def _model_config_problem(cfg: Any, path: str) -> str | None:
    """:func:`model_problem`'s checks of the model's config (heads, context)."""
    from omegaconf import OmegaConf

    try:
        from transformers import AutoConfig

        model = AutoConfig.from_pretrained(model_source(str(path)), local_files_only=True)
    except Exception:  # noqa: BLE001 - not readable here (not downloaded, remote code): the job's own start says
        return None
    tp = int(OmegaConf.select(cfg, "actor_rollout_ref.rollout.tensor_model_parallel_size", default=1) or 1)
    heads = getattr(model, "num_attention_heads", None)
    if heads and tp > 1 and int(heads) % tp:
        return (f"verl.tensor_model_parallel_size={tp} does not divide the model's {heads} attention heads ({path}): "
                "vLLM refuses it as its rollout server starts; choose a divisor of the heads")
    context = getattr(model, "max_position_embeddings", None)
    longest = int(OmegaConf.select(cfg, "data.max_prompt_length", default=0) or 0) + \
        int(OmegaConf.select(cfg, "data.max_response_length", default=0) or 0)
    if context and longest > int(context):
        return (f"the longest row, {longest} tokens (data.max_prompt_length + the response a tree can fill), exceeds "
                f"the model's context of {context} (max_position_embeddings of {path}): the rollout would cut the "
                "thinking below its budget and find no room for a summary; use smaller thinking.budgets, fewer "
                "summaries, or a model with a longer context")
    return None


def checkpoint_world_problem(config: dict, cfg: Any, run_dir: Path | None) -> str | None:
    """Why a resume cannot load the run's newest complete checkpoint, or None: verl saves one model shard per
    rank (``model_world_size_W_rank_R.pt``) and loads the shards of the current world size, so a run resumed
    on another number of GPUs (``cluster.*`` is launch-only: the same run id) fails at load."""
    from arctl.backends.verl import checkpoints

    if run_dir is None or bool(verl_setting(config, "eval_only")):
        return None  # an eval-only run's checkpoint: inputs_problem
    ckpt = Path(run_dir) / "checkpoints"
    step, _ = checkpoints.newest_complete(ckpt) if ckpt.is_dir() else (0, [])
    if not step:
        return None
    if (saved := _other_world(checkpoints.folder(ckpt, step), cfg)) is not None:
        return (f"the run's newest checkpoint (step {step}) holds the model in {saved} shards, one per GPU it was "
                f"trained on, and verl loads the shards of the current {_world(cfg)} GPUs: resume it on {saved} GPUs "
                "(cluster.nodes x cluster.gpus_per_node)")
    return None


def steps_problem(config: dict, cfg: Any) -> str | None:
    """Why the training files cannot feed the run's steps, or None: verl's epoch is ``rows //
    data.train_batch_size`` steps (the last partial batch dropped), and its loop ends when
    ``trainer.total_epochs`` epochs are done, whatever ``trainer.total_steps`` says: with fewer rows than one
    batch it divides by zero after the first validation; with too few epochs the run ends early, without its
    last checkpoint and final evaluation, and is reported completed. Rows are read from the parquet files'
    footers (an upper bound: verl may filter over-long prompts)."""
    from omegaconf import OmegaConf

    if bool(verl_setting(config, "eval_only")):
        return None
    try:
        import pyarrow.parquet as pq
    except ImportError:
        return None
    value = OmegaConf.select(cfg, "data.train_files")
    files = [str(v) for v in value] if OmegaConf.is_list(value) else [str(value)]
    try:
        rows = sum(pq.read_metadata(str(Path(f).expanduser())).num_rows for f in files if f)
    except Exception:  # noqa: BLE001 - not a parquet file this can read: the job's own loader says why
        return None
    batch = int(OmegaConf.select(cfg, "data.train_batch_size"))
    if rows < batch:
        return (f"data.train_files hold {rows} rows, fewer than one batch (data.train_batch_size={batch}): verl's "
                "epoch would have no step; give a larger training set or a smaller data.train_batch_size")
    epochs = int(OmegaConf.select(cfg, "trainer.total_epochs"))
    steps = OmegaConf.select(cfg, "trainer.total_training_steps", default=None)
    if steps is not None and int(steps) > (rows // batch) * epochs:
        need = -(-int(steps) // (rows // batch))
        return (f"trainer.total_steps={steps} needs {need} epochs of the {rows // batch} steps data.train_files hold "
                f"({rows} rows // data.train_batch_size={batch}), but trainer.total_epochs={epochs}: verl would end "
                f"the run after {(rows // batch) * epochs} steps, without its last checkpoint and final evaluation; "
                f"give trainer.total_epochs={need}")
    return None


def ray_cpus_needed(cfg: Any) -> tuple[int, str]:
    """(CPUs, what holds them) that verl reserves on each node's Ray before its first step, from its composed
    config: ``ResourcePoolManager.max_colocate_count`` CPUs with every GPU (one ``{CPU: 3, GPU: 1}`` bundle per
    GPU in a placement group per node, ``verl/single_controller/ray/base.py``), and once per job one CPU for each
    TransferQueue storage unit (spread over the nodes) and one for its controller (``transfer_queue``'s actors
    ask ``num_cpus=1``). verl waits for them with no time limit. Ray's other actors (the task runner, agent
    and reward loops) hold no CPU once placed."""
    import dataclasses

    from omegaconf import OmegaConf
    from verl.single_controller.ray.base import ResourcePoolManager

    colocate = next(f.default for f in dataclasses.fields(ResourcePoolManager) if f.name == "max_colocate_count")
    gpus = int(OmegaConf.select(cfg, "trainer.n_gpus_per_node") or 0)
    nodes = max(1, int(OmegaConf.select(cfg, "trainer.nnodes") or 1))
    storage = 0
    if OmegaConf.select(cfg, "transfer_queue.backend.storage_backend", default="SimpleStorage") == "SimpleStorage":
        storage = int(OmegaConf.select(cfg, "transfer_queue.backend.SimpleStorage.num_data_storage_units", default=0) or 0)
    per_node = -(-storage // nodes)  # the storage units' share of a node, rounded up
    need = colocate * gpus + per_node + 1
    what = (f"{colocate} with each of its {gpus} GPUs, {per_node} for TransferQueue's {storage} storage "
            f"units{' over the nodes' if nodes > 1 else ''} and 1 for their controller")
    return need, what


def ray_cpus_problem(config: dict) -> str | None:
    """Why the Ray of this run's SLURM job cannot hold what verl reserves before its first step, or None. The job
    body starts each node's Ray with ``--num-cpus=$SLURM_CPUS_PER_TASK`` (``cluster.cpus_per_task``, unless
    ``verl.ray_start_args`` gives ``--num-cpus``), and verl waits for its placement groups with no time limit: short
    of CPUs, the job would hold its GPUs doing nothing until its time limit, then requeue (from a hunt:
    ``cluster.gpus_per_node=8`` with the default 2 CPUs passed every check). Runs without a GPU, and without verl
    installed here, are not checked."""
    from arctl.backends.verl.overrides import VerlConfigError, runs_without_gpu

    cluster = config.get("cluster") or {}
    if runs_without_gpu(config) or int(cluster.get("gpus_per_node") or 0) <= 0:
        return None
    try:
        import verl  # noqa: F401
    except ImportError:
        return None
    try:
        _, cfg = verl_run_config(config, None)
    except VerlConfigError:
        return None  # the launch's own check says it (launch_problem)
    cpus, key = int(cluster.get("cpus_per_task") or 1), "cluster.cpus_per_task"
    args = verl_setting(config, "ray_start_args") or []
    words = " ".join(str(a) for a in ([args] if isinstance(args, str) else args)).split()
    for i, word in enumerate(words):  # the last --num-cpus is the one `ray start` takes
        value = word.partition("=")[2] if word.startswith("--num-cpus=") else (
            words[i + 1] if word == "--num-cpus" and i + 1 < len(words) else None)
        if value is not None and value.isdigit():
            cpus, key = int(value), "verl.ray_start_args' --num-cpus"
    need, what = ray_cpus_needed(cfg)
    if cpus >= need:
        return None
    return (f"{key}={cpus} gives each node's Ray {cpus} CPUs, and verl reserves {need} there before its first step "
            f"({what}) and waits for them without a time limit: the job would hold its GPUs doing nothing until its "
            f"time limit; give {'cluster.cpus_per_task' if key.startswith('cluster') else '--num-cpus'}>={need}")


LAUNCH_CHECK_ENV = "ARCTL_VERL_LAUNCH_CHECK"  # "0": launch_problem does not check what is seen from here


def launch_problem(config: dict, run_dir: Path | None) -> str | None:
    """Why this run's job would fail as it starts, or None, asked before it is submitted (and by a dry
    run): the override list the job's setup writes (run_overrides: the ``verl.overrides`` entries arctl
    refuses), verl's own check of the composed config (verl_run_config), the parallel layout verl's workers
    check only on their GPUs, the inputs (datasets, an eval-only run's checkpoint) and a resume that cannot
    work (:func:`resume_problem`). A smoke run checks only the list (plumbing only), a rehearsal reads no inputs;
    without verl installed here only the list and the resume can be checked (the job's own environment decides). ``ARCTL_VERL_LAUNCH_CHECK=0`` skips the
    checks of what is seen from here (the data files, the steps they hold, the checkpoints a resume or an
    eval-only run loads: e.g. data on storage only the compute nodes mount, or a profile's ``setup`` that
    sets its path), never those of the config itself (from a hunt: it let a refused ``verl.overrides`` entry
    through, to fail in the job's setup after the runs were registered). ``run_dir``: the folder of a run the
    launch resumes, whose checkpoints and records the resume reads; None for a run that starts over (a new run, a
    rerun: its previous files are moved aside), of which no folder is read."""
    from arctl.backends.verl.overrides import VerlConfigError

    try:
        run_overrides(config, run_dir)  # what the job's setup (ray_job.job_setup) builds, verl or not
    except VerlConfigError as err:
        return " ".join(str(err).split())
    if bool(verl_setting(config, "smoke")):
        return None
    try:
        import verl  # noqa: F401
    except ImportError:
        return resume_problem(config, run_dir)  # the run's own records: read without verl
    try:
        _, cfg = verl_run_config(config, run_dir)
    except VerlConfigError as err:
        return " ".join(str(err).split())
    if int(verl_setting(config, "rehearsal_steps") or 0) <= 0:
        if problem := parallel_problem(config, cfg) or model_problem(config, cfg):
            return problem
        if os.environ.get(LAUNCH_CHECK_ENV) != "0" and (
                problem := (inputs_problem(config, cfg) or steps_problem(config, cfg)
                            or checkpoint_world_problem(config, cfg, run_dir))):
            return (f"{problem} (seen from here; where only the compute nodes see it, {LAUNCH_CHECK_ENV}=0 skips "
                    "this check)")
    return resume_problem(config, run_dir)


def resume_problem(config: dict, run_dir: Path | None) -> str | None:
    """Why the run's next attempt cannot resume, or None: :func:`arctl.backends.verl.history.resume_point`'s one
    line (the one choice of the checkpoint an attempt resumes from, which raises it there as the attempt starts)
    where the run's records lost a step's row and no complete checkpoint before it is kept. From a review: the job
    queued for its GPUs to fail in that line, and its dry run said "resumes from its last checkpoint". The run's
    own folder, which the launch writes: read whatever ``ARCTL_VERL_LAUNCH_CHECK`` says, and without verl."""
    if run_dir is None or not (Path(run_dir) / "checkpoints").is_dir():
        return None
    try:
        resume_point(config, run_dir)
    except ValueError as err:
        return " ".join(str(err).split())
    return None


def wandb_env(config: dict, run_dir: Path) -> dict[str, str]:
    """W&B settings for verl's tracker (its ``wandb.init`` reads them); never the API key. verl
    names the run itself (``trainer.experiment_name``), so no ``WANDB_NAME``."""
    return wandb_identity(config, run_dir).env(name=False, extra={"VERL_FILE_LOGGER_PATH": str(run_dir / VERL_LOG)})


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
    env_vars[BLOCK_SIZE_ENV] = str(int(verl_setting(config, "block_size")))  # the tree mask's block, in every worker
    OmegaConf.update(cfg, "ray_kwargs.ray_init.runtime_env.env_vars", env_vars, force_add=True)
    return cfg
