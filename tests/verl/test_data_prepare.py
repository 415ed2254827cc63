"""``arctl data prepare`` from local files: verl parquet rows, prompt suffix, one-line errors."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from ports import unused_port  # tests/support/ports.py
from typer.testing import CliRunner

from arctl.backends.verl.data import PROMPT_SUFFIX


@pytest.fixture
def app():
    import typer

    from arctl.cli import cmd_data

    app = typer.Typer()

    @app.callback()
    def _root() -> None:
        pass

    cmd_data.register(app)
    return app


def _sources(tmp_path):
    (tmp_path / "ds.jsonl").write_text("\n".join(json.dumps({"problem": f"What is {i}+1?", "answer": str(i + 1),
                                                             "solution": "..."}) for i in range(5)))
    (tmp_path / "aime.json").write_text(json.dumps([{"Problem": "Find x.", "Answer": 7}]))
    pd.DataFrame({"question": ["Q1", "Q2"], "final_answer": [["$\\frac{1}{2}$"], ["3", "4"]]}).to_parquet(
        tmp_path / "olym.parquet")
    return ["--source", f"deepscaler={tmp_path / 'ds.jsonl'}", "--source", f"aime24={tmp_path / 'aime.json'}",
            "--source", f"olympiadbench={tmp_path / 'olym.parquet'}"]


def test_prepare_writes_verl_parquet(app, tmp_path):
    out = tmp_path / "out"
    res = CliRunner().invoke(app, ["data", "prepare", "--out", str(out), "--datasets", "deepscaler,aime24,olympiadbench",
                                   "--no-hub", "--json", *_sources(tmp_path)])
    assert res.exit_code == 0, res.output
    summary = json.loads(res.stdout)
    assert [(r["dataset"], r["rows"]) for r in summary] == [("deepscaler", 5), ("aime24", 1), ("olympiadbench", 2)]
    train = pd.read_parquet(out / "deepscaler" / "train.parquet")
    assert list(train.columns) == ["data_source", "prompt", "ability", "reward_model", "extra_info"]
    row = train.iloc[2]
    assert row["data_source"] == "deepscaler" and row["ability"] == "math"
    assert list(row["prompt"]) == [{"role": "user", "content": "What is 2+1?" + PROMPT_SUFFIX}]
    assert row["reward_model"]["ground_truth"] == "3" and list(row["reward_model"]["alternatives"]) == []
    assert row["extra_info"] == {"split": "train", "index": 2}
    aime = pd.read_parquet(out / "aime24" / "test.parquet")
    assert aime.iloc[0]["reward_model"]["ground_truth"] == "7"
    assert aime.iloc[0]["prompt"][0]["content"].endswith("within \\boxed{}.")
    olym = pd.read_parquet(out / "olympiadbench" / "test.parquet")
    # a list of answers is a list of alternatives, any of which is right (the authors' grader; Minerva's
    # ['0.01', '0.02']), never one answer "3, 4" joined from them (math-verify reads that as a set)
    assert [r["ground_truth"] for r in olym["reward_model"]] == ["\\frac{1}{2}", "3"]  # without the $ that wrap it
    assert [list(r["alternatives"]) for r in olym["reward_model"]] == [[], ["3", "4"]]
    from arctl.algo.verify import verify_answer
    from arctl.backends.verl.reward import ground_truth_of

    gold = ground_truth_of(olym.iloc[1]["reward_model"])  # as the agent loop reads it (numpy arrays inside)
    assert gold == ["3", "4"]
    assert [verify_answer(f"**Final Answer**\n\\boxed{{{a}}}", gold) for a in ("3", "4", "3, 4", "5")] == [1, 1, 0, 0]
    assert ground_truth_of(olym.iloc[0]["reward_model"]) == "\\frac{1}{2}"


def test_prepared_files_are_the_ones_the_overrides_point_to(app, tmp_path, paper_config):
    import copy

    from arctl.backends.verl.overrides import verl_overrides

    out = tmp_path / "out"
    res = CliRunner().invoke(app, ["data", "prepare", "--out", str(out), "--datasets", "deepscaler,aime24",
                                   "--no-hub", *_sources(tmp_path)])
    assert res.exit_code == 0, res.output
    cfg = copy.deepcopy(paper_config)
    cfg["verl"]["data_dir"] = str(out)
    ov = verl_overrides(cfg)
    assert f"data.train_files='{out / 'deepscaler' / 'train.parquet'}'" in ov
    assert (out / "deepscaler" / "train.parquet").exists() and (out / "aime24" / "test.parquet").exists()


@pytest.mark.parametrize(
    "args, fragment",
    [
        (["--datasets", "aime25"], "unknown dataset 'aime25'"),
        (["--datasets", " , "], "names no dataset — give 'all' or some of deepscaler"),  # was "unknown dataset '(none)'"
        (["--source", "aime24"], "is not NAME=PATH"),
        (["--source", "gsm8k=/x.json"], "unknown dataset 'gsm8k'"),
        (["--datasets", "aime24", "--no-hub"], "no source for aime24"),
        (["--datasets", "aime24", "--source", "aime24=/does/not/exist.json"], "does not exist"),
    ],
)
def test_user_mistakes_are_one_red_line_and_exit_2(app, tmp_path, args, fragment):
    res = CliRunner().invoke(app, ["data", "prepare", "--out", str(tmp_path / "o"), *args])
    assert res.exit_code == 2
    err = res.stderr if hasattr(res, "stderr") else res.output
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and fragment in lines[0], err
    assert not (tmp_path / "o").exists()


def test_bad_rows_are_reported_with_their_file(app, tmp_path):
    (tmp_path / "bad.jsonl").write_text(json.dumps({"problem": "x"}) + "\n")
    res = CliRunner().invoke(app, ["data", "prepare", "--out", str(tmp_path / "o"), "--datasets", "math500",
                                   "--source", f"math500={tmp_path / 'bad.jsonl'}"])
    assert res.exit_code == 2 and "row 0 has no answer" in res.stderr


def test_a_jsonl_row_that_is_not_json_is_named_by_its_line(app, tmp_path):
    """From a review: the error said "line 1 column 1" of the row's own text, for a bad second line."""
    (tmp_path / "bad.jsonl").write_text(json.dumps({"problem": "x", "answer": "1"}) + "\n\nnot json\n")
    res = CliRunner().invoke(app, ["data", "prepare", "--out", str(tmp_path / "o"), "--datasets", "math500",
                                   "--source", f"math500={tmp_path / 'bad.jsonl'}", "--no-hub"])
    assert res.exit_code == 2 and "bad.jsonl: line 3, column 1: Expecting value" in res.stderr, res.stderr
    assert not (tmp_path / "o").exists()


