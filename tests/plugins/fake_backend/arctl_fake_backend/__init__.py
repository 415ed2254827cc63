"""An out-of-tree arctl backend, as a third-party package writes one (tests/plugins).

It brings what a backend brings: its config section ``fake`` (typed: :class:`FakeConfig`, with a
range and a choice list), its scale profile (``conf/scale/fake.yaml``) and a ``train`` that logs
``trainer.total_steps`` steps to W&B. It is installed by an ``arctl.backends`` entry point
(the test writes the dist-info), never imported by arctl's own code.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from arctl.backends.base import BackendDefaults
from arctl.config.ranges import F, I
from arctl.config.schema import setting
from arctl.track.identity import WandbIdentity
from arctl.track.metrics_schema import STEP_KEY, TRAIN_LOSS


@dataclass
class FakeConfig:
    """``fake``: the fake backend's knobs."""

    width: int = setting(4, range=I(1, 64))
    mode: str = setting("fast", choices=("fast", "slow"))
    loss_scale: float = 1.0  # its range: config_ranges()


class FakeBackend(BackendDefaults):
    name = "fake"

    def settings_type(self):
        return FakeConfig

    def config_ranges(self):
        return {"fake.loss_scale": F(0, 10)}  # a typed key without a range on its field

    def conf_dir(self):
        return Path(__file__).resolve().parent / "conf"

    def train(self, config, run_dir, stop_event=None):
        run_dir = Path(run_dir)
        (run_dir / "fake_seen.json").write_text(json.dumps(config["fake"], sort_keys=True))
        identity = WandbIdentity.from_config(config, run_dir)
        import wandb

        run = wandb.init(**identity.init_kwargs({k: v for k, v in config.items() if k != "run_dir"}))
        run.define_metric(STEP_KEY)
        run.define_metric("*", step_metric=STEP_KEY)
        try:
            for step in range(1, int(config["trainer"]["total_steps"]) + 1):
                run.log({STEP_KEY: step, TRAIN_LOSS: config["fake"]["width"] / step})
        finally:
            run.finish()
        return "completed"


BACKEND = FakeBackend()
