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
