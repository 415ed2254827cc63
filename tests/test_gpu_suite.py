"""The GPU check suite (benchmarks/gpu/suite.py) runs on CPU at small shapes, so it cannot rot between
the sessions that have a GPU: every part runs, the equivalence checks pass, verl's own loss agrees
with arctl's (with Ray and TransferQueue stubbed, as on the device), part c counts recompilations
and part e tabulates memory; part d fails (never skips) when verl cannot be imported; results.json is
on disk after every part, also when the process is killed later; a part the budget cannot hold is
skipped with the reason."""

from __future__ import annotations

import importlib.util
import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from extras import NO_VERL, verl_missing  # tests/support/extras.py

pytestmark = pytest.mark.slow  # the GPU check suite in a process (CPU shapes)

SUITE = Path(__file__).resolve().parents[1] / "benchmarks" / "gpu" / "suite.py"
GIB = 2**30


def suite_args(out: Path, *extra: str) -> list[str]:
    return [sys.executable, str(SUITE), "--shape", "small", "--device", "cpu", "--repeats", "1", "--out", str(out),
            *extra]


def run_suite(out: Path, *extra: str) -> tuple[subprocess.CompletedProcess, dict]:
    proc = subprocess.run(suite_args(out, *extra), capture_output=True, text=True, timeout=900)
    results_file = out / "results.json"
    assert results_file.exists(), proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc, json.loads(results_file.read_text())


@pytest.fixture(scope="module")
def small_run(tmp_path_factory):
    """The whole suite at small shapes, as CI runs it; part d only where the verl extra is installed
    (left out on purpose otherwise, which the results must say)."""
    out = tmp_path_factory.mktemp("gpu-suite")
    extra = ["--parts", "abce"] if verl_missing() else ["--stub", "ray,transfer_queue"]  # the device has neither
    proc, results = run_suite(out, *extra)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return results, (out / "results.md").read_text()


def test_the_gpu_suite_runs_on_cpu_at_small_shapes(small_run):
    results, md = small_run
    assert results["ok"] and results["complete"] and not results["errors"] and set(results["parts"]) == set("abcde")
    a = results["parts"]["a"]
    assert a["status"] == "ok" and a["tree"]["length"] % 128 != 0 and a["tree"]["branches"] == 16
    fp32 = next(c for c in a["checks"] if c["dtype"] == "float32")
    assert fp32["logp_max_abs_diff"] < 1e-5 and fp32["grad_rel_err"] < 1e-5 and fp32["flex_forward_max_abs_diff"] < 1e-5
    b = results["parts"]["b"]["rows"]
    assert b["tree, dense SDPA mask"]["seconds"] > 0 and b["duplicated rows"]["seconds"] > 0
    d = results["parts"]["d"]
    if verl_missing():
        assert d["status"] == "skipped" and d["ok"] is None and "not requested" in d["skipped"]
        assert results["skipped"] == {"d": d["skipped"]} and "skipped: not requested" in md
    else:
        assert d["status"] == "ok" and d["patched"] and d["loss_abs_diff"] <= 1e-9
    for part in results["parts"].values():
        if part["status"] == "ok":
            assert part["seconds_total"] > 0 and part["estimate_s"] > 0  # the time accounting of --budget-s
    assert "## a. equivalence" in md and "all checks ok: True" in md


def test_part_c_counts_recompilations_per_micro_batch_eval_then_train(small_run):
    results, md = small_run
    c = results["parts"]["c"]
    assert c["status"] == "ok" and c["shapes_run"] == c["shapes_planned"] == 10 and not c.get("stopped_early")
    rows = c["rows"]
    assert [r["trees"] for r in rows] == [1, 2, 3, 1, 2, 3, 1, 2, 3, 1]
    assert len({r["padded_length"] for r in rows}) >= 5  # different tree lengths
    runs = [r[k] for r in rows for k in ("eval", "train")]
    for run in runs:
        assert all(isinstance(run[k], int) and run[k] >= 0 for k in
                   ("compiles", "recompiles", "graph_breaks", "recompile_limit_hits", "compile_failures"))
        assert len(run["recompile_reasons"]) == run["recompiles"]
    # counted from an emptied cache: the first eval forward compiles flex_attention, with no guard to fail
    assert rows[0]["eval"]["compiles"] >= 1 and rows[0]["eval"]["recompiles"] == 0
    assert "flex_attention" in rows[0]["eval"]["frames"]
    # lengths change: at least one recompilation, each with the guard that failed (a size mismatch)
    assert c["recompiles"] >= 1 and any("size mismatch" in r for run in runs for r in run["recompile_reasons"])
    assert c["recompiles"] == sum(run["recompiles"] for run in runs) == c["recompiles_eval"] + c["recompiles_train"]
    assert c["compiles"] == sum(run["compiles"] for run in runs)
    assert c["graph_breaks"] == 0 and c["recompile_limit_hits"] == 0 and c["compile_failures"] == 0 and not c["nan"]
    assert "| 10 | 1 | 15 |" in md and "recompile-limit hits" in md


