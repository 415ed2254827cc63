"""What `arctl data prepare` writes for the paper's datasets, and what the pre-launch checks read back of a verl file
(from a mutation hunt of arctl/backends/verl/data.py: each test here failed on a mutant that every other test passed).
A wrong prompt, hub dataset, split or file is found only on a GPU cluster; these pin them on CPU, the hub faked.
(Like every test of tests/verl, skipped without verl: tests/verl/conftest.py.)"""

from __future__ import annotations

import json

import pandas as pd
import pytest

# the authors' data script (AnytimeReasoner's scripts/data/deepscaler_dataset.py) writes f"{question} {instruction}"
AUTHORS_INSTRUCTION = "Let's think step by step and output the final answer within \\boxed{}."


def test_the_prompt_is_the_authors_problem_space_instruction_letter_for_letter():
    """The prompt every paper number was trained and evaluated on, written out (not through PROMPT_SUFFIX, which
    the other tests compare with): a reworded or unspaced instruction changes the model's inputs, no error said."""
    from arctl.backends.verl.data import to_verl_rows

    (row,) = to_verl_rows([{"problem": "What is $1+1$?", "answer": "2"}], "aime24", "test")
    assert row["prompt"] == [{"role": "user", "content": "What is $1+1$? " + AUTHORS_INSTRUCTION}]


# name: (the hub dataset, its config, its split; the file the run reads; one row as that dataset writes it)
HUB = {
    "deepscaler": ("agentica-org/DeepScaleR-Preview-Dataset", None, "train", "deepscaler/train.parquet",
                   {"problem": "Find n.", "answer": "12", "solution": "..."}),
    "aime24": ("HuggingFaceH4/aime_2024", None, "train", "aime24/test.parquet",
               {"id": 60, "problem": "Find n.", "solution": "...", "answer": "12", "url": "u", "year": "2024"}),
    "amc22": ("AI-MO/aimo-validation-amc", None, "train", "amc22/test.parquet",
              {"id": 0, "problem": "Find n.", "answer": 12.0, "url": "u"}),
    "math500": ("HuggingFaceH4/MATH-500", None, "test", "math500/test.parquet",
                {"problem": "Find n.", "solution": "...", "answer": "12", "subject": "Algebra", "level": 1,
                 "unique_id": "test/x.json"}),
    "minerva": ("math-ai/minervamath", None, "test", "minerva/test.parquet", {"question": "Find n.", "answer": "12"}),
    "olympiadbench": ("Hothan/OlympiadBench", "OE_TO_maths_en_COMP", "train", "olympiadbench/test.parquet",
                      {"id": 1, "question": "Find n.", "solution": ["..."], "final_answer": ["$12$"], "context": None}),
}


def test_each_dataset_is_read_from_its_hub_dataset_and_split_and_written_where_the_run_reads_it(tmp_path, monkeypatch):
    """`arctl data prepare` with the hub (faked: no network in tests): which hub dataset, config and split each name
    downloads (another config of OlympiadBench is another benchmark, with no error; MATH-500 has no train split), and
    the file each is written to (a run reads OUT/<name>/test.parquet for an eval set, OUT/deepscaler/train.parquet),
    and the row count each is checked against."""
    datasets = pytest.importorskip("datasets")
    from arctl.backends.verl import data

    asked = []

    def load_dataset(path, name=None, split=None, **kwargs):
        asked.append((path, name, split))
        (row,) = [h[4] for h in HUB.values() if h[0] == path]
        return [dict(row)]

    monkeypatch.setattr(data, "hub_unreachable", lambda: None)
    monkeypatch.setattr(datasets, "load_dataset", load_dataset)
    summary = data.prepare(tmp_path / "out", list(HUB))
    assert asked == [h[:3] for h in HUB.values()]
    assert [(r["dataset"], r["rows"], r["path"]) for r in summary] == [
        (name, 1, str(tmp_path / "out" / h[3])) for name, h in HUB.items()]
    # the row counts the summary compares with: the paper's (reference notes, "Eval sizes"; DeepScaleR 40,315)
    assert [r["expected"] for r in summary] == [40315, 30, 83, 500, 272, 675]
    for name, h in HUB.items():
        (row,) = pd.read_parquet(tmp_path / "out" / h[3]).to_dict("records")
        assert row["data_source"] == name
        assert row["prompt"][0]["content"] == "Find n. " + AUTHORS_INSTRUCTION
        assert row["reward_model"]["ground_truth"] == "12", name
        assert row["extra_info"] == {"split": "train" if name == "deepscaler" else "test", "index": 0}


