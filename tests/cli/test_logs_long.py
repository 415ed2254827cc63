"""`arctl logs` of long logs and of logs cut under a follower (found by a hunt of long runs, 2026-12-06): the last
--tail lines are read from the file's end, not by reading and decoding the whole file (a 500 MB log took 1.8 GB to
show 200 lines; a multi-GB verl/Ray log killed the command), --tail 0 in pieces, and --follow goes on from a log's
start, saying so, once it is truncated (``: > log``, logrotate's copytruncate) or replaced by a new file (it showed
nothing until the file grew past the old offset, then the rest of a line). The workspaces are built by hand: a
registry row and the run's job/<job id>/ folder with submitit's log files."""

from __future__ import annotations

import codecs
import contextlib
import io
import json
import os
import pathlib
import re
import tempfile
from unittest import mock

from hypothesis import given, settings
from hypothesis import strategies as st
from log_follow import following  # tests/support/log_follow.py
from logged_run import registered_run  # tests/support/logged_run.py
from typer.testing import CliRunner

from arctl.cli import cmd_logs
from arctl.cli.common import output_text
from arctl.cli.main import app
from arctl.launch import states

RULE = re.compile(r"^[─-]{20,}$")
LINE = "step {:06d}/200000 | actor/pg_loss: 0.0123 | critic/score/mean: 0.5 | response_length/mean: 1234.5\n"


def _run(tmp_path, state: str = states.COMPLETED, job_id: str = "2222"):
    """(workspace, run id, the job's stdout file): one run of ablation-vr, ``state`` in the registry, job ``job_id``."""
    ws, run_id, run_dir = registered_run(tmp_path, state, job_id, host="another-host")
    (run_dir / "job" / job_id).mkdir(parents=True)
    return ws, run_id, run_dir / "job" / job_id / f"{job_id}_0_log.out"


def _logs(*args: str) -> str:
    res = CliRunner().invoke(app, ["logs", *args], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    return res.stdout


def _section(out: str, name: str) -> list[str]:
    """The lines under the header of the log file ``name``, up to the next rule or arctl's closing line."""
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if i and RULE.match(lines[i - 1]) and line.startswith(name + " "))
    body = []
    for line in lines[start + 1:]:
        if RULE.match(line) or line.startswith("-- ") and not line.startswith("-- log "):
            break
        body.append(line)
    return body


