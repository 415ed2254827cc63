"""What the run registry decides on claims where a mutation hunt (regprov, HEAD 825943f) found no test saying it:
a launch on another host that died, a ``--force`` of a run that is not completed, and what a new attempt of a run
keeps of its last one (the next ``arctl status`` shows it)."""

from __future__ import annotations

import os
import sqlite3
import time
from pathlib import Path

import pytest

from arctl.launch import states
from arctl.launch.registry import Registry, RegistryError, RunRecord, new_claim_token

OTHER_HOST = "no-such-host.invalid:4242:dead"  # a claim of a launch on another machine: its pid cannot be asked


def _rec(run_id: str) -> RunRecord:
    return RunRecord(run_id=run_id, experiment="e", arm="a", seed=0)


def _age(reg: Registry, run_id: str, seconds: float) -> None:
    """Make the claim on ``run_id`` look ``seconds`` old (its launch stopped renewing it then)."""
    assert reg.update_if(run_id, {}, {"updated_at": time.time() - seconds}, touch=False)


def test_a_claim_of_a_launch_on_another_host_is_kept_while_fresh_and_taken_once_it_is_old(tmp_path):
    """A launch on another machine cannot be asked whether it lives: its claim (renewed while it lives) is left to
    it while fresh, and once it is older than 10 minutes the next `arctl sweep` launches the run (else a launch
    that died on a login node left its runs "already submitting" for ever)."""
    with Registry(tmp_path / "r.sqlite") as reg:
        reg.claim([_rec("new"), _rec("broke")], new_claim_token())
        reg.update("broke", state=states.FAILED, claim=None, error="OOM", generation=1)
        reg.claim([_rec("new")], OTHER_HOST)  # (the launch that made the row died: the row is there, SUBMITTING)
        reg.update("new", state=states.SUBMITTING, claim=OTHER_HOST, before_claim=None)
        reg.claim([_rec("broke")], OTHER_HOST)
        fresh = reg.claim([_rec("new"), _rec("broke")], new_claim_token())
        assert fresh.claimed == [] and {why for _, why in fresh.skipped} == {"already submitting"}
        for run_id in ("new", "broke"):
            _age(reg, run_id, 11 * 60)  # (claim_is_stale: "older than 10 min")
        old = reg.claim([_rec("new"), _rec("broke")], new_claim_token())
        assert sorted(r.run_id for r in old.claimed) == ["broke", "new"] and old.skipped == []
        broke = reg.get("broke")
        assert (broke.state, broke.generation) == (states.SUBMITTING, 1)  # resumed, as the dead claim found it
        assert broke.previous["state"] == states.FAILED and broke.previous["error"] == "OOM"


def test_a_forced_relaunch_of_a_failed_run_resumes_it_in_its_wandb_run(tmp_path):
    """`--force` starts a completed run afresh (a new generation: a fresh W&B run id); a failed, preempted or
    cancelled run it names is resumed as without --force: same generation, same W&B run."""
    with Registry(tmp_path / "r.sqlite") as reg:
        reg.claim([_rec("f"), _rec("p"), _rec("c"), _rec("done")], new_claim_token())
        reg.update_many([("f", {"state": states.FAILED, "claim": None, "generation": 1}),
                         ("p", {"state": states.PREEMPTED, "claim": None}),
                         ("c", {"state": states.CANCELLED, "claim": None}),
                         ("done", {"state": states.COMPLETED, "claim": None})])
        got = {r.run_id: r for r in reg.claim([_rec(r) for r in ("f", "p", "c", "done")], new_claim_token(),
                                              force=True).claimed}
        assert {k: (r.generation, r.wandb_run_id) for k, r in got.items()} == {
            "f": (1, "f-g1"), "p": (0, "p"), "c": (0, "c"), "done": (1, "done-g1")}
        assert {k: reg.get(k).generation for k in got} == {"f": 1, "p": 0, "c": 0, "done": 1}
        # --force naming some runs: a completed run it does not name stays completed, skipped
        reg.update_many([(r, {"state": states.COMPLETED, "claim": None}) for r in got])
        some = reg.claim([_rec("f"), _rec("done")], new_claim_token(), force={"f"})
        assert [r.run_id for r in some.claimed] == ["f"] and [r.run_id for r, _ in some.skipped] == ["done"]
        assert reg.get("done").state == states.COMPLETED


