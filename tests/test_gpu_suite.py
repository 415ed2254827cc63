"""The GPU check suite (benchmarks/gpu/suite.py) runs on CPU at small shapes, so it cannot rot between
the sessions that have a GPU: every part runs, the equivalence checks pass, and verl's own loss
agrees with arctl's (with Ray and TransferQueue stubbed, as on the device)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from extras import verl_missing  # tests/support/extras.py

pytestmark = pytest.mark.slow  # the GPU check suite in a process (CPU shapes)

SUITE = Path(__file__).resolve().parents[1] / "benchmarks" / "gpu" / "suite.py"


def test_the_gpu_suite_runs_on_cpu_at_small_shapes(tmp_path):
    args = [sys.executable, str(SUITE), "--shape", "small", "--device", "cpu", "--repeats", "1", "--out", str(tmp_path)]
    if not verl_missing():
        args += ["--stub", "ray,transfer_queue"]  # what the device machine needs: no Ray, no TransferQueue there
    proc = subprocess.run(args, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["ok"] and set(results["parts"]) == set("abcd") and not results["errors"]
    a = results["parts"]["a"]
    assert a["tree"]["length"] % 128 != 0 and a["tree"]["branches"] == 16  # the paper's tree shape, scaled
    fp32 = next(c for c in a["checks"] if c["dtype"] == "float32")
    assert fp32["logp_max_abs_diff"] < 1e-5 and fp32["grad_rel_err"] < 1e-5 and fp32["flex_forward_max_abs_diff"] < 1e-5
    b = results["parts"]["b"]["rows"]
    assert b["tree, dense SDPA mask"]["seconds"] > 0 and b["duplicated rows"]["seconds"] > 0
    c = results["parts"]["c"]
    assert not c["nan"] and c["eager_fallbacks"] == 0 and c["micro_batches"] == [1, 2, 3, 1, 2]
    d = results["parts"]["d"]
    if not verl_missing():
        assert "skipped" not in d and d["patched"] and d["loss_abs_diff"] <= 1e-9
    md = (tmp_path / "results.md").read_text()
    assert "## a. equivalence" in md and "all checks ok: True" in md
