"""`arctl status SWEEP` where its cache of composed cells has no key (from the hunt "cli", 2026-12-07: a mutant of
arctl/cli/launching.py's ComposedCache that the suite let through): what the composition reads could not be listed (a
spec removed while listed, an installed package's broken entry points), so nothing is cached, and the sweep is
composed as without a cache: its runs are judged all the same (the mutant crashed with a TypeError, a traceback)."""

from __future__ import annotations

import json

EVX = ("description: x\nseeds: [0, 1]\narms:\n  grpo: [algo=grpo, prior=base]\n"
       "  grpo-vr: [algo=grpo-vr, prior=base]\n")


def test_a_sweeps_status_without_a_cache_key_judges_its_runs(sandbox, monkeypatch):
    from arctl.cli import launching
    from arctl.cli.launching import sweep_items
    from arctl.launch.registry import Registry, new_claim_token
    from arctl.launch.rundir import prepare_run_dir
    from arctl.launch.workspace import Workspace

    (sandbox.specs / "experiments" / "evx.yaml").write_text(EVX)
    (sandbox.specs / "sweeps" / "evs.yaml").write_text("experiments: [evx]\nseeds: [0, 1]\n")
    ws = Workspace(sandbox.ws)
    items = sweep_items("evs", [], "tiny", None, str(sandbox.ws), False)
    with Registry(ws.registry_path) as reg:
        for item in items:
            prepare_run_dir(ws.run_dir(item.run_id), item.config)
        reg.claim([i.record() for i in items], new_claim_token(), members=["evs"])
        for item in items:
            reg.update(item.run_id, state="COMPLETED", claim=None, before_claim=None)

    def no_key():
        raise OSError("a spec removed while listed")

    monkeypatch.setattr(launching, "compose_inputs", no_key)
    res = sandbox.run("status", "evs", "--json", "--workdir", str(sandbox.ws), "--no-refresh")
    assert res.code == 0 and res.crash is None, res.err + (res.crash or "")
    assert sorted((d["run_id"], d["in_sweep"]) for d in json.loads(res.out)) == sorted((i.run_id, True) for i in items)
    assert not (sandbox.ws / ".arctl-cache" / "sweeps").exists()  # nothing kept