def test_module_import_is_light():
    import subprocess
    import sys

    code = ("import sys, arctl.cli.cmd_data; "
            "print(any(m in sys.modules for m in ('torch', 'verl', 'pandas', 'datasets', 'hydra')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "False", out.stderr


def test_a_bad_second_source_writes_nothing_not_even_the_first(app, tmp_path):
    """Issue 25 (4): every source is read before anything is written; an earlier file is not replaced."""
    out = tmp_path / "o"
    (out / "deepscaler").mkdir(parents=True)
    (out / "deepscaler" / "train.parquet").write_bytes(b"the previous file")
    (tmp_path / "bad.jsonl").write_text(json.dumps({"problem": "x"}) + "\n")
    good = _sources(tmp_path)[:2]
    res = CliRunner().invoke(app, ["data", "prepare", "--out", str(out), "--datasets", "deepscaler,math500",
                                   *good, "--source", f"math500={tmp_path / 'bad.jsonl'}"])
    assert res.exit_code == 2 and "row 0 has no answer" in res.stderr
    assert (out / "deepscaler" / "train.parquet").read_bytes() == b"the previous file"
    assert sorted(p.name for p in out.rglob("*")) == ["deepscaler", "train.parquet"]  # no temp file either


@pytest.mark.parametrize("where", ["/proc/1/data", "/sys/kernel/data", "a file"])
def test_an_output_folder_that_cannot_be_written_is_one_line(app, tmp_path, where):
    target = str(tmp_path / "ds.jsonl" / "data") if where == "a file" else where
    res = CliRunner().invoke(app, ["data", "prepare", "--out", target, "--datasets", "deepscaler", "--no-hub",
                                   *_sources(tmp_path)[:2]])
    assert res.exit_code == 2, res.output
    lines = [line for line in res.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:"), res.stderr


def test_the_row_count_note_is_coloured_not_printed_as_markup(app, tmp_path):
    res = CliRunner().invoke(app, ["data", "prepare", "--out", str(tmp_path / "o"), "--datasets", "deepscaler",
                                   "--no-hub", *_sources(tmp_path)[:2]])
    assert res.exit_code == 0, res.output
    assert "(paper: 40315)" in res.stdout and "[yellow]" not in res.stdout and "[/]" not in res.stdout


def _clean_env(tmp_path, **env) -> dict[str, str]:
    """This environment without the hub's settings and proxies (a proxy would answer for 127.0.0.1),
    with a Hugging Face cache of the test's own."""
    import os

    drop = ("HF_", "HUGGINGFACE_", "TRANSFORMERS_OFFLINE")
    proxies = {"http_proxy", "https_proxy", "all_proxy", "no_proxy"}
    base = {k: v for k, v in os.environ.items() if not k.startswith(drop) and k.lower() not in proxies}
    return {**base, "HF_HOME": str(tmp_path / "hf"), **env}


def _prepare_in_a_process(tmp_path, *args, **env):
    """The real command in its own process: the hub's client and datasets read HF_* at import."""
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-m", "arctl.cli.main", "data", "prepare", "--out", str(tmp_path / "o"),
                           *args], capture_output=True, text=True, timeout=300, env=_clean_env(tmp_path, **env))


