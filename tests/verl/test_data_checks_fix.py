"""What is in a verl run's data files is checked before it queues, not only that they exist (from a hunt of the data
a paper-scale run trains on): a training file without ``reward_model.ground_truth`` trained to COMPLETED with every
reward 0; a raw problem/answer .jsonl failed at start with verl's ``num_samples=0``; an eval file whose data_source is
not a dataset the run evaluates wrote its metrics where no figure reads them. In the job, a row without a ground
truth fails the step naming it. And ``arctl data prepare``: a problem that already ends with the instruction, a
JSON Lines file named .json, a verl file given as a source. (Like every test of tests/verl, skipped without verl:
tests/verl/conftest.py.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from arctl.cli.main import app


def _verl_rows(name: str, split: str, n: int) -> list[dict]:
    from arctl.backends.verl.data import to_verl_rows

    return to_verl_rows([{"problem": f"What is 1 + {i}?", "answer": str(1 + i)} for i in range(n)], name, split)


@pytest.fixture
def data(tmp_path, monkeypatch) -> Path:
    """``ARCTL_DATA_DIR`` holding every dataset file of the paper scale's runs, as `arctl data prepare` writes them."""
    from arctl.backends.verl.data import DATASETS, write_parquet

    root = tmp_path / "data"
    for name, spec in DATASETS.items():
        write_parquet(_verl_rows(name, spec.split, 200 if spec.split == "train" else 4),
                      root / name / f"{spec.split}.parquet")
    monkeypatch.setenv("ARCTL_DATA_DIR", str(root))
    return root


def _config(*overrides: str) -> dict:
    from arctl.compose import resolve_experiment

    (run,) = resolve_experiment("main-grpo", scale="paper", overrides=["cluster=slurm", *overrides])
    return run.config


def _problem(*overrides: str, run_dir: Path) -> str | None:
    from arctl.backends.verl.run_config import launch_problem

    return launch_problem(_config(*overrides), run_dir)


