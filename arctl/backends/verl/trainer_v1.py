"""arctl's v1 trainer mode (``trainer.v1.trainer_mode=arctl``): verl's synchronous PPO trainer with
AnytimeReasoner's advantage step, tree layouts and arctl's metric schema.

Why v1 ``register_trainer`` and not a ``RayPPOTrainer`` subclass: v1 is verl 0.9.1's default
(``trainer.use_v1: true``; ``RayPPOTrainer`` is deprecated) and it *can* carry the tree: every
rollout row is stored in TransferQueue with the agent loop's ``extra_fields``, and the advantage
hook ``_compute_advantage(batch, metrics)`` receives the batch keys, so it can read the tree record
of every row, compute per-budget advantages with :mod:`arctl.algo` and write per-token
``advantages`` back. Nothing else of verl's loop (rollout, old log-probs, actor update, checkpoints,
weight sync) needs replacing.

Overrides of :class:`verl.trainer.ppo.v1.PPOTrainerSync`:

- ``_build_replay_buffer``: a rollout group that failed in the agent loop fails the step with the
  worker's error (:mod:`arctl.backends.verl.rollout_failures`; verl pads it away);
- ``_compute_advantage``: tree advantages (:mod:`arctl.backends.verl.advantage`), arctl metrics;
- ``_compute_old_log_prob``: for packed trees, first writes tree position ids and the 1-D tree-mask
  encoding (``tree_cut``, ``tree_branch_start``) built with :func:`arctl.algo.tree.pack_tree`, which
  the actor forward turns into a FlexAttention BlockMask (:mod:`arctl.backends.verl.tree_forward`);
- ``on_step_end``: a stop file (written when the job is asked to stop) -> checkpoint, then end;
- ``_save_checkpoint`` (:class:`arctl.backends.verl.checkpoints.SaveOnce`): a step is saved once (a
  stop at a ``save_freq`` step saved it twice into one folder) and marked complete after its save;
  before the save begins, the step's training metrics (the dict ``step`` filled, which verl logs as the
  step's row after validating) are written to the run's pending row
  (:data:`arctl.backends.verl.history.PENDING_ROW`), removed once verl has logged the step, and the run's
  rows (that file, metrics.jsonl, verl's file log) are flushed to disk (fsync): a complete checkpoint implies its
  steps' rows are on disk, however the job ends (a lost node included) before verl logs the step;
- ``_update_actor``: counts the optimizer steps verl skipped (a gradient norm not finite); a streak of steps that
  skipped every one fails the run in one line, and no checkpoint is saved inside a streak but the last step's
  (:class:`arctl.backends.base.SkipStreak`, the tiny backend's rule); not in fp16 (the actor's
  ``fsdp_config.mixed_precision.param_dtype``, where verl trains with a loss scaler, :func:`_loss_scaled`), whose
  overflow steps skip as the scaler calibrates and count nothing;
- ``_fetch_one_gen_batch`` / ``_validate``: under ``trainer.deterministic`` the questions' uids (which
  name and seed their requests) are drawn from the run's seed and the step, not uuid4;
- ``_val_metrics_update`` / ``_compute_metrics``: ``eval/{ds}/acc@{b}`` ... and ``train/...`` keys
  with ``trainer/global_step``.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import logging
import math
import time
import uuid
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import torch
import transfer_queue as tq
from omegaconf import OmegaConf, open_dict
from tensordict import TensorDict
from verl.trainer.ppo.v1.trainer_base import TRAINER_REGISTRY
from verl.trainer.ppo.v1.trainer_sync import PPOTrainerSync
from verl.utils import tensordict_utils as tu
from verl.workers.utils.padding import response_to_nested

from arctl.algo.methods import control as bc
from arctl.algo.metrics import eval_diagnostics
from arctl.algo.settings import BudgetControl, Objective
from arctl.algo.tree_loss import kl_mean
from arctl.backends.base import SkipStreak, diverged_advice
from arctl.backends.verl import stop_request
from arctl.backends.verl.advantage import (
    FORCED_PREFIX,
    RECORD_KEY,
    VALIDATE_KEY,
    TreeRecord,
    batch_metrics,
    control_of,
    objective_of,
    record_advantages,
    response_advantages,
    trained_mask,
    trained_token_mean,
)
from arctl.backends.verl.agent_loop import DIAG_PREFIX
from arctl.backends.verl.checkpoints import SaveOnce
from arctl.backends.verl.rollout_failures import FailFast
from arctl.track import metrics_schema as ms
from arctl.track.phase import write_warning

logger = logging.getLogger(__name__)

SYNC_MODE = "sync"


def _tree_key(key: str) -> str:
    """``{uid}_{session}_{index}`` -> ``{uid}_{session}`` (one thinking sample)."""
    return key.rsplit("_", 1)[0]


def _as_list(value: Any) -> list:
    if value is None:
        return []
    if hasattr(value, "tolist"):
        return list(value.tolist())
    return list(value)


def _as_nested(t: torch.Tensor) -> torch.Tensor:
    """TransferQueue returns equal-length fields as a plain [N, L] tensor, ragged ones as jagged."""
    if t.is_nested:
        return t
    return torch.nested.as_nested_tensor(list(t), layout=torch.jagged)


def compute_row_advantages(
    keys: list[str],
    uids: list[Any],
    extra_fields: list[Any],
    response_lens: list[int],
    objective: Objective,
    padding: list[bool] | None = None,
    control: BudgetControl | None = None,
    limit: int | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """Per-row, per-response-token advantages [N, max_response_len] (float64) of a rollout batch,
    and metrics (:func:`arctl.algo.tree_loss.tree_advantages` on the batch's trees).

    Rows of one thinking sample share the key prefix ``{uid}_{session}``; its tree record is the
    one of its ``tree`` (packed) or ``thinking`` row. Padding rows (verl's synthetic no-op samples)
    and rows without a record get 0.
    """
    records = row_records(extra_fields, padding)
    trees: dict[str, int] = {}
    tree_records: list[TreeRecord] = []
    tree_uids: list[Any] = []
    for i, (key, rec) in enumerate(zip(keys, records)):
        if rec is None or rec.row not in ("tree", "thinking"):
            continue
        trees[_tree_key(key)] = len(tree_records)
        tree_records.append(rec)
        tree_uids.append(uids[i])
    advs = record_advantages(tree_records, tree_uids, objective, control, limit)
    width = max(response_lens) if response_lens else 0
    out = torch.zeros(len(keys), width, dtype=torch.float64)
    for i, (key, rec) in enumerate(zip(keys, records)):
        if rec is None:
            continue
        t = trees.get(_tree_key(key))
        if t is None:
            raise ValueError(f"rollout row {key} has no tree/thinking row in the batch")
        out[i, : response_lens[i]] = response_advantages(rec, advs[t], response_lens[i])
    return out, batch_metrics(tree_records, tree_uids, advs, objective, control, limit)


def row_records(extra_fields: list[Any], padding: list[bool] | None = None) -> list[TreeRecord | None]:
    """The tree record of each rollout row (None for a padding row or a row without one)."""
    padding = padding or [False] * len(extra_fields)
    out: list[TreeRecord | None] = []
    for ef, pad in zip(extra_fields, padding):
        d = ef.get(RECORD_KEY) if isinstance(ef, dict) and not pad else None
        out.append(TreeRecord.from_dict(d) if d else None)
    return out


def summary_cache_metrics(extra_fields: list[Any], padding: list[bool] | None = None) -> dict[str, float]:
    """``perf/summary_cached_tokens`` (mean per summary request) and ``perf/summary_prefix_cache_hit``
    (cached / prompt tokens) of a batch, from the trees' agent-loop accounting (one row per tree
    counts: the packed row or the thinking row)."""
    padding = padding or [False] * len(extra_fields)
    requests = prompt = cached = 0
    for ef, pad in zip(extra_fields, padding):
        if pad or not isinstance(ef, dict) or (ef.get(RECORD_KEY) or {}).get("row") not in ("tree", "thinking"):
            continue
        if ef.get("arctl_summary_cached_tokens") is None:
            return {}  # the server does not report prefix-cache hits
        requests += int(ef.get("arctl_summary_requests") or 0)
        prompt += int(ef.get("arctl_summary_prompt_tokens") or 0)
        cached += int(ef["arctl_summary_cached_tokens"])
    if not requests:
        return {}
    return {ms.PERF_SUMMARY_CACHED_TOKENS: cached / requests, ms.PERF_SUMMARY_CACHE_HIT: cached / max(prompt, 1)}


def tree_tensors(prompt_ids: list[int], response_ids: list[int], rec: TreeRecord) -> dict[str, torch.Tensor]:
    """Position ids and the 1-D tree-mask encoding of one packed row (prompt + response), through
    :func:`arctl.algo.tree.pack_tree`; checks that the packing reproduces the row's tokens."""
    from arctl.algo.tree import SummaryBranch, pack_tree

    t = rec.think_len
    a = rec.group_size
    cuts = rec.cuts
    branches = []
    for k, (start, summary_start, end) in enumerate(rec.spans):
        branches.append(
            SummaryBranch(
                cut=cuts[k // a],
                inserted=response_ids[start:summary_start],
                summary=response_ids[summary_start:end],
            )
        )
    tree = pack_tree(prompt_ids, response_ids[:t], branches)
    expected = torch.tensor(list(prompt_ids) + list(response_ids), dtype=torch.long)
    if not torch.equal(tree.input_ids, expected):
        raise ValueError("tree record does not match the packed response (spans out of order?)")
    return {"position_ids": tree.position_ids, "tree_cut": tree.cut, "tree_branch_start": tree.branch_start}


class ArctlPPOTrainer(SaveOnce, PPOTrainerSync):
    """verl v1 synchronous trainer with AnytimeReasoner's tree advantages (mode ``arctl``)."""

    def __init__(self, config):
        super().__init__(config)
        self.arctl_objective = objective_of(config.arctl)
        self.arctl_control = control_of(config.arctl)
        self.arctl_layout = str(config.arctl.get("tree_attention", "flex"))
        self._arctl_metric_defined = False

    # verl's trainer compares its mode with the literal "sync" wherever the synchronous trainer must
    # differ from the asynchronous ones (replay buffer, dataloader fetch size, TransferQueue state in
    # checkpoints, in-flight prompts on resume, the mode's config section); arctl's mode, registered
    # as "arctl" to select this class, is the synchronous trainer in all of them.
    @property
    def trainer_mode(self) -> str:
        return SYNC_MODE

    @trainer_mode.setter
    def trainer_mode(self, value: str) -> None:  # verl assigns the config's mode name ("arctl")
        pass

    def _build_replay_buffer(self):
        # verl's synchronous buffer, which hands out failed rollout groups and pads their trajectories:
        # here a failed group fails the step with the agent loop's error (rollout_failures). verl offers
        # no seam for this (a custom sampler loses the synchronous buffer's arguments): the instance
        # becomes the subclass, which adds one check and no state.
        buffer = super()._build_replay_buffer()
        buffer.__class__ = _fail_fast_class(type(buffer))
        return buffer

    @contextlib.contextmanager
    def rows_scaled(self):
        """verl counts the actor's mini-batch as ``ppo_mini_batch_size x rollout.n`` rows; the
        duplicated layout trains ``arctl.rows_per_tree`` rows per tree, so inside the update (and the
        batch-multiple it pads to) the mini-batch is scaled by it. The config keeps it in prompts,
        which is what verl's validation checks against ``data.train_batch_size``."""
        rows = int(self.config.arctl.get("rows_per_tree", 1))
        actor = self.config.actor_rollout_ref.actor
        mini = actor.ppo_mini_batch_size
        if rows == 1:
            yield
            return
        with open_dict(actor):
            actor.ppo_mini_batch_size = mini * rows
        try:
            yield
        finally:
            with open_dict(actor):
                actor.ppo_mini_batch_size = mini

    def _get_required_batch_multiple(self, dp_size: int) -> int:
        with self.rows_scaled():
            return super()._get_required_batch_multiple(dp_size)

    def _update_actor(self, batch, metrics: dict):
        workers, norms = self.actor_rollout_wg, []
        update = getattr(workers, "update_actor", None)

        def recorded(*args, **kwargs):  # the gradient norm of each optimizer step, before verl averages them
            out = update(*args, **kwargs)
            norms.extend(_grad_norms(out))
            return out

        if update is not None:
            workers.update_actor = recorded
        try:
            with self.rows_scaled():
                out = super()._update_actor(batch, metrics)
        finally:
            if update is not None:
                workers.update_actor = update
        if norms:  # (none: an update that reported no gradient norm says nothing of the streak)
            self._arctl_skips(norms, metrics)
        return out

    # ------------------------------------------------------------------ a run that stopped learning
    _arctl_streak: SkipStreak | None = None  # the steps in a row that skipped every optimizer step

    def _arctl_skips(self, norms: list[float], metrics: dict) -> None:
        """verl skips an optimizer step whose gradient norm is not finite (its engines' ``optimizer_step``), and the
        run went on untrained for good: a streak of :data:`arctl.backends.base.DIVERGED_STEPS` steps that skipped
        every one fails it, in one line, as the tiny backend's (:class:`arctl.backends.base.SkipStreak`). Not under
        a loss scaler (:func:`_loss_scaled`): its steps skip at each overflow as it calibrates (from a review: a
        healthy fp16 run could fail as diverged), and nothing is counted."""
        if _loss_scaled(self.config):
            return
        if self._arctl_streak is None:
            optim = self.config.actor_rollout_ref.actor.optim
            self._arctl_streak = SkipStreak(diverged_advice(float(optim.lr), float(optim.weight_decay),
                                                            float(optim.clip_grad)))
        loss = float(metrics.get("actor/pg_loss", float("nan")))
        note = self._arctl_streak.update(int(self.global_steps), sum(not math.isfinite(n) for n in norms), len(norms),
                                         loss)
        if note:
            print(f"arctl: WARNING {note}", flush=True)  # printed: the job log shows it whatever verl's log level
            stop_file = stop_request.stop_file_of(self.config)
            if stop_file:
                with contextlib.suppress(OSError):
                    write_warning(Path(str(stop_file)).parent, note)
        self._arctl_streak.fail()

    def on_init_end(self):
        # verl knows the run's length now (its dataloader); the agent loop workers, created after
        # init() from this config, read it for a compared method's limit per step (ThinkPrune)
        from omegaconf import open_dict

        with open_dict(self.config):
            self.config.arctl.total_steps = int(self.total_training_steps)
        # before the first update: every actor worker must train packed trees with the tree mask
        if self.arctl_layout in ("flex", "dense"):
            from arctl.backends.verl.tree_forward import prove_tree_patch

            reports = prove_tree_patch(self.actor_rollout_wg.workers)
            engines = ", ".join(sorted({e for r in reports for e in r.get("engines", [])})) or "engines not located"
            # printed, not logged: the job log shows it whatever verl sets the log level to
            hosts = ", ".join(sorted({str(r.get("host")) for r in reports}))  # where the FSDP ranks train
            print(f"arctl: tree-attention patch active in {len(reports)} actor workers ({engines}) on {hosts}", flush=True)
        super().on_init_end()

    # ------------------------------------------------------------------ advantages
    def _compute_advantage(self, batch, metrics: dict):
        data = tq.kv_batch_get(
            keys=batch.keys, partition_id=batch.partition_id, select_fields=["uid", "response_mask", "extra_fields"]
        )
        response_mask = _as_nested(data["response_mask"])
        lens = [int(x) for x in response_mask.offsets().diff().tolist()]
        padding = [bool(tag.get("is_padding", False)) for tag in batch.tags]
        control = self.arctl_control
        limit = bc.step_limit(control, int(self.global_steps), int(self.total_training_steps))
        adv, arctl_metrics = compute_row_advantages(
            list(batch.keys), _as_list(data["uid"]), _as_list(data["extra_fields"]), lens, self.arctl_objective, padding,
            control, limit,
        )
        metrics.update(arctl_metrics)
        metrics.update(summary_cache_metrics(_as_list(data["extra_fields"]), padding))
        if self.arctl_objective.loss.kl_coef:  # verl computed the reference's log-probs just before
            lp = tq.kv_batch_get(keys=batch.keys, partition_id=batch.partition_id,
                                 select_fields=["old_log_probs", "ref_log_prob"])
            trained = trained_mask(row_records(_as_list(data["extra_fields"]), padding), lens, self.arctl_objective)
            metrics[ms.TRAIN_KL] = kl_mean(_as_nested(lp["old_log_probs"]).values(),
                                           _as_nested(lp["ref_log_prob"]).values(),
                                           trained, self.arctl_objective.loss.kl_type)
        adv = adv.float()
        nested = response_to_nested(adv, response_mask)
        out = TensorDict({"advantages": nested, "returns": response_to_nested(adv.clone(), response_mask)},
                         batch_size=len(batch))
        return tq.kv_batch_put(keys=batch.keys, partition_id=batch.partition_id, fields=out)

    # ------------------------------------------------------------------ packed trees
    def _compute_old_log_prob(self, batch, metrics: dict):
        if self.arctl_layout in ("flex", "dense"):
            self._put_tree_tensors(batch)
        out = super()._compute_old_log_prob(batch, metrics)
        # verl aggregates the entropy metric with the loss's aggregation (token-sum, divided by the
        # loss constant): a sum, not the mean entropy of a token. Report the mean over the tokens the loss
        # trains, as the tiny backend does.
        data = tq.kv_batch_get(keys=out.keys, partition_id=out.partition_id, select_fields=["entropy", "extra_fields"])
        padding = [bool(tag.get("is_padding", False)) for tag in batch.tags]
        metrics["actor/entropy"] = metrics[ms.TRAIN_ENTROPY] = trained_token_mean(
            _as_nested(data["entropy"]).unbind(), row_records(_as_list(data["extra_fields"]), padding),
            self.arctl_objective)
        return out

    def _put_tree_tensors(self, batch) -> None:
        data = tq.kv_batch_get(
            keys=batch.keys, partition_id=batch.partition_id,
            select_fields=["prompts", "responses", "extra_fields", "position_ids"],
        )
        prompts, responses = data["prompts"], data["responses"]
        extra = _as_list(data["extra_fields"])
        pos, cut, bstart = [], [], []
        for i, tag in enumerate(batch.tags):
            p = prompts[i].tolist()
            r = responses[i].tolist()
            d = extra[i].get(RECORD_KEY) if isinstance(extra[i], dict) else None
            if tag.get("is_padding", False) or not d:
                n = len(p) + len(r)
                pos.append(data["position_ids"][i].clone())
                cut.append(torch.zeros(n, dtype=torch.long))
                bstart.append(torch.zeros(n, dtype=torch.long))  # plain causal
                continue
            tt = tree_tensors(p, r, TreeRecord.from_dict(d))
            pos.append(tt["position_ids"])
            cut.append(tt["tree_cut"])
            bstart.append(tt["tree_branch_start"])
        fields = TensorDict(
            {
                "position_ids": torch.nested.as_nested_tensor(pos, layout=torch.jagged),
                "tree_cut": torch.nested.as_nested_tensor(cut, layout=torch.jagged),
                "tree_branch_start": torch.nested.as_nested_tensor(bstart, layout=torch.jagged),
            },
            batch_size=len(batch),
        )
        tq.kv_batch_put(keys=batch.keys, partition_id=batch.partition_id, fields=fields)

    # ------------------------------------------------------------------ stop / preemption
    _arctl_training = False  # inside fit()'s loop (on_train_begin): a stop ends it
    _arctl_stopped_at: int | None = None  # the step at which a stop request was acted on
    _arctl_validation_s: float | None = None  # how long the last validation took
    _arctl_last_step: int | None = None  # the run's last step, once a stop has ended fit() earlier
    _arctl_redone: int | None = None  # the step whose skipped validation this attempt did before training
    _arctl_validated: int | None = None  # the step whose validation ran to its end in the training loop

    def on_train_begin(self):
        super().on_train_begin()
        self._arctl_training = True
        if self._arctl_redone is not None:  # the redone step's row is logged (fit() logs before this hook)
            stop_request.clear_skipped_validation(stop_request.stop_file_of(self.config))
        self._arctl_watch_logging()

    def _arctl_watch_logging(self) -> None:
        """Once verl has logged a step's row, the record that its validation may be missing goes
        (:meth:`_validate` writes it before validating; verl logs after: ``self.logger.log(data, step)``),
        and once it has logged the run's last step, the run is finished (``FINISHED``: complete, whatever
        stop came during that step)."""
        log, stop_file = self.logger.log, stop_request.stop_file_of(self.config)

        def logged(*args, **kwargs):
            out = log(*args, **kwargs)
            step = kwargs.get("step", args[1] if len(args) > 1 else None)
            if step is None:
                return out
            # the step's row holds its evaluation only where the validation ran (one a stop skipped stays recorded)
            if self._arctl_validated == int(step) and stop_request.skipped_validation(stop_file) == int(step):
                stop_request.clear_skipped_validation(stop_file)
            if int(step) >= int(self._arctl_last_step or self.total_training_steps):
                stop_request.mark_finished(stop_file, int(step))
            if stop_file:  # the step's row is in verl's logs: its pending row goes (a normal run logs it once)
                from arctl.backends.verl.history import clear_pending_row

                clear_pending_row(Path(str(stop_file)).parent, int(step))
            return out

        self.logger.log = logged

    def on_step_end(self):
        super().on_step_end()
        if stop_request.requested(stop_request.stop_file_of(self.config)):
            self._arctl_stop()

    # ------------------------------------------------------------------ the step's row before its checkpoint
    _arctl_step_metrics: tuple[int, dict] | None = None  # (step, the metrics dict fit() logs as its row)

    def step(self, metrics: dict, timing_raw: dict):
        out = super().step(metrics, timing_raw)
        self._arctl_step_metrics = (int(self.global_steps), metrics)
        return out

    def _save_checkpoint(self):
        streak = self._arctl_streak
        if streak is not None and streak.first is not None and self.global_steps < (self._arctl_last_step or
                                                                                    self.total_training_steps):
            # no checkpoint inside a streak but the last step's: a resume counts it again from its first step
            print(f"arctl: no checkpoint at step {self.global_steps}: {streak.line}", flush=True)
            return None
        if self._arctl_saved_step != int(self.global_steps):  # a save SaveOnce makes (not a second call)
            self._arctl_keep_step_row()
            self._arctl_flush_rows()
        return super()._save_checkpoint()

    def _arctl_flush_rows(self) -> None:
        """The rows the checkpoint covers on disk before its save begins (metrics.jsonl, verl's file log, the
        pending row: :func:`arctl.backends.verl.history.flush_rows`): verl's FileLogger never syncs, and a node
        lost right after the save left the checkpoint durable and its rows gone (from a hunt, of the tiny backend)."""
        stop_file = stop_request.stop_file_of(self.config)
        if not stop_file:
            return
        from arctl.backends.verl.history import flush_rows

        try:
            flush_rows(Path(str(stop_file)).parent)
        except OSError as err:  # the save goes on; a resume finds the rows lost and goes back before them
            logger.warning("arctl: the rows before step %s's checkpoint could not be flushed to disk: %s",
                           self.global_steps, err)

    def _arctl_keep_step_row(self) -> None:
        """The step's training metrics to the run's pending row, before its checkpoint is saved: verl logs
        the row after the save and the validation, and a job killed in between (kill -9, a lost node, a stop
        whose grace ends during the validation) left checkpoint N complete and row N nowhere; the resume
        from N logs it from there (:func:`arctl.backends.verl.history.kept_rows`)."""
        stop_file = stop_request.stop_file_of(self.config)
        if not self._arctl_training or not stop_file or self._arctl_step_metrics is None:
            return
        step, metrics = self._arctl_step_metrics
        if step != int(self.global_steps):
            return
        from arctl.backends.verl.history import write_pending_row

        try:
            row = {k: plain for k, v in metrics.items() if (plain := _json_value(v)) is not _NOT_JSON}
            row = {**row, **_arctl_train_metrics(metrics, self.config), ms.STEP_KEY: step}
            write_pending_row(Path(str(stop_file)).parent, row)
        except Exception as err:  # noqa: BLE001 - the save goes on; only this window stays open
            logger.warning("arctl: step %s's row could not be written before its checkpoint: %s", step, err)

    def _arctl_stop(self) -> None:
        """Save this step's checkpoint and end fit() after the step."""
        logger.warning("arctl: stop requested; saving a checkpoint at step %s and ending", self.global_steps)
        self._save_checkpoint()
        if self._arctl_last_step is None:
            self._arctl_last_step = int(self.total_training_steps)
        self.total_training_steps = self.global_steps  # fit() ends after this step
        self._arctl_stopped_at = self.global_steps

    # ------------------------------------------------------------------ reproducible uids
    _arctl_uid_key: tuple | None = None  # (seed, step, phase) the uids drawn now are counted under
    _arctl_uid_count: Any = None

    def _fetch_one_gen_batch(self):
        with self._reproducible_uids("train"):
            batch = super()._fetch_one_gen_batch()
        tu.assign_non_tensor_data(batch, VALIDATE_KEY, False)  # a training row, whatever its file says
        return batch

    @contextlib.contextmanager
    def _reproducible_uids(self, phase: str):
        """Under ``trainer.deterministic`` (verl's ``rollout.full_determinism``): the uids verl's trainer
        draws for a batch's questions (``uuid.uuid4()`` in ``trainer_base``) are the k-th of (run seed,
        step, ``phase``) (:func:`step_uid`), so a rerun, or a resume from a checkpoint, draws the same: a
        uid names a tree's requests and seeds each (``agent_loop.request_seed``), and a uuid4 made every
        deterministic run sample differently. Otherwise verl's uuid4."""
        if not OmegaConf.select(self.config, "actor_rollout_ref.rollout.full_determinism", default=False):
            yield
            return
        from verl.trainer.ppo.v1 import trainer_base

        key = (int(self.config.arctl.get("seed", 0) or 0), int(self.global_steps), phase)
        if self._arctl_uid_key != key:
            self._arctl_uid_key, self._arctl_uid_count = key, itertools.count()
        saved = trainer_base.uuid
        trainer_base.uuid = _StepUuids(key, self._arctl_uid_count)
        try:
            yield
        finally:
            trainer_base.uuid = saved

    def _validate(self, *args, **kwargs):
        """verl's validation, timed; in the training loop after a stop request: skipped where its last
        duration does not fit before the step would be abandoned (verl logs a step after validating it,
        so an abandoned validation would lose the step's row; the step is recorded and the resume from its
        checkpoint validates it first), and a stop that came during it is acted on at once (this step's
        checkpoint), not after another step. Before training, at the step ``arctl.redo_validation_at``:
        the step's kept row with the evaluation, which verl logs as that step's row again (W&B was
        rewound to the step before it: :func:`arctl.backends.verl.history.prepare_attempt`)."""
        stop_file = stop_request.stop_file_of(self.config)
        last = self.global_steps >= (self._arctl_last_step or self.total_training_steps)  # the final evaluation
        seconds = self._arctl_validation_s or stop_request.recorded_validation_s(stop_file)  # an earlier attempt's
        if (self._arctl_training and self._arctl_stopped_at == self.global_steps and not last
                and not stop_request.validation_fits(stop_file, seconds)):
            logger.warning("arctl: step %s's validation skipped: the stop request leaves less than %.2fx its last "
                           "duration (%s s) before the step is abandoned; the resume validates it first",
                           self.global_steps, stop_request.VALIDATION_MARGIN, seconds)
            stop_request.mark_skipped_validation(stop_file, self.global_steps)
            return {}
        if self._arctl_training:  # the step is saved already: a kill before its row is logged loses this evaluation
            stop_request.mark_skipped_validation(stop_file, self.global_steps)  # (the next attempt redoes it)
        started = time.monotonic()
        with self._reproducible_uids("val"), _marked_validation(self):
            out = super()._validate(*args, **kwargs)
        self._arctl_validation_s = time.monotonic() - started
        stop_request.record_validation_s(stop_file, self._arctl_validation_s)
        if self._arctl_training:
            self._arctl_validated = int(self.global_steps)
        if self._arctl_training and self._arctl_stopped_at != self.global_steps and stop_request.requested(stop_file):
            self._arctl_stop()
        redo = self.config.arctl.get("redo_validation_at")
        if not self._arctl_training and redo is not None and int(redo) == self.global_steps and stop_file:
            from arctl.backends.verl.history import kept_row

            self._arctl_redone = self.global_steps
            out = {**kept_row(Path(str(stop_file)).parent, self.global_steps), **out}
        return out

    # ------------------------------------------------------------------ metrics
    def _define_step_metric(self) -> None:
        if self._arctl_metric_defined:
            return
        try:
            import wandb

            if wandb.run is not None:
                wandb.run.define_metric(ms.STEP_KEY)
                wandb.run.define_metric("*", step_metric=ms.STEP_KEY)
                # the run's identity as arctl's reports read it (verl's own config is already there)
                a = self.config.arctl
                wandb.run.config.update(
                    {"experiment": a.get("experiment"), "arm": a.get("arm"), "seed": a.get("seed"),
                     "backend": "verl"},
                    allow_val_change=True,
                )
                self._arctl_metric_defined = True
        except Exception:  # wandb absent or disabled
            pass

    def _val_metrics_update(self, data_sources, sample_uids, reward_extra_infos_dict, sample_turns,
                            expected_acc_counts=None):
        metric_dict = super()._val_metrics_update(
            data_sources, sample_uids, reward_extra_infos_dict, sample_turns, expected_acc_counts
        )
        metric_dict.update(eval_metrics(
            data_sources, sample_uids, reward_extra_infos_dict, self.arctl_objective.thinking.lam,
            self.config.arctl.get("eval_budgets"), self.config.arctl.get("eval_grid"),
            group_size=int(self.config.actor_rollout_ref.rollout.n),
        ))
        metric_dict[ms.STEP_KEY] = self.global_steps
        self._define_step_metric()
        return metric_dict

    def _compute_metrics(self, batch, metrics, timing_raw, global_steps, epoch):
        out = super()._compute_metrics(batch, metrics, timing_raw, global_steps, epoch)
        metrics[ms.STEP_KEY] = global_steps
        if "step" in timing_raw:
            metrics[ms.PERF_STEP_TIME_S] = float(timing_raw["step"])
        metrics.update(_arctl_train_metrics(metrics, self.config))
        self._define_step_metric()
        return out


def _loss_scaled(config) -> bool:
    """Whether verl trains the actor with a loss scaler: its FSDP engine makes a ``ShardedGradScaler`` where the
    actor's ``fsdp_config.mixed_precision.param_dtype`` is fp16 (verl 0.9.1's ``FSDPEngine._build_fsdp_module``; its
    default bf16), which skips a step whose gradient overflowed (``grad_norm`` inf) and lowers the scale."""
    from verl.utils.torch_dtypes import PrecisionType

    dtype = OmegaConf.select(config, "actor_rollout_ref.actor.fsdp_config.mixed_precision.param_dtype", default=None)
    return dtype is not None and PrecisionType.is_fp16(dtype)


def _grad_norms(output) -> list[float]:
    """The gradient norm of each optimizer step of an actor update's output (verl's ``grad_norm`` metric, one
    per mini-batch and epoch, before the trainer averages them); [] where it holds none."""
    try:
        values = output["metrics"].get("grad_norm")
    except Exception:  # noqa: BLE001 - no metrics (an output of another shape): nothing counted
        return []

    def flat(value) -> list:
        return [x for item in value for x in flat(item)] if isinstance(value, (list, tuple)) else [value]

    out = []
    for value in flat(values) if values is not None else []:
        with contextlib.suppress(TypeError, ValueError):
            out.append(float(value))
    return out


def _arctl_train_metrics(metrics: dict, config) -> dict[str, float]:
    """arctl's ``train/loss`` and ``train/kl_loss`` from verl's actor metrics of a step."""
    out = {}
    if "actor/pg_loss" in metrics:
        out[ms.TRAIN_LOSS] = float(metrics["actor/pg_loss"])
    if "actor/kl_loss" in metrics:  # verl's KL sum (times dp size); the term it added is that x kl_loss_coef
        out[ms.TRAIN_KL_LOSS] = float(metrics["actor/kl_loss"]) * float(config.actor_rollout_ref.actor.kl_loss_coef)
    return out


_NOT_JSON = object()


def _json_value(value: Any) -> Any:
    """``value`` as JSON can hold it (a numpy or torch scalar as a number, an array as a list), or
    :data:`_NOT_JSON`."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    for name in ("item", "tolist"):  # a scalar, then an array
        try:
            return _json_value(getattr(value, name)())
        except Exception:  # noqa: BLE001 - not that kind of value
            continue
    if isinstance(value, (list, tuple)):
        items = [_json_value(v) for v in value]
        return _NOT_JSON if any(v is _NOT_JSON for v in items) else items
    return _NOT_JSON


class _MarkedLoader:
    """``trainer.val_dataloader`` while verl validates: each batch it yields holds :data:`VALIDATE_KEY`
    True per row, which reaches the agent loop with the row (verl's ``_validate`` builds the batch from the
    loader's dict and keeps its own ``validate`` flag from the agent loop)."""

    def __init__(self, loader):
        self._loader = loader

    def __iter__(self):
        for batch in self._loader:
            batch[VALIDATE_KEY] = np.array([True] * len(batch["raw_prompt"]), dtype=object)
            yield batch

    def __len__(self):
        return len(self._loader)

    def __getattr__(self, name):
        return getattr(self._loader, name)


@contextlib.contextmanager
def _marked_validation(trainer):
    loader = getattr(trainer, "val_dataloader", None)
    if loader is None:  # a trainer verl has not set up (a test's stand-in): nothing to mark
        yield
        return
    trainer.val_dataloader = _MarkedLoader(loader)
    try:
        yield
    finally:
        trainer.val_dataloader = loader


_FAIL_FAST: dict[type, type] = {}


def step_uid(key: tuple, k: int) -> uuid.UUID:
    """The ``k``-th uid drawn under ``key`` (run seed, step, phase): a version-4 UUID from sha256 of both."""
    return uuid.UUID(bytes=hashlib.sha256(f"{key}:{k}".encode()).digest()[:16], version=4)


class _StepUuids:
    """What ``trainer_base`` sees as its ``uuid`` module while it draws reproducible uids: ``uuid4()``
    gives :func:`step_uid` of the key, counting on across the step's fetches."""

    def __init__(self, key: tuple, count):
        self._key, self._count = key, count

    def uuid4(self) -> uuid.UUID:
        return step_uid(self._key, next(self._count))

    def __getattr__(self, name: str):  # the rest of the uuid module, should a later verl use it there
        return getattr(uuid, name)


def row_order(key: str) -> tuple:
    """The place of a batch row ``{uid}_{session}_{index}`` in :class:`QuestionOrder`: its question (uid), then its
    sample and its row of that sample's tree."""
    uid, _, rest = key.partition("_")
    session, _, index = rest.partition("_")
    return (uid, *(int(p) if p.isdigit() else -1 for p in (session, index)), key)


class QuestionOrder:
    """Mixin of verl's ``ReplayBuffer``: a step's batch in question order (a question's samples and their rows
    together, the questions in the order of their uids, which arctl draws from the run's seed: :func:`step_uid`),
    not in the order the trees' rollouts finished, which is TransferQueue's order of keys. verl's
    ``_balance_batch`` keeps each rank's rows in batch order and each rank cuts its rows into the actor's
    mini-batches in that order, unshuffled (``actor.shuffle`` is false): in completion order, roughly by thinking
    length, the first optimizer step of a batch trained the short thinkings and the second the long ones, a
    question's samples split between them by length (from a review of the verl path: mean advantage +0.22 / -0.22
    in the two steps of a simulated paper batch, where the authors' prompt order gives 0). In question order, as
    in the authors' fork and the tiny backend, each step's questions are a draw independent of length."""

    def _materialize_batch(self, partition_id, selected_prompt_uids, partition_snapshot):
        batch = super()._materialize_batch(partition_id, selected_prompt_uids, partition_snapshot)
        batch.reorder(sorted(range(len(batch.keys)), key=lambda i: row_order(batch.keys[i])))
        return batch


def _fail_fast_class(cls: type) -> type:
    """``cls`` (verl's replay buffer) with :class:`arctl.backends.verl.rollout_failures.FailFast` and
    :class:`QuestionOrder`."""
    if issubclass(cls, FailFast):
        return cls
    if cls not in _FAIL_FAST:
        _FAIL_FAST[cls] = type(f"FailFast{cls.__name__}", (FailFast, QuestionOrder, cls), {})
    return _FAIL_FAST[cls]


TRAINER_REGISTRY["arctl"] = ArctlPPOTrainer  # also registered by the plugin; same class, idempotent


def eval_metrics(
    data_sources: list[str], sample_uids: list[Any], infos: dict[str, list], lam: float,
    eval_budgets=None, eval_grid=None, diagnostics: bool = True, group_size: int | None = None,
) -> dict[str, float]:
    """``eval/{ds}/acc@{b}``, ``anytime_acc`` (mean over ``eval_budgets``, else over the evaluated
    budgets), ``grid_anytime_acc``, ``curve_auc`` and ``acc_at_frac/{pct}`` (``metrics_schema.ACC_FRACTIONS``)
    (when the evaluation covered ``eval_grid``), ``final_acc``,
    ``think_len``, and the variance diagnostics ``corr_v1/corr_v2/nvar`` per budget of ``eval_budgets``
    (every evaluated budget without them; none where the evaluation missed one of them: the estimator, its
    prior, V1's earlier budgets and BRPO's mixing, depends on the budget set, and an eval-only run evaluates
    the grid too) (:func:`arctl.algo.metrics.eval_diagnostics`, discount ``lam``; a question's samples in groups of
    ``group_size``, training's rollout.n, as the tiny backend groups them: V2 includes the sample itself, so
    corr(V2, R) and the GRPO variance depend on G), from the validation rows'
    ``score@{b}`` and ``think_len`` values; the rows' ``forced_score@{b}`` and ``forced_think_len``
    (budget forcing) the same way under ``eval/{ds}-forced/`` (without diagnostics). The diagnostics
    are one thinking's returns at every budget: where the rows carry ``diag_score@{b}`` (a method that
    prompts one target per budget, L1: the largest eval budget's thinking, cut at every eval budget by
    ``agent_loop.rollout_question``, its length ``diag_think_len``) they are read from those, else from
    ``score@{b}`` and ``think_len`` (one thinking covers every budget)."""
    out: dict[str, float] = {}
    forced = {k[len(FORCED_PREFIX):]: v for k, v in infos.items() if k.startswith(FORCED_PREFIX)}
    if forced:  # the same models evaluated with s1 budget forcing, as datasets "{ds}-forced"
        out.update(eval_metrics([ms.forced_dataset(str(d)) for d in data_sources], sample_uids,
                                {k: v for k, v in forced.items() if k.startswith("score@") or k == "think_len"},
                                lam, eval_budgets, eval_grid, diagnostics=False))
    budgets = sorted(int(k.split("@", 1)[1]) for k in infos if k.startswith("score@"))
    if not budgets:
        return out
    diag_key = f"{DIAG_PREFIX}score@" if any(k.startswith(f"{DIAG_PREFIX}score@") for k in infos) else "score@"
    diag_len = f"{DIAG_PREFIX}think_len" if f"{DIAG_PREFIX}think_len" in infos else "think_len"
    diag_budgets = sorted(int(k[len(diag_key):]) for k in infos if k.startswith(diag_key))
    if eval_budgets:  # the diagnostics at eval.budgets, whatever else was evaluated (an eval-only run's grid)
        wanted = sorted({int(b) for b in eval_budgets})
        diag_budgets = wanted if set(wanted) <= set(diag_budgets) else []

    def table(key: str, bs: list[int], rows: list[int]) -> torch.Tensor:
        return torch.tensor([[float(infos[f"{key}{b}"][i] or 0.0) for b in bs] for i in rows], dtype=torch.float64)
    rows_by_ds: dict[str, list[int]] = defaultdict(list)
    for i, ds in enumerate(data_sources):
        rows_by_ds[str(ds)].append(i)
    for ds, rows in rows_by_ds.items():
        scores = table("score@", budgets, rows)
        acc = dict(zip(budgets, scores.mean(0).tolist()))
        for b, v in acc.items():
            out[ms.eval_acc(ds, b)] = v
        out.update(ms.anytime_eval_metrics(ds, acc, eval_budgets, eval_grid))
        if "think_len" in infos:
            out[ms.eval_think_len(ds)] = float(np.mean([float(infos["think_len"][i] or 0.0) for i in rows]))
        # diagnostics need [B, G, m] with equal G per question, and the thinking lengths
        by_uid: dict[Any, list[int]] = defaultdict(list)
        for k, i in enumerate(rows):
            by_uid[sample_uids[i]].append(k)
        groups = list(by_uid.values())
        if group_size and all(len(v) > group_size and len(v) % group_size == 0 for v in groups):
            groups = [v[i:i + group_size] for v in groups for i in range(0, len(v), group_size)]
        sizes = {len(v) for v in groups}
        if diagnostics and diag_budgets and diag_len in infos and len(sizes) == 1 and next(iter(sizes)) > 1:
            idx = torch.tensor(groups)
            lens = torch.tensor([int(float(infos[diag_len][i] or 0.0)) for i in rows])[idx]
            returns = table(diag_key, diag_budgets, rows)
            out.update(ms.eval_diagnostic_metrics(ds, eval_diagnostics(returns[idx], lens, diag_budgets, lam)))
    return out