def test_a_sweep_lists_the_runs_it_names_that_another_sweep_completed(tmp_path):
    """`arctl sweep s2` whose cells another sweep already completed skips them ("completed"), and `arctl status s2`
    lists them all the same: the names of a launch are attached to every run it wants, launched or skipped."""
    with Registry(tmp_path / "r.sqlite") as reg:
        reg.claim([_rec("r1"), _rec("r2")], new_claim_token(), members=["s1"])
        reg.update_many([(r, {"state": states.COMPLETED, "claim": None}) for r in ("r1", "r2")])
        second = reg.claim([_rec("r1"), _rec("r2"), _rec("r3")], new_claim_token(), members=["s2"])
        assert [r.run_id for r in second.claimed] == ["r3"] and len(second.skipped) == 2
        assert [r.run_id for r in reg.list("s2")] == ["r1", "r2", "r3"]
        assert [r.run_id for r in reg.list("s1")] == ["r1", "r2"]


def test_a_relaunched_run_shows_neither_its_last_error_nor_its_last_cancel(tmp_path):
    """While a failed or cancelled run is submitted again, `arctl status` must not show the last attempt's error
    or say a cancel was asked of it (the new job would be taken for cancelled); a refused submission gives both
    back."""
    with Registry(tmp_path / "r.sqlite") as reg:
        reg.claim([_rec("f"), _rec("c")], new_claim_token())
        reg.update_many([("f", {"state": states.FAILED, "claim": None, "error": "out of memory"}),
                         ("c", {"state": states.CANCELLED, "claim": None, "cancel_requested": 123.0})])
        token = new_claim_token()
        claimed = reg.claim([_rec("f"), _rec("c")], token).claimed
        for run_id in ("f", "c"):
            row = reg.get(run_id)
            assert (row.state, row.error, row.cancel_requested) == (states.SUBMITTING, None, None)
        reg.unclaim(claimed, token)
        f, c = reg.get("f"), reg.get("c")
        assert (f.state, f.error, c.state, c.cancel_requested) == (states.FAILED, "out of memory", states.CANCELLED,
                                                                   123.0)


def test_a_refused_submission_of_a_new_run_leaves_no_trace_in_the_registry(tmp_path):
    """A launch whose submission was refused (sbatch said no) undoes its claim: the new run's row and its sweep
    membership go, so the registry holds no sweep without runs; a run it re-claimed keeps its memberships."""
    with Registry(tmp_path / "r.sqlite") as reg:
        reg.claim([_rec("old")], new_claim_token(), members=["s1"])
        reg.update("old", state=states.FAILED, claim=None)
        token = new_claim_token()
        claimed = reg.claim([_rec("old"), _rec("new")], token, members=["s2"]).claimed
        reg.unclaim(claimed, token)
        assert reg.get("new") is None and reg.get("old").state == states.FAILED
        assert reg.names() == {"e", "s1", "s2"} and [r.run_id for r in reg.list("s2")] == ["old"]
        reg.claim([_rec("other")], token, members=["s3"])
        reg.unclaim([_rec("other")], token)
        assert reg.names() == {"e", "s1", "s2"}


def test_a_cancel_asked_during_the_launch_ends_the_run_cancelled_and_only_that_run(tmp_path):
    """`arctl cancel` while a launch submits: the launch's record of the submitted job gets the cancel's values
    over it for the run whose cancel was asked, the others get the launch's own."""
    with Registry(tmp_path / "r.sqlite") as reg:
        token = new_claim_token()
        reg.claim([_rec("asked"), _rec("other")], token)
        reg.update_if("asked", {"claim": token}, {"cancel_requested": 5.0})
        submitted = {"state": states.PENDING, "job_id": "77", "claim": None}
        lost, stopped = reg.update_claimed(token, [("asked", submitted), ("other", {**submitted, "job_id": "78"})],
                                           cancelled={"state": states.CANCELLED})
        assert (lost, stopped) == ([], ["asked"])
        assert (reg.get("asked").state, reg.get("asked").job_id) == (states.CANCELLED, "77")
        assert (reg.get("other").state, reg.get("other").job_id) == (states.PENDING, "78")


def test_status_lists_seeds_in_number_order(tmp_path):
    """`arctl status` lists a cell's seeds 2 before 10 (the run ids sort them the other way)."""
    with Registry(tmp_path / "r.sqlite") as reg:
        recs = [RunRecord(run_id=f"e_a_s{s}_0123456789", experiment="e", arm="a", seed=s) for s in (10, 2, 1)]
        reg.claim(recs, new_claim_token())
        assert [r.seed for r in reg.list()] == [1, 2, 10] and [r.seed for r in reg.list("e")] == [1, 2, 10]


def test_a_run_id_names_that_run_even_where_it_starts_others_and_underscore_is_no_wildcard(tmp_path):
    """`arctl cancel e_a_s1_x` names run e_a_s1_x, not also e_a_s1_xy its id starts; and a prefix matches
    character for character: ``e_a`` does not start ``eXa...`` (``_`` is SQL's one-character wildcard)."""
    with Registry(tmp_path / "r.sqlite") as reg:
        reg.claim([_rec(r) for r in ("e_a_s1_x", "e_a_s1_xy", "eXa_s1_x")], new_claim_token())
        assert [r.run_id for r in reg.find("e_a_s1_x")] == ["e_a_s1_x"]
        assert [r.run_id for r in reg.find("e_a")] == ["e_a_s1_x", "e_a_s1_xy"]


