"""Actor forward on packed trees: FlexAttention BlockMask (GPU), dense 4-D mask, or duplicated rows.

A packed tree row is ``prompt + thinking + (inserted + summary) * n`` with tree position ids and the
1-D mask encoding ``cut`` / ``branch_start`` of :mod:`arctl.algo.tree`. verl's next-token log-prob
computation works on it unchanged: the token after a branch boundary is always an *inserted* token
(never trained), so the one cross-branch "label" it shifts in is masked out of the loss. Only the
attention mask and the position ids differ from a plain causal row:

- ``flex`` (GPU): ``attn_implementation=flex_attention`` and the BlockMask from
  :func:`arctl.algo.tree.tree_block_mask` (no [L, L] tensor, O(L^2 / 128^2) block tables);
- ``dense``: ``attn_implementation=sdpa`` with a boolean [B, 1, L, L] mask (CPU / debugging);
- ``duplicate``: no tree at all; the agent loop emits one row per branch (``thinking[:cut] +
  inserted + summary``, only the summary trained) plus one thinking row, and verl trains them as
  ordinary padded sequences with SDPA. Correct and slower (the thinking is re-encoded per branch).

:func:`patch_fsdp_engine` makes verl's FSDP language-model engine use the tree mask whenever a
micro-batch carries ``tree_cut`` / ``tree_branch_start`` (written by the arctl trainer); the plugin
applies it when verl imports its FSDP engine module, in every worker.
"""

from __future__ import annotations

import importlib
import os
import socket
from typing import Any

import torch

from arctl.algo.tree import DEFAULT_BLOCK_SIZE, dense_tree_mask, tree_block_mask
from arctl.backends.verl.names import BLOCK_SIZE_ENV


