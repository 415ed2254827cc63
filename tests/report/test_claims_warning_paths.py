"""The warnings of claims.md, claims.json and claims.html name the workspace as their commands do: relative to the
files' folder (`--workdir ../data`, `../data/runs/RUN/...`), so a report is the same bytes, header aside, however
--workdir was typed and from whichever folder it was written (from a hunt of determinism: a damaged W&B file's path
and `arctl status --workdir` were the terminal's, as typed or absolute). The terminal and --json keep the shell's."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from arctl.cli.main import app

runner = CliRunner()
CLAIMS = ("report", "--claims", "priors", "ablations", "--scale", "tiny")


def _invoke(*args: str) -> str:
    res = runner.invoke(app, list(args))
    assert res.exit_code == 0, res.output
    return res.stdout


@pytest.fixture(params=["workspace", "export"])
def papers(request, workspace, tmp_path) -> tuple[Path, Path]:
    """Two copies of one paper repo, data/ (the runs: a workspace with a run killed mid-run, or an export of it with
    that run --unfinished) beside figures/, in two places."""
    one = tmp_path / "paper"
    if request.param == "export":
        _invoke("export", "--unfinished", "--workdir", str(workspace), "--out", str(one / "data"))
    else:
        shutil.copytree(workspace, one / "data", ignore=shutil.ignore_patterns(".arctl-cache", "report"))
    other = tmp_path / "elsewhere" / "deeper" / "paper-copy"
    shutil.copytree(one, other)
    return one, other


def _warnings(folder: Path) -> dict[str, list[str]]:
    """The warnings of claims.md, claims.json and claims.html in ``folder``."""
    import html

    md = (folder / "claims.md").read_text().split("## Warnings\n\n", 1)[1]
    page = (folder / "claims.html").read_text().split("<h2>Warnings</h2><ul>", 1)[1].split("</ul>", 1)[0]
    return {"md": [line[2:] for line in md.strip().splitlines()],
            "json": json.loads((folder / "claims.json").read_text())["warnings"],
            "html": [html.unescape(w) for w in re.findall(r"<li>(.*?)</li>", page)]}


def test_the_warnings_in_the_files_name_the_workspace_relative_to_them(papers, tmp_path, monkeypatch):
    one, other = papers
    monkeypatch.chdir(one)  # typed relative, from the paper repo
    _invoke(*CLAIMS, "--workdir", "data", "--out", "figures")
    monkeypatch.chdir(tmp_path)  # typed absolute, from another folder, the repo elsewhere
    said = json.loads(_invoke(*CLAIMS, "--workdir", str(other / "data"), "--out", str(other / "figures"), "--json"))
    written = _warnings(one / "figures")
    assert written == _warnings(other / "figures")
    assert written["md"] == written["json"] == written["html"]
    warnings = written["json"]
    text = "\n".join(warnings)
    assert "../data/runs/ablation-vr--grpo-vr--s1/" in text, warnings  # the killed run's W&B file
    assert str(tmp_path) not in text and " data/" not in text, warnings
    commands = re.findall(r"`(arctl [^`]+)`", text)
    assert commands and all("../data" in c for c in commands), commands  # run from figures/, as the files say
    assert "name the workspace relative to this file's folder" in (one / "figures" / "claims.md").read_text()
    # the terminal's --json: the paths as this shell names them
    assert f"{other / 'data' / 'runs' / 'ablation-vr--grpo-vr--s1'}/" in "\n".join(said["warnings"])


def test_a_warning_names_the_workspace_only_where_it_is_a_whole_path(tmp_path, monkeypatch):
    from arctl.report.style import paths_from

    monkeypatch.chdir(tmp_path)
    (tmp_path / "ws").mkdir()
    out = tmp_path / "paper" / "figures"
    text = (f"ws/runs/r/run.wandb: no exit record; `arctl status --workdir {tmp_path / 'ws'}`; ws2/runs/x and "
            f"rows and news/ws stay; ({tmp_path / 'ws'}) ends at a bracket")
    assert paths_from(out, "ws", text) == ("../../ws/runs/r/run.wandb: no exit record; `arctl status --workdir "
                                           "../../ws`; ws2/runs/x and rows and news/ws stay; (../../ws) ends at a "
                                           "bracket")


def test_a_quoted_workspace_stays_quoted_and_one_typed_dot_is_found(tmp_path, monkeypatch):
    from arctl.report.style import paths_from

    spaced = tmp_path / "my data"
    spaced.mkdir()
    said = f"export interrupted: {spaced} holds a part; rerun `arctl export --out '{spaced}' ...`"
    assert paths_from(tmp_path / "figures", spaced, said) == ("export interrupted: ../my data holds a part; rerun "
                                                              "`arctl export --out '../my data' ...`")
    monkeypatch.chdir(spaced)  # --workdir .: its W&B files are runs/..., an export's command --out .
    assert paths_from(tmp_path / "figures", ".", "runs/r/f.wandb: damaged; `arctl export --out . --workdir W`") == \
        "../my data/runs/r/f.wandb: damaged; `arctl export --out '../my data' --workdir W`"


def _files(folder: Path) -> dict[str, str]:
    """claims.md, claims.json and claims.html in ``folder``, less what differs by the clock and the machine (the
    time, the load) and the output paths as typed."""
    md = (folder / "claims.md").read_text().splitlines()
    data = json.loads((folder / "claims.json").read_text())
    data.pop("meta")
    data.pop("outputs", None)
    page = re.sub(r'<p class="meta" id="meta">.*?</p>', "", (folder / "claims.html").read_text())
    return {"md": "\n".join(line for line in md if not re.match(r"\d{4}-\d\d-\d\dT", line)), "json": json.dumps(data),
            "html": page}


def test_a_workspace_typed_runs_or_dot_gives_the_files_of_one_typed_absolute(workspace, tmp_path, monkeypatch):
    """From a review: a workspace typed `--workdir runs` made "these runs ran uniform" "these ../runs ran uniform",
    and one typed `.` added the word `runs`: the files differed from those of the same workspace typed absolute."""
    paper = tmp_path / "paper"
    shutil.copytree(workspace, paper / "runs", ignore=shutil.ignore_patterns(".arctl-cache", "report"))
    figures = paper / "figures"
    written = {}
    for typed, here, out in (("runs", paper, "figures"), (".", paper / "runs", "../figures"),
                             (str(paper / "runs"), tmp_path, str(figures))):
        monkeypatch.chdir(here)
        _invoke(*CLAIMS, "--workdir", typed, "--out", out)
        written[typed] = _files(figures)
    assert written["runs"] == written["."] == written[str(paper / "runs")]
    warnings = _warnings(figures)["md"]
    text = "\n".join(warnings)
    assert "../runs/runs/ablation-vr--grpo-vr--s1/" in text and "`arctl status --workdir ../runs`" in text, warnings
    assert "../runs ran" not in text and "../runs read" not in text and "runs/runs/runs" not in text, warnings
    assert "these runs ran uniform" in text, warnings  # the word, as the terminal says it


@pytest.mark.parametrize("name", ["tiny", "ablation-vr", "runs", "eval"])
def test_a_workspace_named_as_a_word_changes_only_its_paths(name, tmp_path, monkeypatch):
    """A workspace typed as a bare name is a path only where a `/` follows it or as `--workdir`'s or `--out`'s
    argument: a scale, an experiment, a word of the same name stay (from a review: `--scale ../tiny`,
    `arctl run ../ablation-vr`, "these ../runs ran uniform")."""
    from arctl.report.style import paths_from

    monkeypatch.chdir(tmp_path)
    (tmp_path / name).mkdir()
    out = tmp_path / "figures"
    text = (f"{name}/runs/r/run.wandb: damaged; `arctl run {name} --scale {name} --workdir {name}` (scale {name}); "
            f"these {name} ran, {name}: `arctl export --out {name} ...`; {name}2/x and x/{name}/y stay")
    assert paths_from(out, name, text) == (
        f"../{name}/runs/r/run.wandb: damaged; `arctl run {name} --scale {name} --workdir ../{name}` (scale {name}); "
        f"these {name} ran, {name}: `arctl export --out ../{name} ...`; {name}2/x and x/{name}/y stay")
    # typed absolute: the same text names it absolute, and becomes the same
    absolute = text.replace(f"{name}/runs", f"{tmp_path / name}/runs")
    for flag in ("--workdir", "--out"):
        absolute = absolute.replace(f"{flag} {name}", f"{flag} {tmp_path / name}")
    assert paths_from(out, tmp_path / name, absolute) == paths_from(out, name, text)


def test_a_workspace_typed_dot_changes_runs_paths_not_the_word_runs(tmp_path, monkeypatch):
    from arctl.report.style import paths_from

    (tmp_path / "ws").mkdir()
    monkeypatch.chdir(tmp_path / "ws")
    text = "runs/r/f.wandb: damaged; these runs ran uniform (`arctl status --workdir .`); runs: 3"
    assert paths_from(tmp_path / "figures", ".", text) == \
        "../ws/runs/r/f.wandb: damaged; these runs ran uniform (`arctl status --workdir ../ws`); runs: 3"