class _Failing:
    """A connection on which every statement fails as SQLite says ``message`` (a disk that fails under the WAL)."""

    def __init__(self, message: str):
        self.message = message

    def execute(self, *args, **kwargs):
        raise sqlite3.OperationalError(self.message)


@pytest.mark.parametrize(("message", "kind", "advice"), [
    ("disk I/O error", "full", "free some space and run the command again"),
    ("database is locked", "locked", "run the command again"),
])
def test_an_sqlite_failure_that_is_not_damage_does_not_send_the_user_to_repair(tmp_path, message, kind, advice):
    """SQLite's "disk I/O error" (a full or failing disk under the WAL) and "database is locked" are one line that
    says to free space or run the command again; only damage names `arctl repair` (which moves the file aside)."""
    with Registry(tmp_path / "registry.sqlite") as reg:
        real, reg._conn = reg._conn, _Failing(message)
        try:
            with pytest.raises(RegistryError) as caught:
                reg.list()
        finally:
            reg._conn = real
    said = str(caught.value)
    assert caught.value.kind == kind and advice in said and "repair" not in said and "\n" not in said


def test_a_dry_run_of_a_registry_this_user_cannot_write_opens_it_read_only_and_leaves_no_file(tmp_path, monkeypatch):
    """A colleague's registry (theirs, 0644) in a folder this user may write: what only reads it (a plan, a dry run)
    opens it read-only and makes no -wal/-shm file of this user beside it (the owner could not write those)."""

    path = tmp_path / "registry.sqlite"
    with Registry(path) as reg:
        reg.claim([_rec("r1")], new_claim_token())
    assert not path.with_name("registry.sqlite-shm").exists()
    real = os.access
    # (tests run as root, whom no mode refuses: the colleague's file is refused by os.access as for another user)
    monkeypatch.setattr(os, "access", lambda p, mode, **kw: False if Path(p) == path and mode & os.W_OK
                        else real(p, mode, **kw))
    with Registry.for_reading(path) as view:
        assert [r.run_id for r in view.list()] == ["r1"]
        assert view.readonly
        assert sorted(p.name for p in tmp_path.iterdir()) == ["registry.sqlite"]
        with pytest.raises(RegistryError):
            view.update("r1", state=states.FAILED)


def test_a_registry_of_an_older_arctl_keeps_the_values_written_into_its_new_columns(tmp_path):
    """An older arctl's registry (no step, metric, phase, warning or cancel columns yet) gets them on the first open
    of a newer arctl; what a job then records there reads back as written (a step 40, never 40.0: that is refused as
    a damaged row, and `arctl status` of the whole workspace fails), so `arctl status` shows it."""
    path = tmp_path / "registry.sqlite"
    with Registry(path) as reg:
        reg.claim([_rec("r1")], new_claim_token())
    added = ("step", "metric_value", "metric_nonfinite", "phase", "cancel_requested", "warning")
    with sqlite3.connect(path) as conn:
        for column in added:
            conn.execute(f"ALTER TABLE runs DROP COLUMN {column}")
    conn.close()
    with Registry(path) as reg:
        reg.update("r1", state=states.RUNNING, claim=None, step=40, metric_value=0.5, phase="12", warning="7",
                   cancel_requested=1700000000.25)
    with Registry(path) as reg:
        row = reg.get("r1")
    assert (row.step, row.metric_value, row.phase, row.warning, row.cancel_requested) == (40, 0.5, "12", "7",
                                                                                          1700000000.25)
    assert isinstance(row.step, int) and isinstance(row.phase, str)


def test_a_prefix_starts_a_run_id_case_for_case(tmp_path):
    """`arctl status/logs/cancel/resume PREFIX` (:meth:`Registry.find`) matches a prefix case for case, as the exact
    id is (from a hunt: SQL's LIKE ignores ASCII case, so `arctl cancel LT_A_S0_ABC` cancelled run lt_a_s0_abc);
    `_`, `%` and `\\` are plain characters of a prefix."""
    with Registry(tmp_path / "registry.sqlite") as reg:
        reg.claim([RunRecord(run_id="lt_a_s0_abc", experiment="lt", arm="a", seed=0)], new_claim_token())
        assert [r.run_id for r in reg.find("lt_a")] == ["lt_a_s0_abc"]
        assert reg.get("LT_A_S0_ABC") is None
        assert reg.find("LT_A_S0_ABC") == [] and reg.find("LT_A") == []  # before: [lt_a_s0_abc] for both
        assert reg.find("lt%") == [] and reg.find("lt_a_s0_ab") != [] and reg.find("lt_a\\") == []