def padded_tree_encoding(cut: torch.Tensor, branch_start: torch.Tensor, max_len: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Nested [B, j] ``cut`` / ``branch_start`` -> padded [B, max_len]; padding sees only itself."""
    b = cut.size(0)
    c = torch.nested.to_padded_tensor(cut, padding=0, output_size=(b, max_len))
    s = torch.nested.to_padded_tensor(branch_start, padding=-1, output_size=(b, max_len))
    pos = torch.arange(max_len, device=s.device).expand(b, max_len)
    s = torch.where(s < 0, pos, s)
    return c, s


TREE_ATTENTION = ("flex_attention", "sdpa")  # the implementations that apply a tree mask as a mask


def attn_implementation_of(model: Any) -> str:
    """The attention implementation ``model`` was built with, when it is one that applies a tree
    mask: ``flex_attention`` (BlockMask) or ``sdpa`` (boolean 4-D mask). Anything else raises: eager
    attention *adds* a boolean mask to the scores instead of applying it, and an implementation that
    cannot be read cannot be trusted with one."""
    impl = getattr(getattr(model, "config", None), "_attn_implementation", None)
    if impl not in TREE_ATTENTION:
        raise RuntimeError(
            f"arctl packed trees need the model built with attn_implementation flex_attention or sdpa, "
            f"this one has {impl!r}: set actor_rollout_ref.model.override_config.attn_implementation "
            "(arctl's overrides do, for verl.tree_attention=flex|dense)")
    return impl


def tree_attention_mask(cut: torch.Tensor, branch_start: torch.Tensor, attn_implementation: str,
                        block_size: int = DEFAULT_BLOCK_SIZE) -> Any:
    """The attention mask a transformers model takes for trees ``[B, L]``: a BlockMask for
    ``flex_attention``, a boolean [B, 1, L, L] mask (True = attend) for ``sdpa``."""
    if attn_implementation == "flex_attention":
        return tree_block_mask(cut, branch_start, device=cut.device, block_size=block_size)
    if attn_implementation == "sdpa":
        return dense_tree_mask(cut, branch_start)[:, None]
    raise ValueError(f"no tree mask for attention implementation {attn_implementation!r} (use {' or '.join(TREE_ATTENTION)})")


def tree_log_probs(model, input_ids: torch.Tensor, position_ids: torch.Tensor, cut: torch.Tensor,
                   branch_start: torch.Tensor, attn_implementation: str | None = None) -> torch.Tensor:
    """log p(token_t | tree context) for t >= 1 of packed trees ``[B, L]`` -> [B, L - 1] (float32),
    the quantity verl's actor computes (logits at t-1, label t)."""
    impl = attn_implementation or attn_implementation_of(model)
    mask = tree_attention_mask(cut, branch_start, impl)
    logits = model(input_ids=input_ids, position_ids=position_ids, attention_mask=mask).logits.float()
    logp = torch.log_softmax(logits[:, :-1], dim=-1)
    return logp.gather(-1, input_ids[:, 1:, None])[..., 0]


def sequence_log_probs(model, input_ids: torch.Tensor) -> torch.Tensor:
    """Plain causal log-probs of one sequence [L] -> [L - 1] (the duplicated-branch reference)."""
    logits = model(input_ids=input_ids[None]).logits.float()[0]
    logp = torch.log_softmax(logits[:-1], dim=-1)
    return logp.gather(-1, input_ids[1:, None])[:, 0]


_PATCHED = "_arctl_tree_patched"


def patch_fsdp_engine(module) -> None:
    """Wrap ``FSDPEngineWithLMHead.prepare_model_inputs`` of verl's FSDP engine ``module`` so that a
    micro-batch with ``tree_cut`` / ``tree_branch_start`` gets the tree attention mask (idempotent)."""
    cls = getattr(module, "FSDPEngineWithLMHead", None)
    if cls is None or getattr(cls.prepare_model_inputs, _PATCHED, False):
        return
    original = cls.prepare_model_inputs

    def prepare_model_inputs(self, micro_batch):
        model_inputs, output_args = original(self, micro_batch)
        if "tree_cut" not in micro_batch.keys():
            return model_inputs, output_args
        if model_inputs.get("attention_mask") is None:
            raise RuntimeError(
                "arctl packed trees need actor_rollout_ref.model.use_remove_padding=false "
                "(arctl's overrides set it for verl.tree_attention=flex|dense)"
            )
        input_ids = model_inputs["input_ids"]
        cut, bstart = padded_tree_encoding(
            micro_batch["tree_cut"], micro_batch["tree_branch_start"], input_ids.shape[-1]
        )
        impl = attn_implementation_of(getattr(self, "module", None))
        block = int(os.environ.get(BLOCK_SIZE_ENV) or DEFAULT_BLOCK_SIZE)  # verl.block_size (run_config.with_wandb_env)
        model_inputs["attention_mask"] = tree_attention_mask(cut.to(input_ids.device), bstart.to(input_ids.device), impl,
                                                             block)
        return model_inputs, output_args

    setattr(prepare_model_inputs, _PATCHED, True)
    cls.prepare_model_inputs = prepare_model_inputs


FSDP_ENGINE_MODULE = "verl.workers.engine.fsdp.transformer_impl"


def _engines(root: Any, depth: int = 5) -> list[Any]:
    """verl training-engine objects reachable from ``root`` through attributes, dicts and lists."""
    found, seen, todo = [], set(), [(root, 0)]
    while todo:
        obj, d = todo.pop()
        if id(obj) in seen or obj is None or isinstance(obj, (str, bytes, int, float, bool, torch.Tensor, torch.nn.Module)):
            continue
        seen.add(id(obj))
        if type(obj).__module__.startswith("verl.workers.engine.") and hasattr(obj, "forward_backward_batch"):
            found.append(obj)
            continue
        if d >= depth:
            continue
        children = list(obj.values()) if isinstance(obj, dict) else list(obj) if isinstance(obj, (list, tuple)) else \
            list(vars(obj).values()) if hasattr(obj, "__dict__") else []
        todo += [(c, d + 1) for c in children]
    return found


def tree_patch_report(worker: Any = None) -> dict[str, Any]:
    """Whether arctl's tree mask is active in this process, where verl trains (run inside every
    actor worker through ``worker.__ray_call__``: :func:`prove_tree_patch`).

    ``ok`` needs the FSDP engine class of this process to carry the patch and every training
    engine found in ``worker`` to be an FSDP engine with it (a Megatron engine never masks trees).
    When the patch is missing, the report names why importing arctl's plugin fails here (verl
    itself logs plugin import errors at DEBUG only)."""
    report: dict[str, Any] = {"host": socket.gethostname(), "pid": os.getpid(), "ok": False, "problem": None}
    try:
        from arctl.backends.verl import plugin  # what `import verl` should have loaded

        module = importlib.import_module(FSDP_ENGINE_MODULE)
    except Exception as err:  # noqa: BLE001 - reported, not raised: the trainer fails with all reports
        report["problem"] = f"cannot import arctl's verl plugin or verl's FSDP engine here: {type(err).__name__}: {err}"
        return report
    cls = module.FSDPEngineWithLMHead
    report["patched"] = bool(getattr(cls.prepare_model_inputs, _PATCHED, False))
    engines = _engines(worker) if worker is not None else []
    report["engines"] = sorted({type(e).__name__ for e in engines})
    wrong = [type(e).__name__ for e in engines if not (isinstance(e, cls) and getattr(type(e).prepare_model_inputs, _PATCHED, False))]
    if not report["patched"]:
        why = plugin.failures().get(FSDP_ENGINE_MODULE)
        report["problem"] = ("verl's FSDP engine has no tree mask in this process (arctl's plugin did not patch it"
                             + (f": {why})" if why else ")"))
    elif wrong:
        report["problem"] = f"the worker trains with {', '.join(sorted(set(wrong)))}, which has no tree mask (use strategy=fsdp)"
    else:
        report["ok"] = True
    return report


def prove_tree_patch(handles: list[Any], get: Any = None) -> list[dict[str, Any]]:
    """Ask every actor worker (Ray actor handles) for :func:`tree_patch_report`; raise one clear
    RuntimeError when any of them would train packed trees with plain causal attention."""
    if get is None:
        import ray

        get = ray.get
    try:
        reports = list(get([h.__ray_call__.remote(tree_patch_report) for h in handles]))
    except Exception as err:  # noqa: BLE001 - e.g. arctl not importable in the workers' environment
        reports = [{"host": "?", "pid": "?", "ok": False,
                    "problem": f"the check itself failed: {type(err).__name__}: {' '.join(str(err).split())[:300]}"}]
    bad = [r for r in reports if not r.get("ok")]
    if not reports or bad:
        first = bad[0] if bad else {"host": "?", "pid": "?", "problem": "no actor workers to ask"}
        raise RuntimeError(
            f"arctl: the tree-attention patch is not active in {len(bad)} of {len(reports)} actor workers "
            f"(first: {first['host']} pid {first['pid']}: {first['problem']}); packed trees would train with "
            "plain causal attention. Install arctl in the workers' Python environment and check that `import verl` "
            "loads the arctl plugin (VERL_USE_EXTERNAL_PLUGINS must not be 'none'), or use verl.tree_attention=duplicate"
        )
    return reports