CACHE_AIME = """
import os, pathlib, shutil, sys
import datasets
ds = datasets.Dataset.from_list([{"problem": "Find x.", "answer": "7"}, {"problem": "Find y.", "answer": "3"}])
hf = pathlib.Path(os.environ["HF_HOME"])
dst = hf / "datasets" / "HuggingFaceH4___aime_2024" / "default" / "0.0.0" / "0123abcd"
dst.mkdir(parents=True)
ds.save_to_disk(str(hf / "saved"))
shutil.move(str(hf / "saved" / "data-00000-of-00001.arrow"), dst / "aime_2024-train.arrow")
split = datasets.SplitInfo("train", num_examples=len(ds), dataset_name="aime_2024")
datasets.DatasetInfo(features=ds.features, dataset_name="aime_2024", config_name="default",
                     splits=datasets.SplitDict({"train": split})).write_to_directory(str(dst))
"""


def _cache_aime24(tmp_path) -> None:
    """A copy of aime24 (two problems) in the test's Hugging Face cache, where `datasets` keeps one it
    downloaded (HF_HOME/datasets/<owner>___<name>/<config>/<version>/<hash>/)."""
    import subprocess
    import sys

    subprocess.run([sys.executable, "-c", CACHE_AIME], check=True, capture_output=True, timeout=300,
                   env=_clean_env(tmp_path))


def _one_error_line(res) -> str:
    assert res.returncode == 2, res.stdout + res.stderr
    lines = [line for line in res.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), lines
    return lines[0]