def test_an_empty_alternative_is_no_answer_so_an_empty_box_scores_0():
    """A list of answers with an empty one (a cell left blank): the empty text is no acceptable answer; kept, it
    would be the ground truth, and `\\boxed{}` would score 1 under the authors' grader."""
    from arctl.algo.verify import DEFAULT_GRADER, grade
    from arctl.backends.verl.data import to_verl_rows
    from arctl.backends.verl.reward import ground_truth_of

    (row,) = to_verl_rows([{"problem": "p", "final_answer": ["", "3"]}], "olympiadbench", "test")
    assert row["reward_model"]["ground_truth"] == "3" and row["reward_model"]["alternatives"] == []
    gold = ground_truth_of(row["reward_model"])
    assert grade("**Final Answer**\n\\boxed{}", gold, DEFAULT_GRADER) == 0
    assert grade("**Final Answer**\n\\boxed{3}", gold, DEFAULT_GRADER) == 1


def _verl_row(**fields) -> dict:
    row = {"data_source": "aime24", "prompt": [{"role": "user", "content": "q"}], "ability": "math",
           "reward_model": {"style": "rule", "ground_truth": "1"}, "extra_info": {"split": "test", "index": 0}}
    row.update(fields)
    return {k: v for k, v in row.items() if v is not None}


@pytest.mark.parametrize("suffix", [".jsonl", ".json"])
def test_a_json_verl_file_is_read_for_its_data_source_like_a_parquet_one(tmp_path, suffix):
    """The pre-launch check of an eval file in JSON (verl reads those too): its data_source values (a stray one is
    refused: its metrics would be written where no report reads them), and whether it has the column at all."""
    from arctl.backends.verl.data import data_sources_of, verl_file_lacks

    rows = [_verl_row(), _verl_row(data_source="gsm8k")]
    path = tmp_path / f"val{suffix}"
    path.write_text("\n".join(json.dumps(r) for r in rows) if suffix == ".jsonl" else json.dumps(rows))
    assert data_sources_of(path) == {"aime24", "gsm8k"}
    assert verl_file_lacks(path, data_source=True) == []
    path.write_text(json.dumps(_verl_row(data_source=None)) if suffix == ".jsonl" else json.dumps([_verl_row(data_source=None)]))
    assert verl_file_lacks(path, data_source=True) == ["data_source (the name its metrics are written under)"]
    assert verl_file_lacks(path) == []  # a training file needs none


def test_a_parquet_verl_file_with_large_list_prompts_is_a_verl_file(tmp_path):
    """A prompt column of large_list<struct<role, content>> (polars writes lists so) is a list of chat messages as
    much as a list<...> one: refusing it would refuse a good file before launch."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from arctl.backends.verl.data import verl_file_lacks

    message = pa.struct([("role", pa.string()), ("content", pa.string())])
    table = pa.table({
        "data_source": ["aime24"],
        "prompt": pa.array([[{"role": "user", "content": "q"}]], type=pa.large_list(message)),
        "reward_model": [{"style": "rule", "ground_truth": "1"}],
    })
    pq.write_table(table, tmp_path / "val.parquet")
    assert verl_file_lacks(tmp_path / "val.parquet", data_source=True) == []


@pytest.mark.parametrize("key", ["data", "rows", "problems"])
def test_a_json_object_holding_its_problems_under_a_key_is_read(tmp_path, key):
    """read_records' docstring: a JSON object with the list under "data"; "rows" and "problems" too."""
    from arctl.backends.verl.data import read_records

    path = tmp_path / "src.json"
    path.write_text(json.dumps({key: [{"problem": "p", "answer": "1"}], "meta": {"n": 1}}))
    assert read_records(path, "test", "train") == [{"problem": "p", "answer": "1"}]


