"""The versions a GPU user installs (constraints-gpu.txt) are verl[vllm]==0.9.1's own pins, and the
CPU installs (constraints-cpu.txt: CI, the README) run the verl tests with the same transformers and
tensordict (only torch differs: the local CPU build)."""

from __future__ import annotations

import importlib.metadata
from pathlib import Path

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[2]


def _pins(name: str) -> dict[str, str]:
    out = {}
    for line in (ROOT / name).read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            req = Requirement(line)
            (spec,) = req.specifier
            assert spec.operator == "==", f"{name}: {line} is not a pin"
            out[req.name.lower()] = spec.version
    return out


def _verl_pins(extra: str) -> dict[str, str]:
    """What verl's metadata pins (==) for ``extra`` (the ``vllm`` extra: what verl[vllm] installs)."""
    out = {}
    for line in importlib.metadata.distribution("verl").requires or []:
        req = Requirement(line)
        if req.marker is not None and req.marker.evaluate({"extra": extra}):
            pins = [s.version for s in req.specifier if s.operator == "=="]
            if pins:
                out[req.name.lower()] = pins[0]
    return out


def test_the_gpu_constraints_are_verls_own_pins():
    gpu, verl = _pins("constraints-gpu.txt"), _verl_pins("vllm")
    assert gpu["verl"] == importlib.metadata.version("verl") == "0.9.1"
    assert verl and {k: gpu.get(k) for k in verl} == verl  # vllm, torch, torchvision, torchaudio, transformers
    installed_tensordict = importlib.metadata.version("tensordict")
    req = next(Requirement(r) for r in importlib.metadata.distribution("verl").requires if r.startswith("tensordict"))
    assert req.specifier.contains(gpu["tensordict"]) and gpu["tensordict"] == installed_tensordict


def test_the_cpu_tests_run_verls_transformers_and_tensordict():
    cpu, gpu = _pins("constraints-cpu.txt"), _pins("constraints-gpu.txt")
    for name in ("transformers", "tensordict"):
        assert cpu[name] == gpu[name] == importlib.metadata.version(name)
    assert cpu["torch"] != gpu["torch"]  # the local CPU build; the GPU one comes with vLLM