def test_an_unreachable_hub_is_asked_once_and_one_line_names_each_dataset_it_would_have_given(tmp_path):
    """`datasets` retries an unreachable hub five times with back-off (~25 s of warnings) before it
    looks in its cache; the command asks once, looks in the cache, and says what to do instead."""
    res = _prepare_in_a_process(tmp_path, "--datasets", "aime24,math500,deepscaler", *_sources(tmp_path)[:2],
                                HF_ENDPOINT=f"http://127.0.0.1:{unused_port()}")
    line = _one_error_line(res)
    assert line.startswith("error: cannot reach the Hugging Face hub (http://127.0.0.1:"), line
    assert line.endswith("your Hugging Face cache has no usable copy of aime24, math500: "
                         "pass local files with --source aime24=PATH --source math500=PATH"), line
    assert "Retrying" not in res.stderr and not (tmp_path / "o").exists()


def test_with_the_hub_unreachable_a_cached_copy_is_used_and_a_missing_one_writes_nothing(tmp_path):
    _cache_aime24(tmp_path)
    closed = f"http://127.0.0.1:{unused_port()}"
    res = _prepare_in_a_process(tmp_path, "--datasets", "aime24,math500", HF_ENDPOINT=closed)
    assert _one_error_line(res).endswith("no usable copy of math500: pass local files with --source math500=PATH")
    assert not (tmp_path / "o").exists()  # not even aime24's, which the cache had

    res = _prepare_in_a_process(tmp_path, "--datasets", "aime24", "--json", HF_ENDPOINT=closed)
    assert res.returncode == 0 and res.stderr == "", res.stdout + res.stderr  # datasets' warnings too
    (row,) = json.loads(res.stdout)
    assert row["rows"] == 2 and row["source"] == "hf:HuggingFaceH4/aime_2024 (cached copy: hub unreachable)", row
    problems = pd.read_parquet(tmp_path / "o" / "aime24" / "test.parquet")["prompt"]
    assert [p[0]["content"] for p in problems] == ["Find x." + PROMPT_SUFFIX, "Find y." + PROMPT_SUFFIX]
    res = _prepare_in_a_process(tmp_path, "--datasets", "aime24", HF_ENDPOINT=closed)  # the text says so too
    assert res.returncode == 0 and "(from hf:HuggingFaceH4/aime_2024 (cached copy: hub unreachable))" in res.stdout


def test_with_the_hub_unreachable_a_cached_copy_that_cannot_be_read_is_named_with_why(tmp_path):
    _cache_aime24(tmp_path)
    (arrow,) = (tmp_path / "hf" / "datasets").rglob("aime_2024-train.arrow")
    arrow.write_bytes(b"")
    line = _one_error_line(_prepare_in_a_process(tmp_path, "--datasets", "aime24",
                                                 HF_ENDPOINT=f"http://127.0.0.1:{unused_port()}"))
    assert "your Hugging Face cache has no usable copy of aime24 (" in line, line  # why, not just the name
    assert line.endswith("pass local files with --source aime24=PATH"), line


@pytest.mark.parametrize("offline", ["HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE"])
def test_offline_the_hub_is_not_asked_and_a_missing_copy_is_one_line(tmp_path, offline):
    closed = f"http://127.0.0.1:{unused_port()}"
    line = _one_error_line(_prepare_in_a_process(tmp_path, "--datasets", "math500", HF_ENDPOINT=closed,
                                                 **{offline: "1"}))
    assert line.startswith("error: math500 (HuggingFaceH4/MATH-500): no usable copy in your Hugging Face cache, "
                           "and datasets is offline") and line.endswith("--source math500=PATH"), line
    if offline == "HF_HUB_OFFLINE":  # several: all of them in the one line (an audit: only the first was named)
        line = _one_error_line(_prepare_in_a_process(tmp_path, "--datasets", "math500,amc22", HF_ENDPOINT=closed,
                                                     **{offline: "1"}))
        assert line.startswith("error: math500 (HuggingFaceH4/MATH-500), amc22 (") and \
            line.endswith("pass local files with --source math500=PATH --source amc22=PATH"), line
    if offline == "HF_DATASETS_OFFLINE":  # datasets' own switch; the cached copy, and no word of the hub
        _cache_aime24(tmp_path)
        res = _prepare_in_a_process(tmp_path, "--datasets", "aime24", "--json", HF_ENDPOINT=closed, **{offline: "1"})
        assert res.returncode == 0 and res.stderr == "", res.stderr
        assert json.loads(res.stdout)[0]["source"] == "hf:HuggingFaceH4/aime_2024", res.stdout


