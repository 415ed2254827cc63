"""A rollout group that failed in an agent-loop worker fails the step, with the worker's own error.

verl 0.9.1's agent-loop worker logs a failed session (in the worker's log only) and marks its
question's group ``failure`` in TransferQueue; the synchronous replay buffer keeps failed groups
sampleable and pads the missing trajectories, so the step goes on without them, and a run where
every group fails dies later with an error that does not name the cause (a wrong tokenizer, a
prompt longer than the server's context: seen in every rollout worker, found only in Ray's logs).

arctl's tree loop writes the error's first line into the tag of its question's TransferQueue entry
(:func:`record`, tags merge) before re-raising it, and the trainer's replay buffer
(:class:`FailFast`) raises :class:`RolloutFailed` with that line when it selects a failed group, in
training and in validation (before verl's own error for a batch where every group failed).
"""

from __future__ import annotations

import logging
from typing import Any

logger = logging.getLogger(__name__)

ERROR_TAG = "arctl_error"
MAX_CHARS = 500


class RolloutFailed(RuntimeError):
    """Rollout groups failed in the agent-loop workers."""


def error_line(err: BaseException) -> str:
    text = " ".join(str(err).split()) or "(no message)"
    return f"{type(err).__name__}: {text}"[:MAX_CHARS]


async def record(uid: Any, validate: bool, err: BaseException) -> None:
    """Tag the question's TransferQueue entry (partition ``val`` or ``train``) with the error."""
    if uid is None:
        return
    try:
        import transfer_queue as tq

        await tq.async_kv_put(key=str(uid), partition_id="val" if validate else "train",
                              tag={ERROR_TAG: error_line(err)})
    except Exception:  # the error itself is what matters: verl's worker logs and reports it
        logger.exception("arctl: could not record the rollout error of %s", uid)


def failure_message(partition_id: str, failed: list[str], errors: dict[str, str], total: int) -> str:
    what = "validation" if partition_id == "val" else "training"
    first = next((errors[u] for u in failed if errors.get(u)), None)
    cause = first or "the error is in the agent-loop worker's log (Ray's worker logs of AgentLoopWorkerTQ)"
    return (f"{len(failed)} of {total} {what} rollout groups failed in the agent loop (question {failed[0]}): "
            f"{cause}")


class FailFast:
    """Mixin of verl's ``ReplayBuffer``: handing out a failed group raises :class:`RolloutFailed`."""

    def _select_prompt_uids(self, partition_id, sampleable_keys, batch_size):
        selected = super()._select_prompt_uids(partition_id, sampleable_keys, batch_size)
        failed = sorted(set(selected[0]) & set(self.failure_keys[partition_id]))
        if failed:
            import transfer_queue as tq

            tags = (tq.kv_list(partition_id) or {}).get(partition_id, {})
            errors = {uid: str((tags.get(uid) or {}).get(ERROR_TAG) or "") for uid in failed}
            raise RolloutFailed(failure_message(partition_id, failed, errors, len(selected[0])))
        return selected
