"""A ``$ARCTL_SPECS`` entry that can hold no spec (a missing folder, a file, the ``experiments/`` folder itself) refuses
a launch in one line, exit 2, nothing written; the commands that only read specs say it in a note and go on.

From a hunt: such an entry was skipped without a word. With ``ARCTL_SPECS=.../myspecs/experiments`` (a common slip) the
user's edited ``main-grpo.yaml`` was not read, the shipped one trained in its place, reported as theirs, and the
launch, its dry run and ``arctl ls`` all exited 0 with nothing on stderr."""

from __future__ import annotations

import json
import os

import pytest
from bad_input import launch_args  # tests/support/bad_input.py

from arctl.compose.paths import PROJECT_ROOT


@pytest.fixture
def mine(sandbox, tmp_path, monkeypatch):
    """The user's folder ``myspecs`` with an edited copy of main-grpo (seed 1, the shipped one seed 0); the current
    folder is no project."""
    folder = tmp_path / "myspecs"
    (folder / "experiments").mkdir(parents=True)
    text = (PROJECT_ROOT / "experiments" / "main-grpo.yaml").read_text()
    assert "\nseeds: [0]\n" in text
    (folder / "experiments" / "main-grpo.yaml").write_text(text.replace("\nseeds: [0]\n", "\nseeds: [1]\n"))
    monkeypatch.chdir(tmp_path)
    return folder


def _bad_entries(mine):
    """(entry, what the line must say of it) for each kind of entry that can hold no spec."""
    (mine.parent / "a-file").write_text("")
    return [
        (mine / "experiments", f"$ARCTL_SPECS entry {mine / 'experiments'} holds no experiments/, sweeps/, reports/ "
                               f"or conf/: point it at the folder above them ({mine})"),
        (mine.parent / "mysepcs", f"$ARCTL_SPECS entry {mine.parent / 'mysepcs'} does not exist"),
        (mine.parent / "a-file", f"$ARCTL_SPECS entry {mine.parent / 'a-file'} is a file, not a folder"),
    ]


LAUNCHES = [
    ("run", "main-grpo", "--dry-run"),
    ("run", "main-grpo"),  # the shim refuses sbatch: check_refused asserts it was never asked
    ("run", "main-grpo", "--dry-run", "--json"),
    ("sweep", "priors", "--seeds", "0", "--dry-run"),
    ("sweep", "priors", "--seeds", "0"),
]


@pytest.mark.parametrize("args", LAUNCHES, ids=lambda a: " ".join(a))
def test_a_launch_is_refused_in_one_line_naming_the_entry_and_the_fix(sandbox, mine, monkeypatch, args):
    for entry, says in _bad_entries(mine):
        monkeypatch.setenv("ARCTL_SPECS", str(entry))
        line = sandbox.check_refused(*args, *launch_args(sandbox)).err.strip()  # one line, exit 2, nothing written
        assert says in line, line
        assert "fix $ARCTL_SPECS" in line and "shipped" in line, line


def test_one_bad_entry_beside_good_ones_still_refuses_a_launch(sandbox, mine, monkeypatch):
    """The bad entry is an explicit setting that cannot work, whatever the others hold."""
    monkeypatch.setenv("ARCTL_SPECS", f"{mine}{os.pathsep}{mine / 'experiments'}{os.pathsep}{sandbox.specs}")
    line = sandbox.check_refused("run", "main-grpo", "--dry-run", *launch_args(sandbox)).err
    assert f"entry {mine / 'experiments'} holds no" in line and f"entry {mine} " not in line, line


def test_the_folder_above_launches_the_users_spec_with_no_such_line(sandbox, mine, monkeypatch):
    """The fix the line names works: the user's copy (seed 1) is the one planned, and nothing is said of the path."""
    monkeypatch.setenv("ARCTL_SPECS", str(mine))
    result = sandbox.run("run", "main-grpo", "--dry-run", "--json", *launch_args(sandbox))
    assert result.code == 0 and result.crash is None, result.err + (result.crash or "")
    assert "$ARCTL_SPECS entry" not in result.err, result.err
    assert "_s1_" in result.out and "_s0_" not in result.out


def _notes(result) -> list[str]:
    assert result.code == 0 and result.crash is None, result.err + (result.crash or "")
    return [line for line in result.err.splitlines() if line.startswith("note: $ARCTL_SPECS entry")]


READERS = [
    ("ls",),
    ("ls", "sweeps", "--json"),
    ("show", "main-grpo", "--arm", "grpo"),
    ("status", "--workdir", "{ws}"),
    ("status", "main-grpo", "--workdir", "{ws}"),
]


@pytest.mark.parametrize("args", READERS, ids=lambda a: " ".join(a))
def test_a_command_that_only_reads_specs_notes_each_bad_entry_once_and_goes_on(sandbox, mine, monkeypatch, args):
    entries = _bad_entries(mine)
    monkeypatch.setenv("ARCTL_SPECS", os.pathsep.join(str(e) for e, _ in entries))
    if args[0] == "status":
        sandbox.add_runs()
    result = sandbox.run(*(a.format(ws=sandbox.ws) for a in args))
    notes = _notes(result)
    assert len(notes) == len(entries), result.err
    for note, (_, says) in zip(notes, entries):
        assert note.startswith(f"note: {says}") and note.endswith("arctl reads no spec from it"), note
    if "--json" in args:
        assert json.loads(result.out)  # the document on stdout, the notes on stderr


def test_ls_notes_the_slip_and_lists_the_shipped_spec_it_reads_instead(sandbox, mine, monkeypatch):
    monkeypatch.setenv("ARCTL_SPECS", str(mine / "experiments"))
    result = sandbox.run("ls", "experiments", "--json")
    (note,) = _notes(result)
    assert f"point it at the folder above them ({mine})" in note
    rows = {r["name"]: r for r in json.loads(result.out)}
    assert rows["main-grpo"]["source"] == "shipped"


def test_good_or_empty_entries_say_nothing(sandbox, mine, monkeypatch):
    from arctl.compose.paths import spec_path_error, spec_path_notes

    (mine.parent / "only-conf" / "conf").mkdir(parents=True)  # a folder of the user's config-group options only
    monkeypatch.setenv("ARCTL_SPECS", f"{mine}{os.pathsep}{os.pathsep} {os.pathsep}{mine.parent / 'only-conf'}")
    assert spec_path_error() is None and spec_path_notes() == []
    assert _notes(sandbox.run("ls")) == []


def test_cp_says_it_once_among_its_own_warnings(sandbox, mine, monkeypatch, tmp_path):
    monkeypatch.setenv("ARCTL_SPECS", f"{mine}{os.pathsep}{tmp_path / 'nope'}")
    result = sandbox.run("cp", "priors")
    assert result.code == 0 and result.crash is None, result.err
    assert result.err.count(f"$ARCTL_SPECS entry {tmp_path / 'nope'} does not exist") == 1, result.err


def test_an_unknown_spec_stays_one_error_line_that_names_the_entry(sandbox, mine, monkeypatch):
    """A read-only command that fails says the entry in its error line (the unknown-spec hint), with no note before."""
    monkeypatch.setenv("ARCTL_SPECS", str(mine / "experiments"))
    line = sandbox.check_refused("show", "nosuch").err.strip()  # one line, exit 2
    assert line.startswith("error: unknown experiment 'nosuch'") and f"entry {mine / 'experiments'} holds no" in line