def test_the_hub_probe_counts_any_answer_as_reachable(tmp_path):
    import http.server
    import subprocess
    import sys
    import threading

    asked = []

    class NotFound(http.server.BaseHTTPRequestHandler):
        def do_HEAD(self):
            asked.append(self.path)
            self.send_response(404)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), NotFound)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    probe = "from arctl.backends.verl.data import hub_unreachable; print(repr(hub_unreachable()))"
    try:
        out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300,
                             env=_clean_env(tmp_path, HF_ENDPOINT=f"http://127.0.0.1:{server.server_address[1]}"))
    finally:
        server.shutdown()
        server.server_close()
    assert out.stdout.strip() == "None" and asked == ["/"], (out.stdout, out.stderr, asked)  # a 404 is an answer


def test_answers_wrapped_in_math_delimiters_are_graded_as_their_content():
    """From a review of the data path: OlympiadBench's final_answer writes answers as `$x=3$`; the grader's
    normalisers drop only escaped dollars, so a right boxed answer scored 0 against it."""
    from arctl.algo.verify import DEFAULT_GRADER, grade
    from arctl.backends.verl.data import to_verl_rows

    records = [{"problem": "p", "final_answer": ["$x=3$"]}, {"problem": "p", "final_answer": ["$$120^{\\circ}$$", "$120$"]},
               {"problem": "p", "answer": "$5 and $6"}, {"problem": "p", "answer": "$"}]
    rows = [r["reward_model"] for r in to_verl_rows(records, "olympiadbench", "test")]
    assert rows[0] == {"style": "rule", "ground_truth": "x=3", "alternatives": []}
    assert rows[1]["ground_truth"] == "120^{\\circ}" and rows[1]["alternatives"] == ["120^{\\circ}", "120"]
    assert rows[2]["ground_truth"] == "$5 and $6" and rows[3]["ground_truth"] == "$"  # not one wrapped answer: kept
    summary = "**Final Answer**\n\\boxed{3}"  # graded as the reward grades it (the default grader)
    assert grade(summary, rows[0]["ground_truth"], DEFAULT_GRADER) == 1
    assert grade(summary, "$x=3$", DEFAULT_GRADER) == 0  # what it was graded against before


def test_a_missing_answer_in_a_parquet_file_is_no_answer_not_nan(app, tmp_path):
    """From a review: a float answer column with a null (AMC's answers are floats) reads as NaN from
    parquet, and ``str(NaN)`` became the ground truth "nan": a question that scores 0 for ever, said
    nowhere (the same gap in a .jsonl file was refused). Now it is refused the same way, with its row."""
    from arctl.backends.verl.data import read_records, to_verl_rows

    pd.DataFrame({"problem": ["p1", "p2"], "answer": [142.0, None]}).to_parquet(tmp_path / "amc.parquet")
    records = read_records(tmp_path / "amc.parquet")
    assert to_verl_rows(records[:1], "amc", "test")[0]["reward_model"]["ground_truth"] == "142"  # as written
    res = CliRunner().invoke(app, ["data", "prepare", "--out", str(tmp_path / "o"), "--datasets", "amc22",
                                   "--source", f"amc22={tmp_path / 'amc.parquet'}"])
    assert res.exit_code == 2 and "row 1 has no answer" in res.stderr and not (tmp_path / "o").exists()
    (row,) = to_verl_rows([{"problem": "p", "answer": ["1", float("nan"), None]}], "amc", "test")
    assert row["reward_model"] == {"style": "rule", "ground_truth": "1", "alternatives": []}  # one answer left


