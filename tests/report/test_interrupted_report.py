"""A Ctrl-C during `arctl report` leaves the previous report's files, each whole, and says so (from a hunt: a
Ctrl-C left ablation_vr.pdf cut at 457 bytes, and claims.json/.md of one run beside claims.html of the run
before, exit 130 without a word). A report's files are written beside their targets and put in place
together at the end (arctl.report.style.Outputs)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from interrupts import group_killed_at_exit  # tests/support/interrupts.py
from typer.testing import CliRunner

from arctl.cli.main import app
from arctl.report import style

runner = CliRunner()


def _previous(out: Path, names: list[str]) -> dict[str, bytes]:
    """Stand-ins for an earlier report's files in ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    files = {name: f"previous {name}\n".encode() for name in names}
    for name, data in files.items():
        (out / name).write_bytes(data)
    return files


def _tree(out: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in out.iterdir()}  # hidden temporaries too


FIGURE = ["ablation_vr.png", "ablation_vr.pdf", "ablation_vr.svg", "ablation_vr.csv", "ablation_vr.runs.json"]


def test_a_ctrl_c_while_a_figure_renders_leaves_the_previous_files_and_says_so(workspace, tmp_path, monkeypatch):
    out = tmp_path / "report"
    before = _previous(out, FIGURE)
    real, parent = style._savefig, os.getpid()

    def interrupted_at_the_svg(fig, path):
        if os.getpid() == parent and path.suffix == ".svg":  # the PNG is written (and the PDF, by a copy)
            raise KeyboardInterrupt
        real(fig, path)

    monkeypatch.setattr(style, "_savefig", interrupted_at_the_svg)
    res = runner.invoke(app, ["report", "--figure", "ablation_vr", "--workdir", str(workspace), "--out", str(out)])
    assert res.exit_code == 130, res.output
    assert f"interrupted: {out} holds the previous outputs" in " ".join(res.output.split())
    assert _tree(out) == before  # each file as it was, no temporary left


@pytest.mark.parametrize("where", ["reading the runs", "rendering the figure"])
def test_a_ctrl_c_during_a_first_report_says_none_was_written(workspace, tmp_path, monkeypatch, where):
    """A report stopped before its files were put in place, in a folder that held none of them, has no previous
    outputs to speak of (from a review: "rep-new holds the previous outputs" of a folder that did not exist)."""
    from arctl.report import data

    out = tmp_path / "report"
    real, parent = style._savefig, os.getpid()

    def interrupted_at_the_svg(fig, path):
        if os.getpid() == parent and path.suffix == ".svg":
            raise KeyboardInterrupt
        real(fig, path)

    def interrupted(*_args, **_kwargs):
        raise KeyboardInterrupt

    if where == "reading the runs":
        monkeypatch.setattr(data, "load_runs", interrupted)
    else:
        monkeypatch.setattr(style, "_savefig", interrupted_at_the_svg)
    res = runner.invoke(app, ["report", "--figure", "ablation_vr", "--workdir", str(workspace), "--out", str(out)])
    assert res.exit_code == 130, res.output
    said = " ".join(res.output.split())
    assert f"interrupted: no report was written to {out}" in said and "previous" not in said, res.output
    assert not out.exists() or _tree(out) == {}


def test_a_ctrl_c_while_a_table_is_written_leaves_the_previous_files(workspace, tmp_path, monkeypatch):
    from arctl.report import tables

    out = tmp_path / "report"
    before = _previous(out, ["final.md", "final.tex", "final.csv", "final.runs.json"])

    def interrupted(*_args, **_kwargs):  # after the Markdown
        raise KeyboardInterrupt

    monkeypatch.setattr(tables, "to_latex", interrupted)
    res = runner.invoke(app, ["report", "--table", "final", "--workdir", str(workspace), "--out", str(out)])
    assert res.exit_code == 130, res.output
    assert f"interrupted: {out} holds the previous outputs" in " ".join(res.output.split())
    assert _tree(out) == before


def test_a_ctrl_c_while_the_claims_page_renders_leaves_the_three_previous_files(workspace, tmp_path, monkeypatch):
    from arctl.report import claims_render

    out = tmp_path / "report"
    before = _previous(out, ["claims.json", "claims.md", "claims.html"])

    def interrupted(*_args, **_kwargs):  # its figures take the longest: the hunt's Ctrl-C came here
        raise KeyboardInterrupt

    monkeypatch.setattr(claims_render, "to_html", interrupted)
    res = runner.invoke(app, ["report", "--claims", "priors", "ablations", "--scale", "tiny", "--workdir",
                              str(workspace), "--out", str(out)])
    assert res.exit_code == 130, res.output
    assert f"interrupted: {out} holds the previous outputs" in " ".join(res.output.split())
    assert _tree(out) == before


@pytest.fixture
def sigint_raises():
    """Ctrl-C raises KeyboardInterrupt here, as in a terminal (a shell starts background jobs with it ignored)."""
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, before)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="forked saving is Linux-only")
def test_the_copy_that_writes_the_pdf_outlives_a_ctrl_c_to_the_process_group(tmp_path, monkeypatch, sigint_raises):
    """A terminal's Ctrl-C reaches every process of the group: the forked copy died of it mid-PDF. The parent
    decides; the copy ignores it."""
    real, parent, marker = style._savefig, os.getpid(), tmp_path / "copy-went-on"

    def ctrl_c_in_the_copy(fig, path):
        if os.getpid() != parent:
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.05)  # a handler that raises has raised by now
            marker.write_text("yes")
        real(fig, path)

    monkeypatch.setattr(style, "_savefig", ctrl_c_in_the_copy)
    fig, axes = style.new_figure(1, 1)
    axes[0][0].plot([0, 1], [0, 1])
    paths = style.save_figure(fig, tmp_path / "out", "fig")
    assert marker.exists()
    assert paths[1].read_bytes().rstrip().endswith(b"%%EOF")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="forked saving is Linux-only")
