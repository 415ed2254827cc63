"""arctl under a locale or a stdout that is not UTF-8, and with paths that are not UTF-8 (from a hunt, 2026-12:
under a latin-1 locale a live job of a non-ASCII workspace was marked FAILED as another workspace's, W&B wrote into
a folder that does not exist, a report's files differed by machine or raised UnicodeEncodeError, and `arctl logs`,
`arctl ls` and `run --dry-run` were tracebacks under an ascii stdout).

No compiled locale is needed: ``LC_ALL=C PYTHONUTF8=0 PYTHONCOERCECLOCALE=0`` gives a process whose file-name and
locale encoding is ascii (paths with surrogateescape), ``PYTHONIOENCODING`` a stdout that is ascii or latin-1, or
UTF-8 and strict (a path with a byte that is not UTF-8 cannot be written to it as it is)."""

from __future__ import annotations

import contextlib
import functools
import io
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from arctl.cli import common
from arctl.config.files import workdir_named, workdir_remedy
from arctl.launch import refresh, states
from arctl.launch.registry import Registry, RunRecord, new_claim_token
from arctl.launch.workspace import UTF8_LOCALE_REMEDY, Workspace, path_encoding_problem

C_LOCALE = {"LC_ALL": "C", "PYTHONUTF8": "0", "PYTHONCOERCECLOCALE": "0"}  # ascii file names and locale
LOCALE_VARS = ("LC_ALL", "LC_CTYPE", "LANG", "PYTHONUTF8", "PYTHONIOENCODING", "PYTHONCOERCECLOCALE")
RUN_ID = "ablation-vr_grpo_s0_0123456789"
LOG_LINE = "step 1 → é"
needs_proc = pytest.mark.skipif(not Path("/proc/self/cmdline").exists(), reason="reads /proc/PID/cmdline")


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in LOCALE_VARS}
    return {**env, "LANG": "C.UTF-8", **extra}


def _python(code: str, *args: str | bytes, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, env=env, timeout=60)


def _arctl(*args: str, env: dict[str, str], cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "arctl.cli.main", *args], capture_output=True, env=env, cwd=cwd,
                          timeout=60)


@functools.cache
def _c_locale_is_ascii() -> bool:
    out = _python("import sys, locale; print(sys.getfilesystemencoding(), locale.getpreferredencoding(False))",
                  env=_env(**C_LOCALE))
    return out.stdout.split() == [b"ascii", b"ANSI_X3.4-1968"]


def c_locale() -> dict[str, str]:
    if not _c_locale_is_ascii():
        pytest.skip("LC_ALL=C does not give an ascii file-name encoding here")
    return _env(**C_LOCALE)


def _not_utf8(folder: Path, name: bytes = b"ws\xe9") -> Path:
    """``folder``/``name``, a name with a byte that is not UTF-8, as this process names it (surrogateescape)."""
    return Path(os.fsdecode(os.fsencode(folder) + b"/" + name))


# -- a job's command line is read as paths are (refresh._command_line) --------------------------------------------

