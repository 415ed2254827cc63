"""A workspace whose layout cannot be used (registry.sqlite a folder, runs a file, the workspace a file)
is one line naming what is wrong, where the path came from (--workdir, ARCTL_HOME or the default
./arctl-runs) and what to do; exit 2; nothing written or submitted. Found by a black-box pass: a
registry folder was "no row ... `arctl repair`" (which then refused), a runs file let `status` exit 0
and a dry run plan, and ARCTL_HOME (or ARCTL_DATA_DIR) being a file was blamed on --workdir (--out)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from arctl.cli.main import app


def _tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def _refused(*args: str, env: dict | None = None) -> str:
    res = CliRunner().invoke(app, list(args), env=env)
    lines = res.stderr.strip().splitlines()
    assert res.exit_code == 2 and len(lines) == 1 and "Traceback" not in res.output, (args, res.output)
    return lines[0]


@pytest.fixture
def workspace(specs, tmp_path, monkeypatch) -> Path:
    """A workspace with the three completed runs of experiment ``lt`` (debug executor, in-process)."""
    ws = tmp_path / "ws"
    res = CliRunner().invoke(app, ["run", "lt", "--executor", "debug", "--workdir", str(ws)])
    assert res.exit_code == 0, res.output
    return ws


COMMANDS = [["status"], ["run", "lt", "--dry-run"], ["run", "lt", "--executor", "debug"], ["resume", "lt"],
            ["cancel", "lt"], ["logs", "lt_a"], ["repair"]]


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_a_registry_folder_beside_runs_is_named_and_repair_is_what_to_do(workspace, command):
    (workspace / "registry.sqlite").rename(workspace.parent / "registry.bak")
    (workspace / "registry.sqlite").mkdir()
    before = _tree(workspace)
    line = _refused(*command, "--workdir", str(workspace))
    assert f"{workspace / 'registry.sqlite'} is a folder, not a registry file" in line, line
    assert "move it aside" in line and f"`arctl repair --workdir {workspace}`" in line, line
    assert "no row" not in line and "damaged" not in line, line
    assert _tree(workspace) == before


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_a_registry_folder_in_a_fresh_workspace_is_not_sent_to_a_repair_that_refuses(specs, tmp_path, command):
    ws = tmp_path / "ws"
    (ws / "registry.sqlite").mkdir(parents=True)
    line = _refused(*command, "--workdir", str(ws))
    assert f"{ws / 'registry.sqlite'} is a folder, not a registry file" in line and "move it aside" in line, line
    assert "arctl repair" not in line and "no run folders" not in line, line
    assert _tree(ws) == ["registry.sqlite"]


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_a_runs_file_is_one_line_not_a_workspace_without_runs(workspace, command):
    (workspace / "runs").rename(workspace.parent / "runs.bak")
    (workspace / "runs").write_text("mine\n")
    before = _tree(workspace)
    line = _refused(*command, "--workdir", str(workspace))
    assert f"{workspace / 'runs'} is a file, not a folder" in line and "move the file aside" in line, line
    assert _tree(workspace) == before and (workspace / "runs").read_text() == "mine\n"


@pytest.mark.parametrize("command", [["status"], ["run", "lt", "--dry-run"], ["cancel", "lt"], ["repair"],
                                     ["sweep", "lt3", "--dry-run"], ["report", "--figure", "ablation_vr"],
                                     ["report", "--claims"], ["export", "--out", "exported"]], ids=" ".join)
@pytest.mark.parametrize("where", ["the file", "below the file"])
def test_a_workspace_from_arctl_home_or_the_default_is_named_so_never_as_workdir(specs, tmp_path, monkeypatch,
                                                                                   command, where):
    afile = tmp_path / "afile"
    afile.write_text("mine\n")
    home = afile if where == "the file" else afile / "ws"
    line = _refused(*command, env={"ARCTL_HOME": str(home)})
    assert f"ARCTL_HOME={home}" in line and f"{afile} is a file" in line, line
    assert "--workdir " + str(home) not in line and "point ARCTL_HOME at another folder" in line, line
    monkeypatch.chdir(tmp_path)
    (tmp_path / "arctl-runs").write_text("mine\n")
    line = _refused(*command)  # ARCTL_HOME unset (the specs fixture): the default ./arctl-runs
    assert f"the default workspace ./arctl-runs ({tmp_path / 'arctl-runs'}) is a file" in line, line
    assert "--workdir " + str(tmp_path) not in line and "move ./arctl-runs aside" in line, line
    assert afile.read_text() == "mine\n" and (tmp_path / "arctl-runs").read_text() == "mine\n"


def test_a_missing_workspace_says_where_its_path_came_from(specs, tmp_path, monkeypatch):
    line = _refused("status", env={"ARCTL_HOME": str(tmp_path / "none")})
    assert f"no arctl workspace at {tmp_path / 'none'} (from ARCTL_HOME)" in line, line
    (tmp_path / "empty").mkdir()  # a folder without runs/: repair names it as the user set it
    line = _refused("repair", env={"ARCTL_HOME": str(tmp_path / "empty")})
    assert f"ARCTL_HOME={tmp_path / 'empty'} is not an arctl workspace" in line and "--workdir" not in line, line
    monkeypatch.chdir(tmp_path)
    assert "(the default ./arctl-runs)" in _refused("status")
    assert not (tmp_path / "none").exists() and not (tmp_path / "arctl-runs").exists()


@pytest.mark.parametrize("where", ["the file", "below the file"])
def test_an_arctl_data_dir_that_is_a_file_is_named_not_out(tmp_path, monkeypatch, where):
    afile = tmp_path / "afile"
    afile.write_text("mine\n")
    source = tmp_path / "aime.jsonl"
    source.write_text('{"problem": "1+1?", "answer": "2"}\n')
    data_dir = afile if where == "the file" else afile / "data"
    args = ["data", "prepare", "--datasets", "aime24", "--no-hub", "--source", f"aime24={source}"]
    line = _refused(*args, env={"ARCTL_DATA_DIR": str(data_dir)})
    assert f"ARCTL_DATA_DIR={data_dir}" in line and f"{afile} is a file" in line, line
    assert "--out" not in line.split("(or give --out DIR)")[0] and "point ARCTL_DATA_DIR" in line, line
    home = tmp_path / "home"
    (home / "data").mkdir(parents=True)
    (home / "data" / "arctl").write_text("mine\n")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("ARCTL_DATA_DIR", raising=False)
    line = _refused(*args)
    assert f"the default data folder ~/data/arctl ({home / 'data' / 'arctl'})" in line, line
    assert "choose another --out" not in line and afile.read_text() == "mine\n"
    (home / "data" / "arctl").unlink()
    (home / "data" / "arctl" / "aime24" / "test.parquet").mkdir(parents=True)  # a folder where the file goes
    line = _refused(*args, env={"ARCTL_DATA_DIR": str(home / "data" / "arctl")})
    assert "is a folder, not a parquet file" in line and "point ARCTL_DATA_DIR at another folder" in line, line
    assert "choose another --out" not in line
