"""A report's files name the workspace relative to their own folder: the same bytes however ``--workdir`` was typed,
from whichever folder, wherever the two lie together (a paper repo's figures/ beside data/), and the commands they
say run from that folder (from a hunt of determinism: runs.json's "source" and claims.md's commands for missing
runs held the path as typed, or absolute, so a coauthor's rebuild differed beyond the header)."""

from __future__ import annotations

import json
import re
import shlex
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from arctl.cli.main import app
from arctl.report.claims_render import COMMANDS_FROM

runner = CliRunner()


def _invoke(*args: str) -> str:
    res = runner.invoke(app, list(args))
    assert res.exit_code == 0, res.output
    return res.stdout


@pytest.fixture(params=["workspace", "export"])
def papers(request, completed_ws, tmp_path) -> tuple[Path, Path]:
    """Two copies of one paper repo, data/ (the runs: a workspace, or an export of one) beside figures/, in two
    places."""
    one = tmp_path / "paper"
    if request.param == "export":
        _invoke("export", "--workdir", str(completed_ws), "--out", str(one / "data"))
    else:
        shutil.copytree(completed_ws, one / "data")
    other = tmp_path / "elsewhere" / "deeper" / "paper-copy"
    shutil.copytree(one, other)
    return one, other


def test_runs_json_names_the_workspace_relative_to_the_report(papers, tmp_path, monkeypatch):
    one, other = papers
    monkeypatch.chdir(one)  # typed relative, from the paper repo
    _invoke("report", "--table", "final", "--experiment", "main-grpo", "--workdir", "data", "--out", "figures")
    monkeypatch.chdir(tmp_path)  # typed absolute, from another folder, the repo elsewhere
    _invoke("report", "--table", "final", "--experiment", "main-grpo", "--workdir", str(other / "data"),
            "--out", str(other / "figures"))
    written = (one / "figures" / "final.runs.json").read_bytes()
    assert json.loads(written)["source"] == "../data" and json.loads(written)["runs"]
    assert (other / "figures" / "final.runs.json").read_bytes() == written


def _body(folder: Path) -> dict[str, object]:
    """claims.md/.json/.html without their header (the build: when, where, the paths of this build) and their
    warnings (the fixture's unfinished run: its W&B file's path, `arctl status --workdir` of this shell)."""
    md = (folder / "claims.md").read_text().split("## Warnings")[0].splitlines()
    doc = json.loads((folder / "claims.json").read_text())
    html = [line for line in (folder / "claims.html").read_text().splitlines()
            if 'id="meta"' not in line and "<h2>Warnings" not in line]
    assert len(md) > 20 and len(html) > 20 and doc["warnings"]  # (what is left out is what the docstring says)
    return {"md": md[:2] + md[3:], "json": {k: v for k, v in doc.items() if k not in ("meta", "outputs", "warnings")},
            "html": html}


def test_claims_files_differ_only_in_their_header_wherever_the_workspace_lies(papers, tmp_path, monkeypatch):
    one, other = papers
    claims = ("report", "--claims", "priors", "ablations", "--scale", "tiny")
    monkeypatch.chdir(one)
    _invoke(*claims, "--workdir", "data", "--out", "figures")
    monkeypatch.chdir(tmp_path)
    said = json.loads(_invoke(*claims, "--workdir", str(other / "data"), "--out", str(other / "figures"), "--json"))
    assert _body(one / "figures") == _body(other / "figures")
    md = (one / "figures" / "claims.md").read_text()
    commands = re.findall(r"→ `([^`]+)`", md)
    assert commands and COMMANDS_FROM in md
    exported = (one / "data" / "export.json").is_file()
    for command in commands:  # run from figures/: they name ../data, the runs' folder
        words = shlex.split(command)
        assert words[words.index("--out" if exported else "--workdir") + 1] == "../data", command
    # the terminal's (and --json's) commands name the workspace as a command in this shell does
    tests = [t for c in said["claims"] for t in c["tests"] if t["commands"]]
    assert tests and all(str(other / "data") in c for t in tests for c in t["commands"])