@contextlib.contextmanager
def _sleeper(*args: str):
    """A process whose command line ends with ``args``, once /proc shows them (before, an empty command line is
    taken for one still exec'ing: alive, whatever the check)."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", *args])
    try:
        deadline = time.monotonic() + 30
        while os.fsencode(args[-1]) not in Path(f"/proc/{proc.pid}/cmdline").read_bytes():
            assert time.monotonic() < deadline, "the process never showed its arguments"
            time.sleep(0.01)
        yield proc
    finally:
        proc.kill()
        proc.wait()


@needs_proc
def test_a_job_of_a_workspace_whose_path_is_not_utf8_is_this_workspaces(tmp_path):
    """From a hunt: /proc/PID/cmdline was read as UTF-8 with replacement, the workspace path as the file system
    names it; for a path not UTF-8 the two differed, and a live job was "another workspace's", its run FAILED."""
    root = _not_utf8(tmp_path)
    (root / "runs" / RUN_ID).mkdir(parents=True)
    (tmp_path / "other").mkdir()
    with _sleeper(str(root)) as proc:
        assert refresh.pid_alive(proc.pid, argument=root)
        assert not refresh.pid_alive(proc.pid, argument=tmp_path / "other")  # another folder's job is not
    with _sleeper(str(root / "runs" / RUN_ID)) as proc:
        assert refresh.pid_alive(proc.pid, argument=root, under=True)


@needs_proc
def test_under_an_ascii_locale_a_job_of_a_non_ascii_workspace_is_this_workspaces(tmp_path):
    """The hunt's case: a UTF-8 path (wé中) under a locale whose file names are not UTF-8 (there latin-1, here
    ascii): every run of a launch failed at once as "another workspace's"."""
    root = tmp_path / "wé中"
    root.mkdir()
    code = ("import os, subprocess, sys, time\n"
            "from pathlib import Path\n"
            "from arctl.launch.refresh import pid_alive\n"
            "root = Path(sys.argv[1])\n"
            "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)', str(root)])\n"
            "while os.fsencode(str(root)) not in Path(f'/proc/{p.pid}/cmdline').read_bytes():\n"
            "    time.sleep(0.01)\n"
            "print(pid_alive(p.pid, argument=root), pid_alive(p.pid, argument=root.parent))\n"
            "p.kill()\n")
    out = _python(code, str(root), env=c_locale())
    assert out.returncode == 0, out.stderr.decode(errors="replace")
    assert out.stdout.split() == [b"True", b"False"]


# -- a workspace path W&B cannot be given (workspace.path_encoding_problem) ---------------------------------------

def test_a_path_that_is_utf8_on_disk_under_a_utf8_locale_is_no_problem(tmp_path):
    if sys.getfilesystemencoding() != "utf-8":
        pytest.skip("this test process's file names are not UTF-8")
    assert path_encoding_problem(tmp_path / "ws") is None
    assert path_encoding_problem(tmp_path / "wé中") is None


def test_a_path_with_a_byte_that_is_not_utf8_is_one_line_naming_it_and_what_to_do(tmp_path):
    if sys.getfilesystemencoding() != "utf-8":
        pytest.skip("this test process's file names are not UTF-8")
    root = _not_utf8(tmp_path)
    problem = path_encoding_problem(root, "--workdir")
    assert problem is not None and "\n" not in problem
    assert problem.startswith(workdir_named(root, "--workdir") + ":") and workdir_remedy("--workdir") in problem
    assert "not UTF-8" in problem and "ASCII" in problem
    assert UTF8_LOCALE_REMEDY not in problem  # the locale is UTF-8 already: the path itself is the problem


def test_under_a_latin1_locale_a_non_ascii_path_is_refused_naming_the_locale_remedy(tmp_path, monkeypatch):
    """A latin-1 locale (as the hunt's) without a compiled locale: this process's file names as latin-1's are."""
    monkeypatch.setattr(sys, "getfilesystemencoding", lambda: "iso8859-1")
    monkeypatch.setattr(os, "fsencode", lambda path: os.fspath(path).encode("iso8859-1", "surrogateescape"))
    assert path_encoding_problem(tmp_path / "ws") is None
    problem = path_encoding_problem(Path("/data/wé"), "ARCTL_HOME")
    assert problem is not None and "\n" not in problem
    assert UTF8_LOCALE_REMEDY in problem and "iso8859-1" in problem and workdir_remedy("ARCTL_HOME") in problem
    # a UTF-8 name on disk, which latin-1 reads as "wÃ©": the problem names the folder UTF-8 means
    problem = path_encoding_problem(Path("/data/w\xc3\xa9"))
    assert problem is not None and "/data/wé" in problem and UTF8_LOCALE_REMEDY in problem


def test_under_an_ascii_locale_a_utf8_path_is_refused_naming_the_locale_remedy(tmp_path):
    code = ("import sys\n"
            "from arctl.launch.workspace import path_encoding_problem\n"
            "print(path_encoding_problem(sys.argv[1]), path_encoding_problem(sys.argv[2]), sep='\\n')\n")
    out = _python(code, str(tmp_path / "wé"), str(tmp_path / "ws"), env={**c_locale(),
                                                                      "PYTHONIOENCODING": "utf-8:backslashreplace"})
    assert out.returncode == 0, out.stderr.decode(errors="replace")
    problem, plain = out.stdout.decode().splitlines()
    assert UTF8_LOCALE_REMEDY in problem and f"{tmp_path}/wé" in problem and "(ascii)" in problem
    assert plain == "None"


# -- arctl's own text files are UTF-8 (report outputs) -------------------------------------------------------------

def test_a_reports_text_files_are_utf8_under_an_ascii_locale(tmp_path):
    """From a hunt: Outputs.write_text wrote with the locale's encoding (claims.html declares utf-8): the files
    differed by machine, and a latin-1 locale raised UnicodeEncodeError on "→"."""
    code = ("import sys\n"
            "from arctl.report.style import Outputs\n"
            "with Outputs() as outputs:\n"
            f"    outputs.write_text(sys.argv[1], {ascii(LOG_LINE)})\n")  # (the source itself in ASCII)
    target = tmp_path / "claims.md"
    out = _python(code, str(target), env=c_locale())
    assert out.returncode == 0, out.stderr.decode(errors="replace")
    assert target.read_bytes() == LOG_LINE.encode("utf-8")


def test_a_tables_markdown_is_read_back_as_utf8_and_printed_under_an_ascii_locale(tmp_path):
    """`arctl report --table` prints its Markdown: read with the locale's encoding, a "–" cell (a benchmark a run did
    not log) was a UnicodeDecodeError under an ascii locale. The table's rendering is stood in for (it needs runs):
    the command's own writing, reading and printing are real."""
    code = ("import sys\n"
            "from pathlib import Path\n"
            "import arctl.report.render as render\n"
            "def table(name, *, out_dir, outputs, **_):\n"
            "    with outputs:\n"
            f"        md = outputs.write_text(Path(out_dir) / 'anytime.md', {ascii(LOG_LINE)})\n"
            "    return render.ReportResult(name, 'table', [md])\n"
            "render.render_table = table\n"
            "from arctl.cli.main import main\n"
            "sys.argv = ['arctl', *sys.argv[1:]]\n"
            "main()\n")
    (tmp_path / "ws").mkdir()
    out = _python(code, "report", "--table", "anytime", "--workdir", str(tmp_path / "ws"), "--out",
                  str(tmp_path / "out"), env=c_locale())
    assert out.returncode == 0, out.stderr.decode(errors="replace")
    assert (tmp_path / "out" / "anytime.md").read_bytes() == LOG_LINE.encode("utf-8")
    assert out.stdout.decode("ascii").splitlines()[-1] == LOG_LINE.encode("ascii", "backslashreplace").decode()


def test_an_export_index_is_read_as_utf8_under_an_ascii_locale(tmp_path):
    """export.json (written as UTF-8, arctl.config.files.atomic_write) read with the locale's encoding: a name
    that is not ASCII in it made the export "not an arctl export index"."""
    index = {"runs": {"r1": {"files": {"wandb/run-é.wandb": "sha"}}}}
    (tmp_path / "export.json").write_text(json.dumps(index, ensure_ascii=False), encoding="utf-8")
    code = ("import json, sys\n"
            "from arctl.report.export import read_index\n"
            "print(json.dumps(read_index(sys.argv[1])))\n")
    out = _python(code, str(tmp_path), env=c_locale())
    assert out.returncode == 0, out.stderr.decode(errors="replace")
    assert json.loads(out.stdout) == index


# -- the terminal: rules, and text stdout cannot encode --------------------------------------------------------------

@pytest.mark.parametrize("encoding", ["ascii", "latin-1", "utf-8"])
def test_a_section_rule_is_drawn_in_characters_stdout_can_encode(monkeypatch, encoding):
    """From a hunt: rich's untitled rule (a title too long for the width) ignores its ascii_only, and raised
    UnicodeEncodeError under an ascii or latin-1 stdout: `arctl logs RUN` printed no logs at all."""
    from rich.console import Console

    buffer = io.BytesIO()
    stream = io.TextIOWrapper(buffer, encoding=encoding)
    monkeypatch.setattr(common, "console", Console(file=stream, width=40, highlight=False, soft_wrap=True))
    common.section("x" * 60)  # too long for the rule: a plain rule, then the title
    common.section("short")
    stream.flush()
    lines = buffer.getvalue().decode(encoding).splitlines()
    line = common.RULE_LINE if encoding == "utf-8" else "-"
    assert lines[0] == line * 40 and lines[1] == "x" * 60
    assert lines[2].startswith(line * 3) and "short" in lines[2]


@pytest.fixture(scope="module")
def odd_workspace(tmp_path_factory) -> Path:
    """A workspace at a path with a byte that is not UTF-8, holding one completed run with a job log."""
    ws = Workspace(_not_utf8(tmp_path_factory.mktemp("locales")))
    ws.root.mkdir()
    with Registry(ws.registry_path) as reg:
        reg.claim([RunRecord(RUN_ID, "ablation-vr", "grpo", 0, scale="tiny", backend="tiny")], new_claim_token(),
                  members=["ablation-vr"])
        reg.update(RUN_ID, state=states.COMPLETED, executor="local", job_id="123", claim=None, before_claim=None)
    log = ws.run_dir(RUN_ID) / "job" / "123" / "123_0_log.out"
    log.parent.mkdir(parents=True)
    log.write_text(LOG_LINE + "\n", encoding="utf-8")
    return ws.root


def test_logs_under_an_ascii_stdout_prints_the_log_with_escapes(odd_workspace):
    out = _arctl("logs", RUN_ID, "--workdir", str(odd_workspace), env=_env(PYTHONIOENCODING="ascii", COLUMNS="40"))
    assert out.returncode == 0, out.stderr.decode(errors="replace")
    text = out.stdout.decode("ascii")
    assert "-" * 40 in text.splitlines()
    assert text.splitlines()[-1] == LOG_LINE.encode("ascii", "backslashreplace").decode()
    assert "ws\\udce9" in text  # the path's odd byte, escaped


@pytest.mark.parametrize("encoding", ["utf-8", "ascii"])
def test_status_and_logs_of_a_workspace_whose_path_is_not_utf8(odd_workspace, encoding):
    """A path with a byte that is not UTF-8 cannot be written to a strict stdout, UTF-8 or not: escaped; --json
    stays JSON, with the path as Python names it."""
    env = _env(PYTHONIOENCODING=encoding)
    out = _arctl("status", "--workdir", str(odd_workspace), env=env)
    assert out.returncode == 0, out.stderr.decode(errors="replace")
    text = out.stdout.decode(encoding)
    assert RUN_ID in text and f"{os.fsencode(odd_workspace)[:-1].decode()}\\udce9" in text  # the odd byte, escaped
    out = _arctl("status", "--json", "--workdir", str(odd_workspace), env=env)
    assert out.returncode == 0, out.stderr.decode(errors="replace")
    assert [r["run_id"] for r in json.loads(out.stdout)] == [RUN_ID]
    out = _arctl("logs", RUN_ID, "--json", "--workdir", str(odd_workspace), env=env)
    assert out.returncode == 0, out.stderr.decode(errors="replace")
    data = json.loads(out.stdout)
    assert data["run_dir"] == str(odd_workspace / "runs" / RUN_ID) and data["logs"][0]["lines"] == [LOG_LINE]


def test_logs_json_reads_the_log_as_utf8_under_an_ascii_locale(odd_workspace):
    """`arctl logs` decodes a job's log as UTF-8; its --json read it with the locale's encoding instead."""
    out = _arctl("logs", RUN_ID, "--json", "--workdir", str(odd_workspace), env=c_locale())
    assert out.returncode == 0, out.stderr.decode(errors="replace")
    assert json.loads(out.stdout)["logs"][0]["lines"] == [LOG_LINE]


def test_ls_under_an_ascii_stdout_escapes_a_specs_description_and_json_keeps_it(tmp_path):
    """From a hunt: a user's spec description with "—" made `arctl ls experiments` a traceback under an ascii
    stdout."""
    description = "Café — budget × 2"
    (tmp_path / "experiments").mkdir()
    (tmp_path / "experiments" / "uni.yaml").write_text(
        f'description: "{description}"\nfigure: ablation_vr\nseeds: [0]\narms:\n  grpo: [algo=grpo, prior=base]\n',
        encoding="utf-8")
    env = _env(PYTHONIOENCODING="ascii", ARCTL_SPECS=str(tmp_path))
    out = _arctl("ls", "experiments", env=env, cwd=tmp_path)
    assert out.returncode == 0, out.stderr.decode(errors="replace")
    (line,) = [line for line in out.stdout.decode("ascii").splitlines() if line.startswith("uni ")]
    assert line.endswith(description.encode("ascii", "backslashreplace").decode())
    out = _arctl("ls", "experiments", "--json", env=env, cwd=tmp_path)
    assert out.returncode == 0, out.stderr.decode(errors="replace")
    assert {e["name"]: e.get("description") for e in json.loads(out.stdout)}["uni"] == description


def test_a_launch_into_a_workspace_w_and_b_cannot_name_is_refused_and_its_dry_run_says_so(tmp_path):
    """The hunt's run under a locale that is not UTF-8 (here Python's ascii, LC_ALL=C without UTF-8 mode) into a
    non-ASCII workspace ended PREEMPTED, "W&B lost steps ... a full disk?" (wandb-core wrote into a folder that does
    not exist); now the launch and its dry run are refused in one line, exit 2, nothing written."""
    env = {**os.environ, "LC_ALL": "C", "PYTHONUTF8": "0", "PYTHONCOERCECLOCALE": "0"}
    probe = subprocess.run([sys.executable, "-c", "import sys; print(sys.getfilesystemencoding())"], env=env,
                           capture_output=True, text=True)
    if probe.stdout.strip() != "ascii":
        pytest.skip(f"LC_ALL=C gives {probe.stdout.strip()} here, not ascii")
    ws = tmp_path / "wé"
    for extra in (["--dry-run"], []):
        done = subprocess.run([sys.executable, "-m", "arctl.cli.main", "run", "main-grpo", "--scale", "tiny",
                               "--executor", "debug", "--workdir", os.fsencode(str(ws)), *extra],
                              env=env, capture_output=True, timeout=300)
        err = done.stderr.decode("utf-8", "replace")
        assert done.returncode == 2, err
        assert err.count("error:") == 1 and "LC_ALL=C.UTF-8 or PYTHONUTF8=1" in err and "Traceback" not in err, err
        assert not ws.exists()
