"""The disk one checkpoint of a verl run takes, from its model's config.json read here without the network (a local
``model.path`` folder, or the Hugging Face cache as huggingface_hub lays it out): the parameters of a Qwen2 model x 12
bytes (fp32 weights and Adam's two moments). A dry run adds these up against the workspace's free space
(tests/launch/test_disk_room.py); before, nothing checked the room a paper sweep's checkpoints need (~1.7 TB)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from arctl.backends.base import BackendDefaults, get_backend
from arctl.backends.verl.disk import BYTES_PER_PARAMETER, GB, checkpoint_gb, qwen2_parameters
from arctl.backends.verl.settings import VERL_DEFAULTS

# the released configs' sizes (their config.json files), and their parameter counts (safetensors metadata)
R1_DISTILL = {
    "deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B": (
        {"hidden_size": 1536, "num_hidden_layers": 28, "intermediate_size": 8960, "vocab_size": 151936,
         "num_attention_heads": 12, "num_key_value_heads": 2}, 1_777_088_000),
    "deepseek-ai/DeepSeek-R1-Distill-Qwen-7B": (
        {"hidden_size": 3584, "num_hidden_layers": 28, "intermediate_size": 18944, "vocab_size": 152064,
         "num_attention_heads": 28, "num_key_value_heads": 4}, 7_615_616_512),
}


def _config_json(sizes: dict) -> dict:
    return {"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "tie_word_embeddings": False,
            "max_position_embeddings": 131072, "rms_norm_eps": 1e-06, "torch_dtype": "bfloat16", **sizes}


def _cache(root: Path, repo_id: str, cfg: dict, commit: str = "a" * 40) -> None:
    """A model in a Hugging Face hub cache as huggingface_hub writes it: refs/main names the snapshot."""
    repo = root / ("models--" + repo_id.replace("/", "--"))
    (repo / "snapshots" / commit).mkdir(parents=True)
    (repo / "snapshots" / commit / "config.json").write_text(json.dumps(cfg))
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)


def _run(path, **verl) -> dict:
    return {"backend": "verl", "model": {"path": str(path)}, "verl": verl}


@pytest.mark.parametrize("repo_id", sorted(R1_DISTILL))
def test_the_parameter_count_is_the_released_models(repo_id):
    sizes, params = R1_DISTILL[repo_id]
    assert qwen2_parameters(_config_json(sizes)) == params
    tied = qwen2_parameters({**_config_json(sizes), "tie_word_embeddings": True})
    assert tied == params - sizes["vocab_size"] * sizes["hidden_size"]  # lm_head is the embeddings
    assert qwen2_parameters({**_config_json(sizes), "num_experts": 60}) is None  # a mixture of experts: not this formula
    assert qwen2_parameters({"hidden_size": 8}) is None


def test_a_local_model_folders_checkpoint_is_12_bytes_a_parameter(tmp_path):
    model = tmp_path / "r1-1.5b"
    model.mkdir()
    sizes, params = R1_DISTILL["deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B"]
    (model / "config.json").write_text(json.dumps(_config_json(sizes)))
    gb = checkpoint_gb(_run(model))
    assert gb == params * BYTES_PER_PARAMETER / GB and round(gb) == 21  # docs/verl-backend.md: ~21 GB at 1.5B
    assert get_backend("verl").checkpoint_gb(_run(model)) == gb  # through the backend protocol
    # runs that save no model: a smoke run, a CPU rehearsal, an eval-only run
    for verl in ({"smoke": True}, {"rehearsal_steps": 2}, {"eval_only": True, "eval_checkpoint": "model"}):
        assert checkpoint_gb(_run(model, **verl)) == 0.0, verl
    assert checkpoint_gb(_run(tmp_path / "elsewhere")) is None  # a folder that is not there
    (tmp_path / "no-config").mkdir()
    assert checkpoint_gb(_run(tmp_path / "no-config")) is None
    (model / "config.json").write_text("{not json")
    assert checkpoint_gb(_run(model)) is None


def test_a_hub_ids_config_is_read_from_the_hugging_face_cache_offline(tmp_path, monkeypatch):
    """HF_HUB_CACHE, else HF_HOME/hub, as huggingface_hub finds its cache; nothing downloaded: a model not in the
    cache is of unknown size."""
    seven = "deepseek-ai/DeepSeek-R1-Distill-Qwen-7B"
    sizes, params = R1_DISTILL[seven]
    for var in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert checkpoint_gb(_run(seven)) is None  # not downloaded
    _cache(tmp_path / "home" / ".cache" / "huggingface" / "hub", seven, _config_json(sizes))
    assert checkpoint_gb(_run(seven)) == params * BYTES_PER_PARAMETER / GB  # the default cache under ~/.cache
    assert round(checkpoint_gb(_run(seven))) == 91  # docs/verl-backend.md: ~91 GB at 7B
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    assert checkpoint_gb(_run(seven)) is None  # HF_HOME moves the cache
    one_five = "deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B"
    _cache(tmp_path / "hf" / "hub", one_five, _config_json(R1_DISTILL[one_five][0]))
    assert round(checkpoint_gb(_run(one_five))) == 21
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub-cache"))
    _cache(tmp_path / "hub-cache", one_five, _config_json(sizes), commit="b" * 40)  # another snapshot's sizes
    assert checkpoint_gb(_run(one_five)) == params * BYTES_PER_PARAMETER / GB  # HF_HUB_CACHE first


def test_the_backends_say_what_each_run_keeps():
    verl = get_backend("verl")
    assert verl.checkpoints_kept(_run("m")) == ("verl.keep_checkpoints", VERL_DEFAULTS["keep_checkpoints"])
    assert verl.checkpoints_kept(_run("m", keep_checkpoints=5)) == ("verl.keep_checkpoints", 5)
    assert get_backend("tiny").checkpoint_gb({"backend": "tiny"}) == 0.0  # megabytes: nothing to count
    assert BackendDefaults().checkpoint_gb({}) is None and BackendDefaults().checkpoints_kept({}) is None