def test_a_parquet_file_whose_reward_model_has_no_ground_truth_lacks_it(tmp_path):
    """A reward_model column without a ground_truth field (an answer under another name): every reward would be 0,
    so the pre-launch check names what it lacks, as it does for a file with no reward_model at all."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from arctl.backends.verl.data import verl_file_lacks

    table = pa.table({"data_source": ["aime24"], "prompt": [[{"role": "user", "content": "q"}]],
                      "reward_model": [{"style": "rule", "answer": "1"}]})
    pq.write_table(table, tmp_path / "train.parquet")
    assert verl_file_lacks(tmp_path / "train.parquet") == [
        "reward_model.ground_truth (the answer each reward is checked against)"]


@pytest.mark.parametrize("record", [{"answer": "1"}, {"problem": "  \n", "answer": "1"}, {"question": None, "answer": "1"}])
def test_a_row_without_problem_text_is_one_line_naming_it(record):
    """A record with no problem, or a blank one: refused with its row (not a prompt of the instruction alone, not a
    traceback)."""
    from arctl.backends.verl.data import DataError, to_verl_rows

    with pytest.raises(DataError, match=r"^src.jsonl: row 1 has no problem text \(looked for problem, question"):
        to_verl_rows([{"problem": "p", "answer": "2"}, record], "math500", "test", "src.jsonl")


def test_a_blank_field_gives_way_to_the_next_key_that_holds_a_value():
    """A source whose first problem or answer column is empty in a row (``answer: ""`` beside ``final_answer``, a
    blank ``problem`` beside ``question``, an empty list): the row's problem and answer are those the next key
    holds, not "no answer" (it refused a row that has one); with none at all, still refused naming the row."""
    from arctl.backends.verl.data import DataError, to_verl_rows

    (row,) = to_verl_rows([{"problem": " ", "question": "What is 2+2?", "answer": "", "final_answer": ["4"]}],
                          "olympiadbench", "test")
    assert row["reward_model"]["ground_truth"] == "4" and row["prompt"][0]["content"].startswith("What is 2+2?")
    (row,) = to_verl_rows([{"problem": "p", "answer": [], "ground_truth": "7"}], "aime", "test")
    assert row["reward_model"]["ground_truth"] == "7"
    with pytest.raises(DataError, match=r"^src.jsonl: row 0 has no answer \(looked for answer, final_answer"):
        to_verl_rows([{"problem": "p", "answer": " ", "final_answer": []}], "aime", "test", "src.jsonl")


def test_a_row_that_is_not_an_object_is_refused_not_dropped():
    """A source row that is not an object (a stray string in a JSON list): refused naming it; dropped, the dataset
    would have a row fewer than its source, said nowhere but in the row count."""
    from arctl.backends.verl.data import DataError, to_verl_rows

    with pytest.raises(DataError, match=r"^src.json: row 1 is not an object$"):
        to_verl_rows([{"problem": "p", "answer": "1"}, "q", {"problem": "r", "answer": "2"}], "aime24", "test", "src.json")


def test_an_answer_of_two_math_spans_is_kept_as_written():
    """Only delimiters that wrap the whole answer are dropped: `$5$ and $6$` is two spans, not one wrapped answer."""
    from arctl.backends.verl.data import to_verl_rows

    (row,) = to_verl_rows([{"problem": "p", "answer": "$5$ and $6$"}], "olympiadbench", "test")
    assert row["reward_model"]["ground_truth"] == "$5$ and $6$"


def test_a_problem_that_quotes_the_instruction_still_gets_it_at_its_end():
    """The instruction is left out only where the problem already ends with it, not where the problem quotes it."""
    from arctl.backends.verl.data import to_verl_rows

    problem = f'A student wrote "{AUTHORS_INSTRUCTION}" on the board. How many letters b did the student write?'
    (row,) = to_verl_rows([{"problem": problem, "answer": "2"}], "aime24", "test")
    assert row["prompt"][0]["content"] == problem + " " + AUTHORS_INSTRUCTION


@pytest.mark.parametrize("prompts", [[["What is 1+1?"]], ["What is 1+1?"]], ids=["list of strings", "string"])
def test_a_parquet_file_whose_prompts_are_not_chat_messages_lacks_them(tmp_path, prompts):
    """A prompt column of plain text (or of lists of text) is no list of {role, content} messages: verl's chat
    template cannot read it, so the pre-launch check names it (not "cannot tell", left to the job on the cluster)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from arctl.backends.verl.data import verl_file_lacks

    table = pa.table({"data_source": ["aime24"], "prompt": prompts, "reward_model": [{"style": "rule", "ground_truth": "2"}]})
    pq.write_table(table, tmp_path / "val.parquet")
    assert verl_file_lacks(tmp_path / "val.parquet", data_source=True) == ["prompt (a list of {role, content} messages)"]


def test_an_output_folder_on_a_read_only_file_system_is_refused_before_any_source_is_read(tmp_path):
    """`arctl data prepare --out DIR` where DIR's nearest existing folder cannot be written: refused in one line
    naming the fix, before any source is read (a hub download can take minutes). Before, every source was read and
    converted first (the fifo below: the command hung), and only then was the output checked. A read-only bind mount
    is what root cannot write either (os.access says so), so the case runs on this root machine as on a user's."""
    import os
    import sys

    import fresh_machine
    import mounts

    if why := fresh_machine.available():
        pytest.skip(f"cannot make mounts here: {why}")
    ro = tmp_path / "ro"
    ro.mkdir()
    out = ro / "new" / "data"
    (tmp_path / "ds.jsonl").write_text(json.dumps({"problem": "What is 1+1?", "answer": "2"}) + "\n")
    fifo = tmp_path / "never-read.jsonl"  # a source that blocks whoever opens it: read it and the command hangs
    os.mkfifo(fifo)
    proc = mounts.run([sys.executable, "-m", "arctl.cli.main", "data", "prepare", "--out", str(out), "--datasets",
                       "deepscaler,math500", "--no-hub", "--source", f"deepscaler={tmp_path / 'ds.jsonl'}",
                       "--source", f"math500={fifo}"], read_only=ro, timeout=120)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2 and len(lines) == 1, (proc.returncode, proc.stderr)
    target = out / "deepscaler" / "train.parquet"  # the first dataset's file
    assert lines[0] == f"error: {target} cannot be written here (a read-only file system) — choose another --out", lines[0]
    assert not out.exists() and list(ro.iterdir()) == []
