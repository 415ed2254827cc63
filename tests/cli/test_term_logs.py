"""`arctl logs` of logs holding progress bars (found by a hunt of the terminal output, 2026-12-06): lines are cut at
\\n only, as ``tail`` cuts them, and a line of \\r frames (a tqdm bar written to a file) is what a terminal shows of
it, its last frame; --tail counts such lines, --json's lines are the same, and --follow shows the same lines. A
300-frame bar filled the default last 200 lines with frames, and the warning before it was not shown; a CI test read
a requeued job's log with --tail 0 because the \\r pieces pushed its line out of the last 200."""

from __future__ import annotations

import codecs
import contextlib
import io
import json
import pathlib
import re
import tempfile
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from log_follow import following  # tests/support/log_follow.py
from logged_run import registered_run  # tests/support/logged_run.py
from typer.testing import CliRunner

from arctl.cli import cmd_logs, common
from arctl.cli.main import app
from arctl.launch import states

pytestmark = pytest.mark.usefixtures("shipped_specs")  # tests/cli/conftest.py

RULE = re.compile(r"^[─-]{20,}$")


def _run(tmp_path, state: str = states.COMPLETED, job_id: str = "16452"):
    """(workspace, run id, the job's stderr file, empty): one run of ablation-vr, ``state``, job ``job_id``."""
    ws, run_id, run_dir = registered_run(tmp_path, state, job_id, host="another-host")
    folder = run_dir / "job" / job_id
    folder.mkdir(parents=True)
    (folder / f"{job_id}_0_log.out").write_text("")
    return ws, run_id, folder / f"{job_id}_0_log.err"