def test_a_target_that_cannot_be_written_leaves_every_file_as_it_was_and_a_replaced_file_is_said(app, tmp_path):
    """From a review: a folder where the second dataset's parquet goes failed the command after the first
    dataset's file was written (one half-prepared folder); and a file prepared again was replaced without a word."""
    import json

    out = tmp_path / "out"
    (out / "aime24" / "test.parquet").mkdir(parents=True)
    res = CliRunner().invoke(app, ["data", "prepare", "--out", str(out), "--datasets", "deepscaler,aime24",
                                   "--no-hub", *_sources(tmp_path)])
    assert res.exit_code == 2 and "is a folder" in res.output, res.output
    assert not (out / "deepscaler").exists()
    (out / "aime24" / "test.parquet").rmdir()
    args = ["data", "prepare", "--out", str(out), "--datasets", "deepscaler,aime24", "--no-hub", *_sources(tmp_path),
            "--json"]
    first = CliRunner().invoke(app, args)
    again = CliRunner().invoke(app, args)
    assert first.exit_code == again.exit_code == 0, first.output + again.output
    assert [r["replaced"] for r in json.loads(first.stdout)] == [False, False]
    assert [r["replaced"] for r in json.loads(again.stdout)] == [True, True]
    # a --source of a dataset not prepared (olympiadbench here) was ignored without a word (from a review)
    assert "--source olympiadbench=" in again.stderr and "is not read" in again.stderr


def test_a_json_of_splits_gives_the_datasets_split_and_answers_are_text_as_written(app, tmp_path):
    """From an audit of the prepared files: {"train": [...], "test": [...]} given as an eval set wrote its train
    rows (the first list found); AMC's float answers became "142.0", 1e-05 "1e-05" (no grader reads an
    exponent), JSON true "True"; the problem was stripped where the authors' script writes f"{question}
    {instruction}"."""
    import json

    from arctl.backends.verl.data import PROMPT_SUFFIX, read_records, to_verl_rows

    both = tmp_path / "both.json"
    both.write_text(json.dumps({"train": [{"problem": "TRAIN q", "answer": "1"}],
                                "test": [{"problem": "TEST q", "answer": "2"}]}))
    assert read_records(both, "test")[0]["problem"] == "TEST q"
    out = tmp_path / "o"
    res = CliRunner().invoke(app, ["data", "prepare", "--out", str(out), "--datasets", "aime24", "--source",
                                   f"aime24={both}"])
    assert res.exit_code == 0, res.output
    rows = pd.read_parquet(out / "aime24" / "test.parquet")
    assert rows["prompt"][0][0]["content"] == "TEST q" + PROMPT_SUFFIX
    only_train = tmp_path / "train.json"  # AIME24's hub copy is one "train" split (a review): still its rows
    only_train.write_text(json.dumps({"train": [{"problem": "AIME q", "answer": "1"}]}))
    assert read_records(only_train, "test", "train")[0]["problem"] == "AIME q"
    two = tmp_path / "two.json"
    two.write_text(json.dumps({"train": [{"problem": "a", "answer": "1"}], "validation": [{"problem": "b", "answer": "2"}]}))
    res = CliRunner().invoke(app, ["data", "prepare", "--out", str(tmp_path / "o2"), "--datasets", "math500",
                                   "--source", f"math500={two}"])
    assert res.exit_code == 2 and "without the 'test' split" in res.stderr and not (tmp_path / "o2").exists()
    rows = to_verl_rows([{"problem": "Angle?\n", "answer": 1e-05}, {"problem": "q", "answer": [0.5, 3.0]}],
                        "minerva", "test")
    assert rows[0]["prompt"][0]["content"] == "Angle?\n" + PROMPT_SUFFIX  # the authors' f"{question} {instruction}"
    assert rows[0]["reward_model"]["ground_truth"] == "0.00001"
    assert rows[1]["reward_model"]["alternatives"] == ["0.5", "3"]
    from arctl.backends.verl.data import DataError

    with pytest.raises(DataError, match="row 0: answer True is true/false"):
        to_verl_rows([{"problem": "q", "answer": True}], "amc22", "test")


