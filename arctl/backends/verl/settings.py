"""The verl backend's config section ``verl``: its keys' types, defaults, ranges and choices.

The backend brings this section itself (:meth:`arctl.backends.verl.VerlBackend.settings_type`);
:mod:`arctl.compose.plugins` adds it to the run config's schema. This module imports no verl, torch
or Ray: composing a config reads it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from arctl.algo.settings import DEFAULT_BLOCK_SIZE
from arctl.algo.verify import DEFAULT_GRADER, GRADERS
from arctl.config.ranges import F, I
from arctl.config.schema import field_default, setting

TREE_LAYOUTS = ("flex", "dense", "duplicate")
"""``verl.tree_attention``: packed trees under a FlexAttention BlockMask, the same mask dense (SDPA,
for debugging), or one row per branch (any engine)."""
VERL_DEVICES = ("cuda", "cpu")
CPU_ROLLOUT = "arctl_cpu"  # arctl.backends.verl.cpu_rollout.ROLLOUT: verl.device=cpu's rollout server
ROLLOUT_NAMES = ("vllm", "sglang", "trtllm", CPU_ROLLOUT)  # verl's rollout registry, and arctl's CPU server
RESUME_MODES = ("auto",)
"""``verl.resume_mode``: verl's ``auto`` only. ``disable`` restarted verl at step 0 while arctl's attempt (the
W&B rewind, the metrics history, the checkpoint pruning) worked from the newest checkpoint, and every requeue
started again (from a review); a run from scratch is ``arctl run ... --force``. ``resume_path`` needs a path
arctl does not pass (the eval-only mode sets it, and ``disable``, itself)."""
EVAL_MODEL = "model"
"""``verl.eval_checkpoint=model``: the eval-only run evaluates ``model.path`` itself (no RL checkpoint)."""
"""``verl.device``: cpu is verl's real loop on a CPU (:mod:`arctl.backends.verl.cpu_platform`)."""


@dataclass
class VerlConfig:
    """``verl``: the verl backend's knobs (arctl.backends.verl reads them; the tiny backend ignores
    them). Typed: ``+verl.<key>=...`` adding a key is refused (nothing would read it); verl's own config
    keys go in ``overrides``."""

    tree_attention: str = setting("flex", choices=TREE_LAYOUTS)
    device: str = setting("cuda", choices=VERL_DEVICES)  # cpu: a CPU platform, gloo, the arctl_cpu rollout server
    rollout_name: str = setting("vllm", choices=ROLLOUT_NAMES)
    # how a summary's answer is compared with the gold one (arctl.algo.verify.GRADERS): the authors' grader
    # (DeepScaleR's, what produced the paper's numbers) or math-verify (it accepts more: docs/algorithm.md 11)
    grader: str = setting(DEFAULT_GRADER, choices=GRADERS)
    tensor_model_parallel_size: int = setting(1, range=I(1, 64))
    gpu_memory_utilization: float = setting(0.6, range=F(0, 1, lo_open=True))
    n_gpus_per_node: int = setting(8, range=I(1, 64))  # used when cluster.gpus_per_node is 0 (cluster=auto at paper scale)
    # Rows (packed trees) per micro-batch of the old-log-prob pass and the update. One by default: verl's
    # padded path (no flash-attn) pays for rows x the longest row, full-vocabulary logits included, and a
    # token budget (use_dynamic_bsz) counts real tokens, so it does not bound the padding; one row of
    # 10,176 tokens is ~24.5 GiB estimated at paper scale, which fits an 80 GB and a 40 GB card
    # (docs/gpu.md, "Actor memory at paper scale").
    micro_batch_size_per_gpu: int = setting(1, range=I(1, 10**5))
    max_token_len_per_gpu: int = setting(32768, range=I(1, 10**8))  # the token budget when use_dynamic_bsz
    use_dynamic_bsz: bool = False
    gradient_checkpointing: bool = True
    param_offload: bool = False
    optimizer_offload: bool = False
    # the tree mask's FlexAttention block (the patched engine builds its BlockMask with it) and room in the response
    # cap; from a review: it had reached neither the mask (always 128) nor any padding
    block_size: int = setting(DEFAULT_BLOCK_SIZE, range=I(1, 65536))
    data_dir: str | None = None  # null: $ARCTL_DATA_DIR or ~/data/arctl (`arctl data prepare` writes there)
    logger: Any = None  # null: console + file (run_dir/verl_metrics.jsonl, what a resume re-logs from) + wandb
    resume_mode: str = setting("auto", choices=RESUME_MODES)
    val_before_train: bool = True
    eval_only: bool = False  # anytime evaluation of a checkpoint on eval.grid (needs eval_checkpoint)
    # eval_only's checkpoint: a run's checkpoints/global_step_N folder, or EVAL_MODEL ("model": model.path
    # itself, untrained). No default: an eval-only run has its own run id and run dir, so no checkpoint of its own
    eval_checkpoint: str | None = None
    # global_step_N folders kept in run_dir/checkpoints: the newest complete ones (arctl removes the older
    # after each save, so a save holds one more on disk until it is complete; verl would keep all: ~21 GB
    # each at 1.5B, ~91 GB at 7B)
    keep_checkpoints: int = setting(2, range=I(1, 10**4))
    smoke: bool = False  # plumbing check, no GPU work: plugin, verl config, Ray on every node, data -> run_dir/smoke.json
    rehearsal_steps: int = setting(0, range=I(0, 10**6))  # > 0: CPU rehearsal of the training loop (steps, stop, requeue)
    rehearsal_step_s: float = setting(2.0, range=F(0, 86400))  # seconds of one rehearsal step
    ray_start_args: list[str] = setting([])  # extra flags for every `ray start` of the job body
    overrides: Any = setting([])  # raw extra verl overrides (KEY=VALUE), checked against verl's own config


VERL_DEFAULTS: dict[str, Any] = {f.name: field_default(f) for f in dataclasses.fields(VerlConfig)}
"""The ``verl:`` section's defaults, for configs written before a key existed (a resume of an old run)."""