def _logs(*args: str) -> str:
    res = CliRunner().invoke(app, ["logs", *args], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    return res.stdout


def _section(out: str, name: str) -> list[str]:
    """The lines under the header of the log file ``name``, up to the next rule or arctl's closing line."""
    lines = out.split("\n")
    start = next(i for i, line in enumerate(lines) if i and RULE.match(lines[i - 1]) and line.startswith(name + " "))
    body = []
    for line in lines[start + 1:]:
        if RULE.match(line) or line.startswith("-- ") or not line:
            break
        body.append(line)
    return body


def _bar(what: str, n: int) -> str:
    """A tqdm bar as it writes to a file: a \\r before each frame, a \\n after the last."""
    return "".join(f"\r{what}: {100 * i // n:3d}%|{'#' * (10 * i // n):10s}| {i}/{n}" for i in range(n + 1)) + "\n"


LOG = ("Loading weights\n" + _bar("Loading weights", 2)
       + "NCCL WARN something the user needs\n" + _bar("Training Progress", 300) + "trainer done\n")
SHOWN = ["Loading weights", "Loading weights: 100%|##########| 2/2", "NCCL WARN something the user needs",
         "Training Progress: 100%|##########| 300/300", "trainer done"]


@pytest.mark.parametrize("tail", [None, "200", "3", "0"])
def test_a_bar_is_one_line_its_last_frame_and_tail_counts_it_as_one(tmp_path, tail):
    ws, run_id, err = _run(tmp_path)
    err.write_text(LOG)
    args = ("--tail", tail) if tail else ()
    want = SHOWN[-int(tail):] if tail and tail != "0" else SHOWN
    assert _section(_logs(run_id, "--workdir", str(ws.root), *args), err.name) == want
    doc = json.loads(_logs(run_id, "--workdir", str(ws.root), "--json", *args))
    assert [f["lines"] for f in doc["logs"]] == [[], want]


def test_lines_are_cut_at_newlines_only(tmp_path):
    """A form feed, a vertical tab, \\x1c-\\x1e, NEL and the Unicode line separators are in a line (``splitlines``
    cut there); a \\r\\n ends a line as \\n does; a lone \\r at a line's end is dropped."""
    ws, run_id, err = _run(tmp_path)
    err.write_bytes("a\x0cb\nc\x0bd\x1ce\ny\u2028z\x85w\nwin\r\nend\r\n".encode())
    doc = json.loads(_logs(run_id, "--workdir", str(ws.root), "--json", "--tail", "4"))
    assert doc["logs"][1]["lines"] == ["c\x0bd\x1ce", "y\u2028z\x85w", "win", "end"]


def test_follow_shows_the_lines_a_first_read_shows(tmp_path, monkeypatch):
    """--follow in a pipe: a bar drawn while it follows is its last frame, once its line ends, as without --follow
    (it wrote each \\r frame raw, which a pipe's reader sees as lines)."""
    ws, run_id, err = _run(tmp_path, states.RUNNING)
    head, bar = "NCCL WARN before\n", _bar("Training Progress", 50)
    err.write_text(head + bar[:200])
    running = {"state": states.RUNNING}
    following(monkeypatch, [
        (running, None),
        (running, lambda: err.open("a").write(bar[200:400])),
        ({"state": states.COMPLETED}, lambda: err.open("a").write(bar[400:] + "done\n")),
    ])
    out = _logs(run_id, "--follow", "--workdir", str(ws.root))
    assert "\r" not in out, out
    assert _section(out, err.name) == ["NCCL WARN before", "Training Progress: 100%|##########| 50/50", "done"]


def test_follow_on_a_terminal_draws_the_bar_then_writes_its_line(tmp_path, monkeypatch):
    """On a terminal the bar moves as the job draws it (its newest whole frame, then \\r), and its ended line is
    written over it: the screen ends with the lines a first read shows."""
    ws, run_id, err = _run(tmp_path, states.RUNNING)
    bar = _bar("Training Progress", 50)
    err.write_text(bar[:300])
    monkeypatch.setattr(common.console, "forced_terminal", True)
    running = {"state": states.RUNNING}
    following(monkeypatch, [
        (running, None),
        ({"state": states.COMPLETED}, lambda: err.open("a").write(bar[300:] + "done\n")),
    ])
    out = _logs(run_id, "--follow", "--workdir", str(ws.root))
    frames = bar[:300].split("\r")
    assert f"{frames[-2]}\r" in out, out  # the newest whole frame of the first read
    screen = [line.rsplit("\r", 1)[-1] for line in out.split("\n")]  # what a terminal shows of each line
    assert screen[screen.index("Training Progress: 100%|##########| 50/50") + 1] == "done", out


def _text(data: bytes, final: bool) -> str:
    """``data`` decoded; not ``final``: a character cut at its end held back (for the next read)."""
    return codecs.getincrementaldecoder("utf-8")(errors="replace").decode(data, final)


def _shown_whole(data: bytes, final: bool = True) -> list[str]:
    """The lines of ``data`` as this test reads them: decoded, cut at \\n, each the text after its last \\r but a
    trailing one."""
    lines = _text(data, final).split("\n")
    if not lines[-1]:
        lines.pop()
    return [line.rstrip("\r").rsplit("\r", 1)[-1] for line in lines]


PIECES = [b"a", b"bc", b"\n", b"\r", b"\r\n", b"\r\r", b"\x0b", b"\x85", "\u2028".encode(), "é".encode(),
          "😀".encode(), b"\xe2\x82", b"\xff", b"\x1b[31m"]


@settings(max_examples=300, deadline=None, derandomize=True)
@given(parts=st.lists(st.sampled_from(PIECES), max_size=40), tail=st.integers(0, 6), block=st.integers(1, 9),
       chunk=st.integers(1, 9), follow=st.booleans())
def test_what_is_read_from_the_end_or_in_pieces_is_the_whole_files_lines(parts, tail, block, chunk, follow):
    """Blocks and pieces of a few bytes, cut anywhere (within a character, between \\r and \\n, among frames): the
    lines shown and --json's are those of the whole file, and the line --follow holds back shows as the whole file's
    unended last line."""
    data = b"".join(parts)
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as stack:
        path = pathlib.Path(tmp) / "1_0_log.out"
        path.write_bytes(data)
        for name, value in (("_BLOCK", block), ("_CHUNK", chunk)):
            stack.enter_context(mock.patch.object(cmd_logs, name, value))
        lines = _shown_whole(data)
        ended = data[:data.rfind(b"\n") + 1] if follow else data
        want = _shown_whole(ended, final=False)
        want = want[-tail:] if tail else want
        assert cmd_logs._lines(path, tail) == (lines[-tail:] if tail else lines)
        out, buf = cmd_logs._Output(), io.StringIO()
        with contextlib.redirect_stdout(buf):
            out.first(path, tail, follow)
        assert buf.getvalue() == common.output_text("".join(line + "\n" for line in want))
        if follow:
            held, unended = out.pending.get(path, ""), _text(data[len(ended):], final=False)
            assert cmd_logs._shown(held) == cmd_logs._shown(unended) if "\r" in unended else held == unended
