"""Registry.add_members: the runs a name lists beside its own (an experiment whose shared arm another experiment's
run serves, ``share_arms``; a sweep's runs that `arctl repair` rebuilds).

From the third mutation hunt of the launch layer: an add_members that added nothing was caught only by the slow
test_shared_arms (then `arctl status B` did not list the shared arm's run); this is its quick check."""

from __future__ import annotations

from arctl.launch.registry import Registry, RunRecord, new_claim_token


def _ids(reg: Registry, name: str) -> list[str]:
    return [r.run_id for r in reg.list(name)]


def test_a_name_lists_the_runs_added_to_it_once_and_nothing_else(tmp_path):
    with Registry(tmp_path / "registry.sqlite") as reg:
        reg.claim([RunRecord(run_id=f"r{i}", experiment="A", arm="a", seed=i) for i in range(3)], new_claim_token())
        assert (_ids(reg, "A"), _ids(reg, "B"), reg.names()) == (["r0", "r1", "r2"], [], {"A"})
        reg.add_members([("B", "r0"), ("B", "r2")])
        reg.add_members([("B", "r0")])  # already there: kept, not listed twice
        reg.add_members([])
        assert (_ids(reg, "A"), _ids(reg, "B"), reg.names()) == (["r0", "r1", "r2"], ["r0", "r2"], {"A", "B"})
    with Registry(tmp_path / "registry.sqlite") as again:  # written, not only seen by the writer
        assert _ids(again, "B") == ["r0", "r2"]