def test_a_ctrl_c_while_the_copy_writes_stops_it_and_leaves_the_previous_files(tmp_path, monkeypatch):
    out = tmp_path / "out"
    before = _previous(out, ["fig.png", "fig.pdf", "fig.svg"])
    children = []

    def interrupted(pid, _timeout):
        children.append(pid)
        raise KeyboardInterrupt

    monkeypatch.setattr(style, "_wait_ok", interrupted)
    fig, axes = style.new_figure(1, 1)
    axes[0][0].plot([0, 1], [0, 1])
    try:
        with pytest.raises(KeyboardInterrupt):
            style.save_figure(fig, out, "fig")
        assert len(children) == 1
        with pytest.raises(ChildProcessError):  # stopped and reaped before its file was removed
            os.waitpid(children[0], os.WNOHANG)
    finally:
        for pid in children:
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass
    assert _tree(out) == before


def test_a_ctrl_c_held_back_while_the_files_are_put_in_place_comes_after_the_last(tmp_path, monkeypatch,
                                                                                 sigint_raises):
    """The renames of a report's files are not cut in the middle: the Ctrl-C acts after them, and the
    caller can tell the new files are there (its message must not say the old ones are)."""
    targets = [tmp_path / name for name in ("a.md", "b.json", "c.html")]
    for t in targets:
        t.write_text("old")
    real, renamed = os.replace, []

    def replace(src, dst):
        if not renamed:
            os.kill(os.getpid(), signal.SIGINT)
        real(src, dst)
        renamed.append(dst)

    outputs = style.Outputs()
    with pytest.raises(KeyboardInterrupt):
        with outputs:
            for t in targets:
                outputs.write_text(t, "new")
            monkeypatch.setattr(os, "replace", replace)
    monkeypatch.setattr(os, "replace", real)
    assert [t.read_text() for t in targets] == ["new", "new", "new"] and len(renamed) == 3
    assert outputs.in_place
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.md", "b.json", "c.html"]


def _arctl() -> list[str]:
    return [sys.executable, "-c", "from arctl.cli.main import main; main()"]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="process groups and forked saving")
def test_ctrl_c_to_the_process_group_of_a_figure_report(workspace, tmp_path):
    """The hunt's case end to end: SIGINT to the whole group (as a terminal sends it) while the figure
    renders."""
    out = tmp_path / "report"
    before = _previous(out, FIGURE)
    stamps = {name: (out / name).stat().st_mtime_ns for name in FIGURE}
    env = {**os.environ, "ARCTL_CACHE": str(tmp_path / "cache")}
    proc = subprocess.Popen([*_arctl(), "report", "--figure", "ablation_vr", "--workdir", str(workspace), "--out",
                             str(out)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            start_new_session=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    with group_killed_at_exit(proc):
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:  # the figure is being written
            if any(p.name.startswith(".ablation_vr.") for p in out.iterdir()) or any(
                    (out / n).stat().st_mtime_ns != stamps[n] for n in FIGURE if (out / n).exists()):
                break
            time.sleep(0.002)
        os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert f"interrupted: {out} holds the previous outputs" in " ".join(err.split()), err
    time.sleep(0.5)  # a forked copy left behind would write its PDF by now
    assert _tree(out) == before


@pytest.mark.parametrize("command", ["figure", "claims"])
def test_an_error_a_ctrl_c_caused_is_the_ctrl_c(workspace, tmp_path, monkeypatch, command):
    """From this file's process-group test under load: the Ctrl-C landed in matplotlib's first import of its Agg
    renderer, which raised "ImportError: initialization failed" from the KeyboardInterrupt; the report printed a
    traceback and exited 1. An error raised from (or while handling) a Ctrl-C is the Ctrl-C: one line, exit 130."""
    from arctl.report import claims_render

    out = tmp_path / "report"
    before = _previous(out, FIGURE if command == "figure" else ["claims.md", "claims.json", "claims.html"])

    def import_stopped(*_args, **_kwargs):
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt as stop:
            raise ImportError("initialization failed") from stop

    if command == "figure":
        monkeypatch.setattr(style, "_savefig", import_stopped)
        args = ["report", "--figure", "ablation_vr"]
    else:
        monkeypatch.setattr(claims_render, "to_html", import_stopped)
        args = ["report", "--claims", "priors", "--scale", "tiny"]
    res = runner.invoke(app, [*args, "--workdir", str(workspace), "--out", str(out)])
    assert res.exit_code == 130, res.output
    assert f"interrupted: {out} holds the previous outputs" in " ".join(res.output.split()), res.output
    assert "Traceback" not in res.output and _tree(out) == before


def test_only_errors_a_ctrl_c_caused_are_read_as_one():
    from arctl.cli.main import interrupt_in

    def raised(make):
        try:
            make()
        except BaseException as err:  # noqa: BLE001
            return err

    def from_stop():
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt as stop:
            raise ImportError("initialization failed") from stop

    def while_stopping():
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt:
            raise OSError("cleanup failed")  # noqa: B904 - raised while handling it, as a cleanup's would be

    def suppressed():
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt:
            raise ValueError("unrelated") from None

    def plain():
        raise ImportError("no module")

    assert isinstance(interrupt_in(raised(from_stop)), KeyboardInterrupt)
    assert isinstance(interrupt_in(raised(while_stopping)), KeyboardInterrupt)
    assert interrupt_in(raised(suppressed)) is None and interrupt_in(raised(plain)) is None