@pytest.mark.parametrize("row", [{"problem": "bad \ud800 text", "answer": "1"}, {"problem": "p", "answer": ["2", "x\udfff"]}])
def test_a_row_that_cannot_be_written_as_utf8_is_one_line_and_nothing_is_written(app, tmp_path, row):
    """From a hunt: a lone surrogate (a JSON ``\\ud800``) in a row of the second dataset was a traceback (exit 1) from
    the parquet writer, after the first dataset's file was written and with an empty folder for the second."""
    (tmp_path / "ok.jsonl").write_text(json.dumps({"problem": "What is 1+1?", "answer": "2"}) + "\n")
    (tmp_path / "sur.jsonl").write_text(json.dumps(row) + "\n")  # json.dumps writes the surrogate as \ud800: ascii
    out = tmp_path / "o"
    res = CliRunner().invoke(app, ["data", "prepare", "--out", str(out), "--datasets", "aime24,math500", "--source",
                                   f"aime24={tmp_path / 'ok.jsonl'}", "--source", f"math500={tmp_path / 'sur.jsonl'}"])
    assert res.exit_code == 2, (res.output, res.exception)
    lines = [line for line in res.stderr.splitlines() if line.strip()]
    what = "problem" if "bad" in row["problem"] else "answer"
    assert len(lines) == 1 and f"sur.jsonl: row 0: the {what} holds " in lines[0], lines
    assert "lone surrogate" in lines[0] and "fix or remove that row" in lines[0], lines
    assert not out.exists()  # not aime24's file, not an empty math500 folder


@pytest.mark.parametrize("which", ["out", "source"])
def test_paths_that_are_not_utf8_are_read_and_written(app, tmp_path, which):
    """From a hunt: an --out (or a parquet --source) whose name is not UTF-8 (bytes a Linux path may hold) was a
    pyarrow traceback that left empty folders behind, and such a source was refused with a misleading error."""
    import os

    odd = "\udcfe"  # the byte 0xfe, as Python names a path that is not UTF-8
    source = tmp_path / f"amc{odd if which == 'source' else ''}.parquet"
    with open(source, "wb") as fh:
        pd.DataFrame({"problem": ["p"], "answer": [142.0]}).to_parquet(fh)
    out = tmp_path / f"o{odd if which == 'out' else ''}"
    res = CliRunner().invoke(app, ["data", "prepare", "--out", str(out), "--datasets", "amc22", "--source",
                                   f"amc22={source}"])
    assert res.exit_code == 0, (res.output, res.exception)
    assert "\\udcfe" in res.stdout and odd not in res.stdout  # the summary line names it, escaped
    assert os.listdir(os.fsencode(out)) == [b"amc22"]
    with open(out / "amc22" / "test.parquet", "rb") as fh:
        assert pd.read_parquet(fh)["reward_model"][0]["ground_truth"] == "142"