def test_part_e_tabulates_the_memory_of_full_and_chunked_log_probs(small_run):
    results, md = small_run
    e = results["parts"]["e"]
    assert e["status"] == "ok" and e["model"]["tie_word_embeddings"] is False
    params, weights_gib = e["model"]["parameters"], e["model"]["weights_gib"]
    vocab = e["model"]["vocab_size"]
    # untied: the output layer is a second vocab x hidden matrix
    assert params > 2 * vocab * e["model"]["hidden_size"] and weights_gib == pytest.approx(params * 2 / GIB)
    rows = {(r["tokens"], r["pass"], r["variant"]): r for r in e["rows"]}
    assert set(rows) == {(n, p, v) for n in (256, 512, 1024) for p in ("old-log-prob", "update")
                         for v in ("full", "chunked")}
    for (n, pass_, variant), r in rows.items():
        assert r["logits_gib"] == pytest.approx(n * vocab * 2 / GIB)
        assert r["states_gib"] == pytest.approx(params * {"old-log-prob": 12, "update": 16}[pass_] / GIB)
        assert r["single_gpu_gib"] == pytest.approx(r["peak_gib"] + r["states_gib"])
        assert r["fits"] == {"80 GB": True, "40 GB": True}  # a 1M-parameter model
        if variant == "full":  # the model's logits and verl's [N, V] copy are alive at once
            assert r["peak_gib"] >= weights_gib + 2 * r["logits_gib"]
            assert rows[(n, pass_, "chunked")]["peak_gib"] < r["peak_gib"]
    # the full logits grow with N, the chunked log-probs do not hold them
    full = [rows[(n, "old-log-prob", "full")]["peak_gib"] for n in (256, 512, 1024)]
    assert full[0] < full[1] < full[2]
    assert rows[(1024, "old-log-prob", "chunked")]["peak_gib"] < weights_gib + rows[(1024, "old-log-prob", "full")]["logits_gib"]
    assert "| pass | log-probs | N tokens (rows x length) |" in md and "| update | full | 1,024 (4 x 256) |" in md


def test_part_d_fails_when_verl_is_not_importable(tmp_path):
    proc, results = run_suite(tmp_path, "--parts", "ad", "--hide", "verl", "--stub", "ray,transfer_queue")
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    d = results["parts"]["d"]
    assert d["status"] == "failed" and d["ok"] is False and not results["ok"]
    assert "ModuleNotFoundError" in d["error"] and "'verl'" in d["error"] and results["errors"] == {"d": d["error"]}
    assert results["parts"]["a"]["status"] == "ok"  # the part before it keeps its numbers
    assert "**FAILED**: RuntimeError: verl's code is not importable" in (tmp_path / "results.md").read_text()


def test_results_are_on_disk_after_each_part_when_the_process_is_killed_later(tmp_path):
    """As a device call killed at its time limit: the suite is killed (SIGKILL, nothing runs after it)
    as soon as it announces part b; part a's numbers are in results.json and results.md already."""
    proc = subprocess.Popen(suite_args(tmp_path, "--parts", "ab"), stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)
    seen = []
    for line in proc.stdout:
        seen.append(line)
        if "part b: start" in line:
            proc.send_signal(signal.SIGKILL)
            break
    proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGKILL, "".join(seen)[-3000:]
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["parts"]["a"]["status"] == "ok" and results["parts"]["a"]["checks"]
    assert results["parts"]["b"]["status"] == "running"
    md = (tmp_path / "results.md").read_text()
    assert "| a | ok |" in md and "running (the call ended before this part finished)" in md


def test_a_part_the_budget_cannot_hold_is_skipped_with_the_reason(tmp_path):
    proc, results = run_suite(tmp_path, "--parts", "a", "--budget-s", "1")
    a = results["parts"]["a"]
    assert a["status"] == "skipped" and a["skipped"].startswith("budget: needs ~30 s")
    assert not results["complete"] and not results["ok"] and proc.returncode == 1  # nothing was checked
    assert "| a | skipped |" in (tmp_path / "results.md").read_text()


@pytest.mark.skipif(verl_missing(), reason=NO_VERL)
def test_part_d_runs_with_only_the_device_image_and_the_carried_wheels(tmp_path):
    """docs/gpu.md's wheel list (stub_imports.CARRIED) is enough: every installed package the device
    image lacks is hidden, Ray and TransferQueue are stubbed, and part d passes."""
    proc, results = run_suite(tmp_path, "--parts", "d", "--as-device", "--stub", "ray,transfer_queue")
    assert proc.returncode == 0 and results["parts"]["d"]["status"] == "ok", \
        results["parts"]["d"].get("error", "") + proc.stderr[-2000:]


def load_suite():
    spec = importlib.util.spec_from_file_location("gpu_suite_module", SUITE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_count_compiles_counts_what_dynamo_does():
    import torch
    import torch._dynamo

    count = load_suite().count_compiles
    torch._dynamo.reset()
    try:
        f = torch.compile(lambda x: x.sin() + 1, backend="eager")
        first = count(lambda: f(torch.ones(3)))
        assert (first["compiles"], first["recompiles"], first["graph_breaks"]) == (1, 0, 0)
        assert count(lambda: f(torch.ones(3)))["compiles"] == 0  # cached
        second = count(lambda: f(torch.ones(5)))  # another size: a guard fails
        assert second["recompiles"] == 1 and "size mismatch" in second["recompile_reasons"][0]

        def breaks(x):
            x = x.cos()
            torch._dynamo.graph_break()
            return x + 1

        assert count(lambda: torch.compile(breaks, backend="eager")(torch.ones(2)))["graph_breaks"] >= 1
        with torch._dynamo.config.patch(recompile_limit=1):
            g = torch.compile(lambda x: x * 2, backend="eager")
            g(torch.ones(2))
            hit = count(lambda: g(torch.ones(2, dtype=torch.float64)))  # needs a 2nd entry: over the limit
        assert hit["recompile_limit_hits"] == 1 and hit["compile_failures"] == 0
    finally:
        torch._dynamo.reset()
