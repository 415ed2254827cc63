"""arctl.track.writer: the W&B conventions trainers rely on."""

import pytest

from arctl.track.writer import open_run, wandb_init_kwargs


def _config(**extra):
    return {"experiment": "ablation-vr", "arm": "grpo-vr", "seed": 2, "run_id": "r1",
            "wandb": {"project": "p", "mode": "offline"}, **extra}


def test_init_kwargs_follow_the_conventions(tmp_path):
    kw = wandb_init_kwargs(_config(), tmp_path)
    assert kw["project"] == "p" and kw["group"] == "ablation-vr" and kw["name"] == "grpo-vr-s2"
    assert kw["dir"] == str(tmp_path / "wandb") and kw["mode"] == "offline"
    assert kw["id"] == "r1" and kw["resume"] == "allow"
    assert kw["config"]["arm"] == "grpo-vr"
    sweep = _config(wandb={"project": "p", "group": "priors"})
    assert wandb_init_kwargs(sweep, tmp_path)["group"] == "priors"
    assert wandb_init_kwargs({"arm": "a", "seed": 0}, tmp_path)["mode"] == "offline"
    assert wandb_init_kwargs(_config(run_id="a/b c:d"), tmp_path)["id"] == "a-b-c-d"
    # the launcher's wandb.id (suffixed after a --force rerun) wins over the run id
    forced = _config(wandb={"project": "p", "id": "r1-g2"})
    assert wandb_init_kwargs(forced, tmp_path)["id"] == "r1-g2"
    with pytest.raises(ValueError, match="wandb.mode"):
        wandb_init_kwargs(_config(wandb={"mode": "cloud"}), tmp_path)


def test_open_run_sets_flush_interval_and_step_metric(tmp_path):
    from arctl.track.wandb_offline import read_wandb_file

    run = open_run(_config(), tmp_path, flush_interval_s=1.5)
    try:
        assert run.settings.x_transaction_log_flush_interval == 1.5
        assert run.settings.mode == "offline"
        run.log({"trainer/global_step": 7, "train/loss": 0.25})
        run.summary["best/acc"] = 0.75  # a summary-only key, set explicitly
    finally:
        run.finish()
    import wandb

    wandb.teardown()
    (path,) = {p.resolve() for p in (tmp_path / "wandb").rglob("run-*.wandb")}
    data = read_wandb_file(path)
    assert data.name == "grpo-vr-s2" and data.group == "ablation-vr"
    assert data.column("train/loss").tolist() == [0.25]
    assert data.column("trainer/global_step").tolist() == [7]
    assert data.summary["best/acc"] == 0.75
    assert read_wandb_file(path, summary=False).summary["best/acc"] == 0.75  # from the summary tail
