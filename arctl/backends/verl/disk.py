"""How much disk one checkpoint of a verl run takes, from its model's ``config.json`` where it can be read here without
the network (:meth:`VerlBackend.checkpoint_gb`): a launch's dry run compares what its runs keep with the room the
workspace has (:mod:`arctl.launch.disk_room`) before GPU hours are spent on saves that do not fit.

Cheap to import (no verl, no torch, no huggingface_hub): the Hugging Face cache is read as huggingface_hub lays it
out (``<cache>/models--ORG--NAME/refs/main`` names the snapshot, ``snapshots/<commit>/config.json``), nothing fetched.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

# A checkpoint verl saves holds, per parameter, the FSDP actor's fp32 weights (4 bytes) and Adam's two fp32 moments
# (exp_avg, exp_avg_sq: 8 bytes): 12 bytes (1,777,088,000 parameters of R1-Distill-Qwen-1.5B: ~21 GB; 7B: ~91 GB)
BYTES_PER_PARAMETER = 12
GB = 10**9  # decimal gigabytes, as file systems' sizes (df -H) and quotas are said
# a mixture of experts' config (Qwen2-MoE, Mixtral): the dense formula of qwen2_parameters does not hold
EXPERT_KEYS = ("num_experts", "num_local_experts", "n_routed_experts")


def hub_cache() -> Path:
    """Where huggingface_hub keeps downloaded models, read from the environment now as huggingface_hub reads it at
    import: ``$HF_HUB_CACHE``, else the legacy ``$HUGGINGFACE_HUB_CACHE``, else ``$HF_HOME/hub``, else
    ``$XDG_CACHE_HOME/huggingface/hub``, else ``~/.cache/huggingface/hub``."""
    home = os.environ.get("HF_HOME") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "huggingface")
    cache = os.environ.get("HF_HUB_CACHE") or os.environ.get("HUGGINGFACE_HUB_CACHE") or os.path.join(home, "hub")
    return Path(os.path.expandvars(os.path.expanduser(cache)))


def cached_config(repo_id: str, cache: Path | None = None) -> Path | None:
    """The ``config.json`` of model ``repo_id`` in the Hugging Face cache: the snapshot ``refs/main`` names, else the
    newest snapshot holding one; None: not downloaded here."""
    repo = (cache or hub_cache()) / ("models--" + repo_id.replace("/", "--"))
    snapshots = repo / "snapshots"
    try:
        main = (repo / "refs" / "main").read_text().strip()
    except OSError:
        main = ""
    try:
        if main and (snapshots / main / "config.json").is_file():
            return snapshots / main / "config.json"
        found = [f for f in snapshots.glob("*/config.json") if f.is_file()]
        return max(found, key=lambda f: f.stat().st_mtime) if found else None
    except OSError:
        return None


def model_config_file(path: str) -> Path | None:
    """The ``config.json`` of ``model.path`` readable here: in its local folder (as ``from_pretrained`` reads the path:
    :func:`arctl.backends.verl.run_config.model_source`), else the hub id's in the Hugging Face cache; None: neither."""
    from arctl.backends.verl.run_config import model_source

    local = Path(model_source(path))
    if local.is_dir():
        found = local / "config.json"
        return found if found.is_file() else None
    if path.startswith(("/", ".", "~")) or path.count("/") > 1:
        return None  # a folder that is not there: no hub id
    return cached_config(path)


def qwen2_parameters(cfg: dict) -> int | None:
    """The parameter count of a dense decoder laid out as Qwen2 (Llama's layout, plus q/k/v biases) from its
    ``config.json``: per layer q/k/v (with biases unless ``attention_bias`` is false; Qwen2's config does not name
    them: it always has them), o, the MLP's gate/up/down and two RMSNorms; the final norm, the embeddings, and
    ``lm_head`` unless ``tie_word_embeddings`` (counted when the config does not say: too much room, never too
    little). None: a size it does not give, or a mixture of experts."""
    try:
        h, layers, inter, vocab = (int(cfg[k]) for k in
                                   ("hidden_size", "num_hidden_layers", "intermediate_size", "vocab_size"))
        heads = int(cfg["num_attention_heads"])
        kv_heads = int(cfg.get("num_key_value_heads") or heads)
        head_dim = int(cfg.get("head_dim") or h // heads)
    except (KeyError, TypeError, ValueError, ZeroDivisionError):
        return None
    if any(cfg.get(k) for k in EXPERT_KEYS):
        return None
    bias = cfg.get("attention_bias", True) is not False
    q, kv = heads * head_dim, kv_heads * head_dim
    attention = h * q + 2 * h * kv + (q + 2 * kv if bias else 0) + q * h
    layer = attention + 3 * h * inter + 2 * h
    embeddings = vocab * h * (1 if cfg.get("tie_word_embeddings") else 2)
    return layers * layer + h + embeddings


def checkpoint_gb(config: dict) -> float | None:
    """GB one checkpoint of the run takes on disk: :func:`qwen2_parameters` of its model x :data:`BYTES_PER_PARAMETER`;
    0.0 for a run that saves no model (a smoke run, an eval-only run, a CPU rehearsal: a few bytes per step); None:
    the model's ``config.json`` cannot be read here (a hub id not downloaded), or gives no size."""
    from arctl.backends.verl.overrides import verl_setting

    if any(verl_setting(config, key) for key in ("smoke", "eval_only", "rehearsal_steps")):
        return 0.0
    model = config.get("model")
    path = model.get("path") if isinstance(model, dict) else None
    found = model_config_file(str(path)) if path else None
    try:
        cfg = json.loads(found.read_text()) if found else None
    except (OSError, ValueError):
        return None
    params = qwen2_parameters(cfg) if isinstance(cfg, dict) else None
    return None if params is None else params * BYTES_PER_PARAMETER / GB
