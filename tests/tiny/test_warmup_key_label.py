"""The warm-up's cache key hashes what the warm-up reads: ``model.name``, a label, does not change it (a review of
2026-12-07: a tiny model renamed with ``model.name=my-tiny`` missed the shipped warm-up and trained its own, 16-24 min,
for the same weights), while every size of the model still does."""

from __future__ import annotations

import pytest

from arctl.backends.tiny.warmup_key import MODEL_LABEL, shipped_entry, warmup_key
from arctl.compose import resolve_experiment


def _config(*overrides: str) -> dict:
    return resolve_experiment("ablation-vr", scale="tiny", seeds=[0], overrides=list(overrides))[0].config


def test_the_label_hashed_is_the_tiny_scales_model_name():
    assert _config()["model"]["name"] == MODEL_LABEL


def test_a_renamed_tiny_model_keeps_its_key_and_the_shipped_warmup():
    default = warmup_key(_config())
    assert shipped_entry(default) is not None  # the default key is the shipped one
    assert warmup_key(_config("model.name=my-tiny")) == default


@pytest.mark.parametrize("override", ["model.hidden_size=64", "model.num_layers=2", "model.max_position_embeddings=1024"])
def test_a_model_size_changes_the_key(override):
    assert warmup_key(_config(override)) != warmup_key(_config())
