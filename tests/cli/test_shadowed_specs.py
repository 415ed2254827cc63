"""A spec that overlays another of its name further down the search path says so: `arctl ls` lists what each
hides (`shadows`), and `arctl run`/`arctl sweep` print one note naming both files. From a hunt: with
`ARCTL_SPECS=/s2:/s1`, both holding experiments/my-lam.yaml beside the project's own, `arctl ls` showed one row and a
launch composed the winner without a word; so did a project's main-grpo.yaml under the shipped `priors` sweep."""

from __future__ import annotations

import json
import os

from bad_input import launch_args  # tests/support/bad_input.py

from arctl.compose.paths import PROJECT_ROOT

SPEC = "description: {}\nseeds: [0]\narms:\n  a: [algo=grpo, prior=base]\n"


def _notes(result) -> list[str]:
    assert result.code == 0 and result.crash is None, result.err + (result.crash or "")
    return [" ".join(line.split()) for line in result.err.replace("\nnote:", "\n\x00note:").split("\x00")
            if line.strip().startswith("note:")]


def test_ls_and_a_launch_name_what_a_spec_overlays(sandbox, tmp_path, monkeypatch):
    s1, s2, project = tmp_path / "s1", tmp_path / "s2", tmp_path / "project"
    for root in (s1, s2, project):
        (root / "experiments").mkdir(parents=True)
        (root / "experiments" / "mine.yaml").write_text(SPEC.format(root.name))
    monkeypatch.chdir(project)
    monkeypatch.setenv("ARCTL_SPECS", f"{s2}{os.pathsep}{s1}{os.pathsep}{sandbox.specs}")
    rows = {r["name"]: r for r in json.loads(sandbox.run("ls", "--json").out)}
    hidden = [str(s1.resolve() / "experiments" / "mine.yaml"), str(project.resolve() / "experiments" / "mine.yaml")]
    assert rows["mine"]["path"] == str(s2.resolve() / "experiments" / "mine.yaml")
    assert rows["mine"]["shadows"] == hidden
    # the sandbox's copies overlay the shipped specs (the same text: listed, never a note)
    assert rows["main-grpo"]["shadows"] == [str(PROJECT_ROOT / "experiments" / "main-grpo.yaml")]
    listed = sandbox.run("ls")  # where the hidden files come from, as for the spec itself (their paths in --json)
    (mine,) = [line for line in listed.out.splitlines() if line.startswith("mine ")]
    assert listed.code == 0 and "shadows" in listed.out.splitlines()[0], listed.out
    assert "$ARCTL_SPECS, project" in mine and str(s1) not in listed.out, mine
    note = (f"note: experiments/mine.yaml: {rows['mine']['path']} ($ARCTL_SPECS) is used; it overlays "
            f"{hidden[0]} ($ARCTL_SPECS), {hidden[1]} (project), which are not read")
    assert _notes(sandbox.run("run", "mine", "--dry-run", *launch_args(sandbox))) == [note]
    result = sandbox.run("run", "mine", "--dry-run", "--json", *launch_args(sandbox))
    assert json.loads(result.out) and "overlays" not in result.out and note in _notes(result)


def test_a_project_spec_under_a_shipped_sweep(sandbox, tmp_path, monkeypatch):
    (tmp_path / "project" / "experiments").mkdir(parents=True)
    mine = tmp_path / "project" / "experiments" / "main-grpo.yaml"
    mine.write_text(SPEC.format("my grpo"))
    monkeypatch.chdir(tmp_path / "project")
    monkeypatch.delenv("ARCTL_SPECS")
    notes = _notes(sandbox.run("sweep", "priors", "--dry-run", "--seeds", "0", *launch_args(sandbox)))
    assert notes == [f"note: experiments/main-grpo.yaml: {mine.resolve()} (project) is used; it overlays "
                     f"{PROJECT_ROOT / 'experiments' / 'main-grpo.yaml'} (shipped), which is not read"], notes
    mine.write_text((PROJECT_ROOT / "experiments" / "main-grpo.yaml").read_text())  # a fresh `arctl cp`: no note
    assert _notes(sandbox.run("sweep", "priors", "--dry-run", "--seeds", "0", *launch_args(sandbox))) == []