class _Counted:
    """A log file opened by the command, counting the bytes (or characters) it reads and its largest read."""

    def __init__(self, fh, reads: list[int]) -> None:
        self._fh, self._reads = fh, reads

    def read(self, *args):
        data = self._fh.read(*args)
        self._reads.append(len(data))
        return data

    def __getattr__(self, name):
        return getattr(self._fh, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self._fh.close()


def _count_log_reads(monkeypatch) -> list[int]:
    """Every read of a ``*_log.*`` file through ``Path.open`` (``read_bytes``/``read_text`` open it so too)."""
    reads: list[int] = []
    real = pathlib.Path.open

    def counting(self, *args, **kwargs):
        fh = real(self, *args, **kwargs)
        return _Counted(fh, reads) if "_log." in self.name else fh

    monkeypatch.setattr(pathlib.Path, "open", counting)
    return reads


def test_the_last_lines_of_a_long_log_are_read_from_its_end(tmp_path, monkeypatch):
    """A 10 MB log's last 200 lines (the default --tail), --json's, --tail 3's and --follow's first read: exactly its
    last lines, read with under 1 MB of it (the old command read all 10 MB, and decoded all of it, for each)."""
    ws, run_id, log = _run(tmp_path)
    n = 100_000
    with open(log, "w") as fh:
        fh.writelines(LINE.format(i) for i in range(n))
    (log.with_suffix(".err")).write_text("")
    assert log.stat().st_size > 9_000_000
    want = [LINE.format(i).rstrip("\n") for i in range(n - 200, n)]
    reads = _count_log_reads(monkeypatch)
    for args, last in ((), want), (("--tail", "3"), want[-3:]), (("--follow",), want):
        reads.clear()
        out = _logs(run_id, "--workdir", str(ws.root), *args)
        assert _section(out, log.name) == last, (args, out[-2000:])
        assert 0 < sum(reads) < 1_000_000, (args, sum(reads))
    reads.clear()
    doc = json.loads(_logs(run_id, "--workdir", str(ws.root), "--json"))
    assert [f["lines"] for f in doc["logs"]] == [want, []]
    assert 0 < sum(reads) < 1_000_000, sum(reads)


def test_all_of_a_long_log_is_read_in_pieces(tmp_path, monkeypatch):
    """--tail 0 shows every line of a 10 MB log, read 1 MiB at most at a time (the old command read it in one piece,
    then held its text and its lines beside it)."""
    ws, run_id, log = _run(tmp_path)
    n = 100_000
    with open(log, "w") as fh:
        fh.writelines(LINE.format(i) for i in range(n))
    reads = _count_log_reads(monkeypatch)
    out = _logs(run_id, "--workdir", str(ws.root), "--tail", "0")
    assert _section(out, log.name) == [LINE.format(i).rstrip("\n") for i in range(n)]
    assert sum(reads) >= log.stat().st_size and max(reads) <= 1 << 20, (sum(reads), max(reads))




def test_follow_starts_a_truncated_log_again_from_its_start(tmp_path, monkeypatch):
    """From a hunt: after ``: > log`` under `arctl logs --follow` nothing of the new lines was shown until the file
    grew past the old offset, then the rest of a line. Like ``tail -F``: a line saying so, then the file from its
    start; its unended last line, which will never end now, is written before."""
    ws, run_id, log = _run(tmp_path, states.RUNNING)
    log.write_text("old line 1\nold line 2\nold unended")

    def truncate():
        with open(log, "r+") as fh:  # the same file, cut (copytruncate): then what the job writes next
            fh.truncate(0)
            fh.write("new 1\n")

    running = {"state": states.RUNNING}
    following(monkeypatch, [
        (running, None),
        (running, truncate),
        (running, lambda: log.open("a").write("new 2\nnew 3 un")),
        ({"state": states.COMPLETED}, lambda: log.open("a").write("ended\n")),
    ])
    out = _logs(run_id, "--follow", "--workdir", str(ws.root))
    assert _section(out, log.name) == [
        "old line 1", "old line 2", "old unended", "-- log truncated; from its start --",
        "new 1", "new 2", "new 3 unended"], out


def test_follow_reads_a_log_replaced_by_another_file_from_its_start(tmp_path, monkeypatch):
    """A log renamed away and another made under its name (logrotate's create, a job restarted by hand), longer than
    what was read of the old one: the new file from its start, below a line saying so (it was read from the old
    file's offset: its first line cut)."""
    ws, run_id, log = _run(tmp_path, states.RUNNING)
    log.write_text("old\n")

    def replace():
        new = log.with_name("new.tmp")
        new.write_text("first line of the new file\nsecond line\n")
        os.replace(new, log)  # made while the old one was there: another inode

    running = {"state": states.RUNNING}
    following(monkeypatch, [(running, None), (running, replace), ({"state": states.COMPLETED}, None)])
    out = _logs(run_id, "--follow", "--workdir", str(ws.root))
    assert _section(out, log.name) == [
        "old", "-- log replaced; from its start --", "first line of the new file", "second line"], out


# pieces whose bytes are cut by small blocks: \n, \r (a bar's frames), \r\n cut in two, what splitlines also cut at,
# characters of 2 to 4 bytes, invalid and cut UTF-8, control sequences
PIECES = [b"a", b"bc", b"\n", b"\r", b"\r\n", b"\x0b", b"\x0c", b"\x1c", "\x85".encode(), b"\x85", "\u2028".encode(),
          "é".encode(), "€".encode(), "😀".encode(), b"\xe2\x82", b"\xf0\x9f", b"\xff", b"\x1b[31m", b"\x1b]0;t\x07"]


def _shown_line(line: str) -> str:
    """What a terminal shows of one line (written here, not read from cmd_logs): the text after its last \\r, a
    trailing \\r (as of a \\r\\n) dropped."""
    body = line.rstrip("\r")
    return body.split("\r")[-1]


def _expected(data: bytes, tail: int, follow: bool) -> tuple[list[str], str, bytes]:
    """The whole file decoded, cut at \\n only (a \\r is a progress bar's frame, not a line end: from a hunt), each
    line as a terminal shows it, then its last ``tail`` lines (0: all); followed, the unended last line held back
    (as shown: it may be kept from its newest frame on); and the bytes of a character cut at the end, kept for the
    next read."""
    dec = codecs.getincrementaldecoder("utf-8")(errors="replace")
    text = dec.decode(data)
    held = ""
    if follow:
        end = text.rfind("\n") + 1
        text, held = text[:end], text[end:]
    lines = text.split("\n")
    if not lines[-1]:
        lines.pop()
    lines = [_shown_line(line) for line in lines]
    return (lines[-tail:] if tail else lines), held, dec.getstate()[0]


@settings(max_examples=400, deadline=None, derandomize=True)
@given(parts=st.lists(st.sampled_from(PIECES), max_size=40), tail=st.integers(0, 6), block=st.integers(1, 9),
       chunk=st.integers(1, 9), follow=st.booleans())
def test_what_is_read_from_the_end_or_in_pieces_is_what_the_whole_file_gives(parts, tail, block, chunk, follow):
    """Blocks and pieces of a few bytes, cut anywhere (within a character, between \\r and \\n): the lines shown,
    the text --follow holds back (as a terminal shows it), the bytes of a cut last character kept for its next read
    and --json's lines are those of the whole file read at once."""
    data = b"".join(parts)
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as stack:
        path = pathlib.Path(tmp) / "1_0_log.out"
        path.write_bytes(data)
        stack.enter_context(mock.patch.object(cmd_logs, "_BLOCK", block))
        stack.enter_context(mock.patch.object(cmd_logs, "_CHUNK", chunk))
        out, buf = cmd_logs._Output(), io.StringIO()
        with contextlib.redirect_stdout(buf):
            out.first(path, tail, follow)
        lines, held, cut = _expected(data, tail, follow)
        assert buf.getvalue() == (output_text("\n".join(lines) + "\n") if lines else "")
        pending = out.pending.get(path, "")
        assert (_shown_line(pending), out.decoders[path].getstate()[0], out.offsets[path]) == (
            _shown_line(held), cut, len(data))
        whole = data.decode("utf-8", errors="replace").split("\n")  # read_text: a cut last character is U+FFFD
        whole = [_shown_line(line) for line in (whole[:-1] if not whole[-1] else whole)]
        assert cmd_logs._lines(path, tail) == (whole[-tail:] if tail else whole)


@settings(max_examples=200, deadline=None, derandomize=True)
@given(parts=st.lists(st.sampled_from(PIECES), max_size=40), chunk=st.integers(1, 9))
def test_json_lines_written_in_pieces_are_the_whole_file_s(parts, chunk):
    """--json --tail 0 writes each log's lines as it reads them (never the whole list, then the whole text: ~3x a
    multi-GB log in memory): the JSON array is the lines of the whole file read at once, for any cut."""
    data = b"".join(parts)
    with tempfile.TemporaryDirectory() as tmp, mock.patch.object(cmd_logs, "_CHUNK", chunk):
        path = pathlib.Path(tmp) / "1_0_log.out"
        path.write_bytes(data)
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            cmd_logs._write_json_lines(path)
        whole = data.decode("utf-8", errors="replace").split("\n")
        assert json.loads(buf.getvalue()) == [_shown_line(line) for line in (whole[:-1] if not whole[-1] else whole)]


def test_json_tail_0_is_the_document_of_a_tail_that_holds_every_line(tmp_path):
    """Streamed or not, one document: --tail 0's is --tail 10**9's (read whole), a log with no line included."""
    ws, run_id, log = _run(tmp_path)
    log.write_bytes("".join(LINE.format(i) for i in range(3000)).encode() + "naïve \"quoted\" \\ end".encode())
    (log.parent / "2222_0_log.err").write_bytes(b"")
    args = (run_id, "--workdir", str(ws.root), "--json")
    streamed = _logs(*args, "--tail", "0")
    doc = json.loads(streamed)
    assert doc == json.loads(_logs(*args, "--tail", str(10**9)))
    assert [len(f["lines"]) for f in doc["logs"]] == [3001, 0] and doc["logs"][0]["lines"][-1].endswith("\\ end")
    assert streamed.isascii() and streamed.endswith("}\n")
