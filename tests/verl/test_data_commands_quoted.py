"""The `arctl data prepare ...` command a verl run's missing or unconverted dataset names is quoted for a shell (from
the "quote" hunt: `verl.data_dir='/x/my data'` printed `--out /x/my data`, which pasted prepared into /x/my)."""

from __future__ import annotations

import re
import shlex

from omegaconf import OmegaConf

from arctl.backends.verl.run_config import inputs_problem

DATA_DIR = "/nonexistent/my data $x"


def _command(line: str) -> list[str]:
    found = re.findall(r"`(arctl data prepare [^`]*)`", line)
    assert len(found) == 1, line
    return shlex.split(found[0])


def test_a_missing_dataset_names_its_prepare_command_quoted(tmp_path):
    present = tmp_path / "t.jsonl"
    present.write_text('{"prompt": [{"role": "user", "content": "1+1"}], "reward_model": {"ground_truth": "2"}}\n')
    for eval_only, files in ((False, ("/nonexistent/a.parquet", str(present))),
                             (True, (str(present), "/nonexistent/b.parquet"))):
        cfg = OmegaConf.create({"data": {"train_files": files[0], "val_files": files[1]}})
        line = inputs_problem({"verl": {"data_dir": DATA_DIR, "eval_only": eval_only}}, cfg)
        assert _command(line)[-2:] == ["--out", DATA_DIR], line


def test_an_unconverted_dataset_names_its_prepare_command_quoted(tmp_path):
    raw = tmp_path / "a b" / "aime24" / "train.jsonl"  # the folder names the dataset
    raw.parent.mkdir(parents=True)
    raw.write_text('{"problem": "1+1", "answer": "2"}\n')
    cfg = OmegaConf.create({"data": {"train_files": str(raw), "val_files": str(raw)}})
    line = inputs_problem({"verl": {"data_dir": DATA_DIR}}, cfg)
    assert _command(line) == ["arctl", "data", "prepare", "--datasets", "aime24", "--source", f"aime24={raw}",
                              "--out", DATA_DIR], line
