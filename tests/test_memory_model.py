"""benchmarks/gpu/memory_model.py: the actor's peak memory at paper scale, estimated on a CPU by running
verl's own code on tensors without data. These tests pin what its numbers rest on: the byte counter
agrees with hand-computed bytes (the logits, and verl's entropy_from_logits under CUDA's autocast
policy), the CUDA-autocast emulation agrees with torch's CUDA autocast kernels (and the check can
fail), verl's log-prob fallback loops per token, verl's partitioning refuses rows longer than the
budget, and the model's parameter count is R1-Distill-Qwen-1.5B's."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest
from extras import NO_VERL, verl_missing  # tests/support/extras.py

pytestmark = [pytest.mark.skipif(verl_missing(), reason=NO_VERL),
              pytest.mark.xdist_group("memory-model")]  # one worker: the module's model is built once

HERE = Path(__file__).resolve().parents[1] / "benchmarks" / "gpu"
TINY = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, intermediate_size=128,
            vocab_size=512)


@pytest.fixture(scope="module")
def mm():
    sys.path.insert(0, str(HERE))
    try:
        spec = importlib.util.spec_from_file_location("memory_model", HERE / "memory_model.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules["memory_model"] = module
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.path.remove(str(HERE))
        sys.modules.pop("memory_model", None)


def test_counter_counts_the_logits_and_nothing_of_the_weights(mm):
    import torch

    model = mm.build_model(TINY, "sdpa", fused=False)
    b, n, v = 3, 40, TINY["vocab_size"]
    hidden = mm.phantom(b, n, TINY["hidden_size"])
    with mm.PeakBytes() as tally:
        tally.exclude([hidden, *model.parameters()])  # there before: their views (t() of the weight) are no new bytes
        logits = model.lm_head(hidden)
    assert logits.dtype == torch.bfloat16 and tuple(logits.shape) == (b, n, v)
    assert tally.peak == b * n * v * 2


def test_entropy_from_logits_under_cuda_autocast_holds_three_float32_copies(mm):
    """verl's entropy_from_logits on bf16 logits, CUDA policy: softmax in fp32 (4 B per element),
    logsumexp's fp32 cast of the logits (4 B) and its (x - max).exp_() temporary (4 B) at once; the
    [B, L] reductions on top. Plain CPU autocast would keep them bf16 (half the bytes)."""
    import torch
    from verl.utils.torch_functional import entropy_from_logits

    b, n, v = 2, 16, 1000
    logits = mm.phantom(b, n, v)
    with mm.cuda_autocast_policy(), torch.autocast("cpu", dtype=torch.bfloat16), mm.PeakBytes() as tally:
        entropy = entropy_from_logits(logits)
    assert entropy.dtype == torch.float32
    full = b * n * v
    assert 12 * full <= tally.peak <= 12 * full + 64 * b * n


def test_autocast_emulation_agrees_with_torchs_cuda_autocast(mm):
    ok = mm.autocast_check(dict(TINY, vocab_size=1000), length=16)
    assert ok["equal"], ok["differences"]
    assert ok["compared"] > 20 and ok["compared_with_float32_results"] > 0 and ok["not_replayable"] == 0
    plain = mm.autocast_check(dict(TINY, vocab_size=1000), length=16, emulate=False)
    assert not plain["equal"]  # without the emulation softmax / logsumexp / log_softmax / sum stay bf16
    assert {d["call"] for d in plain["differences"]} >= {"softmax", "log_softmax"}


def test_verl_logprobs_without_flash_attn_loop_per_token(mm):
    """logprobs_from_logits -> logprobs_from_logits_v2 (no flash_attn): a log_softmax per row of [N, V]."""
    import torch
    from verl.utils import torch_functional as vf

    assert not vf.FLAH_ATTN_CROSS_ENTROPY_LOSS_AVAILABLE
    ops = []
    for n in (32, 64):
        logits, labels = mm.phantom(n, 1000), torch.zeros(n, dtype=torch.long)
        with mm.cuda_autocast_policy(), torch.autocast("cpu", dtype=torch.bfloat16), mm.PeakBytes() as tally:
            out = vf.logprobs_from_logits(logits, labels)
        assert tuple(out.shape) == (n,) and out.dtype == torch.float32
        ops.append(tally.ops)
    assert ops[1] - ops[0] >= 3 * 32  # at least cast, log_softmax, gather per token


def test_verl_partition_and_parameter_count(mm):
    assert mm.parameter_counts(mm.MODEL)["total"] == 1_777_088_000  # DeepSeek-R1-Distill-Qwen-1.5B, untied
    too_long = mm.verl_partition([mm.ROW] * 4, 8192)
    assert "max_token_len" in too_long["error"]  # seqlen_balancing.py asserts budget >= longest row
    assert mm.verl_partition([mm.ROW] * 12, 32768)["max_rows"] == 3
    mixed = mm.verl_partition(mm.mixed_lengths(), 32768)
    assert mixed["max_padded_tokens"] > 32768  # the budget counts real tokens, the padded path pads to the longest


def test_paper_shape_default_path_vs_fused_kernels():
    """One 10,176-token row at paper shape through verl's forward_step (in a process of its own: it
    selects verl's cpu platform; ~12 s on 2 cores): the old-log-prob pass holds the bf16 logits and three fp32 copies of
    them (entropy_from_logits); with use_fused_kernels it never holds one."""
    code = ("import json, memory_model as mm; print(json.dumps([mm.measure('old-log-prob', 'flex', [8000], mm.KNOBS[k]) "
            "for k in ('default', 'use_fused_kernels')]))")
    out = subprocess.run([sys.executable, "-c", code], cwd=HERE, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    default, fused = json.loads(out.stdout.strip().splitlines()[-1])
    assert default["peak_phase"] == "entropy_from_logits"
    assert default["peak_gib"] >= 7 * default["logits_gib"]
    assert fused["peak_gib"] < default["logits_gib"] / 2


@pytest.mark.parametrize("argv", [["--layouts", "foo", "--quick"], ["--layouts", "flex,duplicate"],
                                  ["--budgets", "abc"], ["--budgets", "0,8192"], ["--budgets", "65536", "--quick"]])
def test_a_bad_layout_or_budget_is_refused_before_anything_is_measured(mm, monkeypatch, capsys, tmp_path, argv):
    """`--layouts foo --quick` printed an error on every row and exited 0; `--budgets abc` was a traceback."""
    monkeypatch.setattr(mm, "static_state", lambda *a: pytest.fail("measured on bad arguments"))
    with pytest.raises(SystemExit) as exc:
        mm.main([*argv, "--json", str(tmp_path / "m.json")])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and argv[0] in err and "Traceback" not in err
    assert not (tmp_path / "m.json").exists()


def test_the_exit_code_is_1_when_a_measurement_failed(mm, monkeypatch, capsys, tmp_path):
    """A row whose measurement raised is recorded with its error, and the call no longer exits 0."""
    def broken(pass_, layout, thinking, knobs):
        raise RuntimeError("verl's forward failed")

    monkeypatch.setattr(mm, "measure", broken)
    assert mm.main(["--quick", "--layouts", "flex", "--json", str(tmp_path / "m.json")]) == 1
    rows = json.loads((tmp_path / "m.json").read_text())["rows"]
    assert rows and all("verl's forward failed" in r["error"] for r in rows)
    assert "measurements failed" in capsys.readouterr().err