def test_prepared_files_pass_and_a_training_file_without_ground_truths_is_refused(data, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    assert _problem(run_dir=tmp_path / "run") is None
    train = data / "deepscaler" / "train.parquet"
    rows = _verl_rows("deepscaler", "train", 200)
    pq.write_table(pa.table({"data_source": [r["data_source"] for r in rows], "prompt": [r["prompt"] for r in rows]}),
                   train)
    problem = _problem(run_dir=tmp_path / "run")
    assert problem is not None and "\n" not in problem, problem
    assert problem.startswith(f"dataset file {train} (data.train_files) is not a verl file as `arctl data prepare` "
                              "writes it: it has no reward_model.ground_truth"), problem
    assert f"arctl data prepare --datasets deepscaler --source deepscaler={train} --out {data}" in problem
    # reward_model as a JSON string (not a dict): the agent loop found no ground truth in it either
    pq.write_table(pa.table({"prompt": [r["prompt"] for r in rows],
                             "reward_model": [json.dumps(r["reward_model"]) for r in rows]}), train)
    assert "has no reward_model.ground_truth" in (_problem(run_dir=tmp_path / "run") or "")


def test_a_raw_problem_answer_jsonl_as_training_file_is_refused(data, tmp_path):
    raw = tmp_path / "raw.jsonl"
    raw.write_text("".join(json.dumps({"problem": f"What is {i}?", "answer": str(i)}) + "\n" for i in range(200)))
    problem = _problem(f"data.train_files={raw}", run_dir=tmp_path / "run")
    assert problem is not None and problem.startswith(
        f"dataset file {raw} (data.train_files) is not a verl file as `arctl data prepare` writes it: it has no prompt "
        "(a list of {role, content} messages) and no reward_model.ground_truth"), problem


def test_an_eval_file_of_a_data_source_the_run_does_not_evaluate_is_refused(data, tmp_path):
    from arctl.backends.verl.data import write_parquet

    aime = data / "aime24" / "test.parquet"
    write_parquet(_verl_rows("aime", "test", 4), aime)  # the authors' files say "aime"
    problem = _problem(run_dir=tmp_path / "run")
    assert problem is not None and problem.startswith(
        f"dataset file {aime} (data.val_files) holds rows of data_source aime, which the run does not evaluate "
        "(eval.datasets: "), problem
    assert "eval/aime/" in problem and "\n" not in problem
    ckpt = tmp_path / "other" / "checkpoints" / "global_step_40"
    ckpt.mkdir(parents=True)
    problem = _problem("verl.eval_only=true", f"verl.eval_checkpoint={ckpt}", "eval.final_datasets=[aime24]",
                       run_dir=tmp_path / "run")
    assert problem is not None and "(eval.final_datasets: aime24)" in problem, problem
    write_parquet(_verl_rows("aime24", "test", 4), aime)
    assert _problem(run_dir=tmp_path / "run") is None


def test_an_eval_only_runs_missing_eval_file_names_eval_final_datasets(data, tmp_path):
    ckpt = tmp_path / "other" / "checkpoints" / "global_step_40"
    ckpt.mkdir(parents=True)
    (data / "math500" / "test.parquet").unlink()
    problem = _problem("verl.eval_only=true", f"verl.eval_checkpoint={ckpt}", "eval.final_datasets=[math500]",
                       run_dir=tmp_path / "run")
    assert problem is not None and problem.startswith(f"dataset file {data / 'math500' / 'test.parquet'} does not "
                                                      "exist — an eval-only run evaluates"), problem
    assert "eval.final_datasets=[...]" in problem and "data.val_files" not in problem


def test_the_dry_run_refuses_a_training_file_without_ground_truths_in_one_line(data, tmp_path, monkeypatch):
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = _verl_rows("deepscaler", "train", 200)
    pq.write_table(pa.table({"prompt": [r["prompt"] for r in rows]}), data / "deepscaler" / "train.parquet")
    monkeypatch.delenv("ARCTL_VERL_LAUNCH_CHECK", raising=False)
    ws = tmp_path / "ws"
    res = CliRunner().invoke(app, ["run", "main-grpo", "--scale", "paper", "--executor", "slurm", "--workdir", str(ws),
                                   "cluster=slurm", "--dry-run"])
    assert res.exit_code == 2, res.output
    assert "a launch would be refused: main-grpo/grpo: dataset file" in res.stdout
    assert "has no reward_model.ground_truth" in res.stdout and not ws.exists()


def test_the_smoke_check_warns_of_a_file_not_in_verls_format(data, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from arctl.backends.verl.run_config import verl_run_config
    from arctl.backends.verl.smoke import check_data

    config = _config()
    _, cfg = verl_run_config(config, tmp_path / "run")
    assert check_data(config, cfg)[1] == []
    pq.write_table(pa.table({"prompt": ["q"] * 200}), data / "deepscaler" / "train.parquet")
    (warning,) = check_data(config, cfg)[1]
    assert "has no prompt (a list of {role, content} messages)" in warning and "the real run stops here" in warning


def test_a_row_without_a_ground_truth_raises_naming_it():
    from arctl.backends.verl.reward import row_ground_truth

    assert row_ground_truth({"reward_model": {"ground_truth": "7"}}) == "7"
    for reward_model in (None, json.dumps({"ground_truth": "7"}), {"style": "rule"}):
        with pytest.raises(ValueError) as info:
            row_ground_truth({"data_source": "deepscaler", "reward_model": reward_model, "extra_info": {"index": 12}})
        assert str(info.value).startswith("the row of data_source 'deepscaler', extra_info.index 12 has no "
                                          "reward_model.ground_truth"), info.value


# ------------------------------------------------------------------------------------------------ arctl data prepare


def test_a_problem_that_ends_with_the_instruction_gets_it_once():
    from arctl.backends.verl.data import PROMPT_SUFFIX, to_verl_rows

    records = [{"problem": "What is 1 + 1?" + PROMPT_SUFFIX, "answer": "2"},
               {"problem": "What is 1 + 2?" + PROMPT_SUFFIX + "\n", "answer": "3"},
               {"problem": "What is 1 + 3?", "answer": "4"}]
    contents = [r["prompt"][0]["content"] for r in to_verl_rows(records, "aime24", "test")]
    assert [c.count(PROMPT_SUFFIX.strip()) for c in contents] == [1, 1, 1]
    assert contents[2] == "What is 1 + 3?" + PROMPT_SUFFIX


def test_a_json_lines_file_named_json_is_read(tmp_path):
    from arctl.backends.verl.data import read_records

    path = tmp_path / "aime.json"
    path.write_text('{"problem": "a", "answer": "1"}\n{"problem": "b", "answer": "2"}\n')
    assert read_records(path) == [{"problem": "a", "answer": "1"}, {"problem": "b", "answer": "2"}]
    (tmp_path / "bad.json").write_text('{"problem": "a"')  # other malformed JSON: still one line
    with pytest.raises(Exception, match="cannot read"):
        read_records(tmp_path / "bad.json")


def test_a_verl_file_given_as_a_source_says_it_is_one(tmp_path):
    from arctl.backends.verl.data import DataError, prepare, write_parquet

    source = tmp_path / "aime.parquet"
    write_parquet(_verl_rows("aime", "test", 3), source)
    with pytest.raises(DataError) as info:
        prepare(tmp_path / "out", ["aime24"], {"aime24": source}, use_hub=False)
    assert "row 0 is already a verl row" in str(info.value) and "data.val_files" in str(info.value), info.value
    assert not (tmp_path / "out").exists()