def test_float32_answers_are_written_as_their_own_digits(app, tmp_path):
    """From a hunt: a float32 answer column widened to a double: 0.1 became the ground truth
    "0.10000000149011612", and a right \\boxed{0.1} scored 0, said nowhere. The same as a float64 column now."""
    import numpy as np

    from arctl.algo.verify import DEFAULT_GRADER, grade
    from arctl.backends.verl.data import read_records, to_verl_rows

    golds = {}
    for dtype in ("float32", "float64"):
        path = tmp_path / f"{dtype}.parquet"
        pd.DataFrame({"problem": ["a", "b", "c", "d"], "answer": np.array([0.1, 1e-5, 2.5, np.nan], dtype=dtype),
                      "final_answer": [np.array(v, dtype=dtype) for v in ([0.1, 2.5], [0.2], [], [0.3])]}
                     ).to_parquet(path)
        rows = to_verl_rows(read_records(path), "amc22", "test")
        golds[dtype] = [(r["reward_model"]["ground_truth"], list(r["reward_model"]["alternatives"])) for r in rows]
    assert golds["float32"] == golds["float64"] == [("0.1", []), ("0.00001", []), ("2.5", []),
                                                    ("0.3", [])], golds  # d: its answer null, final_answer's
    path = tmp_path / "amc.parquet"
    pd.DataFrame({"problem": ["p"], "final_answer": [np.array([0.1, 2.5], dtype="float32")]}).to_parquet(path)
    assert to_verl_rows(read_records(path), "amc22", "test")[0]["reward_model"]["alternatives"] == ["0.1", "2.5"]
    out = tmp_path / "o"
    res = CliRunner().invoke(app, ["data", "prepare", "--out", str(out), "--datasets", "amc22", "--source",
                                   f"amc22={tmp_path / 'float32.parquet'}"])
    assert res.exit_code == 0, (res.output, res.exception)
    gold = pd.read_parquet(out / "amc22" / "test.parquet")["reward_model"][0]["ground_truth"]
    assert gold == "0.1" and grade("**Final Answer**\n\\boxed{0.1}", gold, DEFAULT_GRADER) == 1


def test_control_characters_in_a_source_path_do_not_reach_the_terminal(app, tmp_path):
    """From a hunt: an ESC in a --source path reached the terminal raw, in the note of a source not read and in
    the summary's "(from ...)"; it is written as \\x1b, as everywhere else."""
    source = tmp_path / "c\x1b[2J.jsonl"
    source.write_text(json.dumps({"problem": "p", "answer": "1"}) + "\n")
    res = CliRunner().invoke(app, ["data", "prepare", "--out", str(tmp_path / "o"), "--datasets", "aime24",
                                   "--source", f"aime24={source}", "--source", f"deepscaler={source}"])
    assert res.exit_code == 0, (res.output, res.exception)
    assert "\x1b" not in res.stdout and "\x1b" not in res.stderr, (res.stdout, res.stderr)
    assert "c\\x1b[2J.jsonl is not read" in res.stderr and "(from " in res.stdout
    assert "c\\x1b[2J.jsonl)" in res.stdout


def test_a_dataset_named_twice_is_prepared_once(app, tmp_path):
    """From a hunt: `-d aime24,aime24` prepared it twice, the second row saying it replaced the file the first wrote."""
    (tmp_path / "ok.jsonl").write_text(json.dumps({"problem": "p", "answer": "1"}) + "\n")
    args = ["data", "prepare", "--out", str(tmp_path / "o"), "--datasets", "aime24, aime24", "--source",
            f"aime24={tmp_path / 'ok.jsonl'}"]
    res = CliRunner().invoke(app, [*args, "--json"])
    assert res.exit_code == 0, (res.output, res.exception)
    assert [(r["dataset"], r["replaced"]) for r in json.loads(res.stdout)] == [("aime24", False)]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0 and res.stdout.count("aime24 test") == 1, res.output


@pytest.mark.parametrize("name, text", [("bom.jsonl", json.dumps({"problem": "p", "answer": "1"}) + "\n"),
                                        ("bom.json", json.dumps([{"problem": "p", "answer": "1"}]))])
def test_a_utf8_file_with_a_byte_order_mark_is_read(app, tmp_path, name, text):
    """From a hunt: a file saved with a UTF-8 BOM (as some Windows editors save it) was refused ("Unexpected UTF-8 BOM")."""
    (tmp_path / name).write_bytes(b"\xef\xbb\xbf" + text.encode())
    out = tmp_path / "o"
    res = CliRunner().invoke(app, ["data", "prepare", "--out", str(out), "--datasets", "aime24", "--source",
                                   f"aime24={tmp_path / name}"])
    assert res.exit_code == 0, (res.output, res.exception)
    rows = pd.read_parquet(out / "aime24" / "test.parquet")
    assert rows["prompt"][0][0]["content"] == "p" + PROMPT_SUFFIX and rows["reward_model"][0]["ground_truth"] == "1"
