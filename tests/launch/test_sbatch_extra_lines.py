"""``cluster.sbatch_extra`` entries are read as sbatch reads an ``#SBATCH`` line (from a hunt): quotes removed, a
trailing ``# comment`` dropped, ``-X value`` short options as their long forms; a short option sbatch does not have is
refused in one line. Golden sbatch scripts (the ``# Parameters`` block submitit writes), a launch through the sbatch
shim (tests/support/slurm_shims.py), and sbatch itself reading the script arctl wrote (``sbatch --test-only -v`` prints
the options it read before it asks a controller), installed with the session's SLURM (``slurm_cluster``)."""

from __future__ import annotations

import gzip
import os
import re
import subprocess
import threading
from pathlib import Path

import pytest
import slurm_shims  # tests/support/slurm_shims.py
from typer.testing import CliRunner

from arctl.cli.main import app
from arctl.launch.executors import (
    SBATCH_FLAGS,
    SBATCH_SHORT,
    SBATCH_VALUED,
    LaunchError,
    render_sbatch,
    slurm_parameters,
)


# sbatch itself, as installed for the session's SLURM (the fixture installs SLURM's packages where they are not, and
# skips with its reason where it cannot): a skipif on `shutil.which("sbatch")` was read at collection, before that
# install, so on a fresh machine (CI's) these tests never ran
def installed_sbatch(test):
    return pytest.mark.slurm(pytest.mark.usefixtures("slurm_cluster")(test))


CLUSTER = {"executor": "slurm", "partition": "gpu", "nodes": 1, "gpus_per_node": 0, "cpus_per_task": 4,
           "time_min": 60, "preempt_warning_s": 30}


def _parameters_block(extra: list[str], **cluster) -> list[str]:
    """The ``#SBATCH`` lines of the script submitit writes for ``extra``, but the log paths (the test's folder)."""
    script = render_sbatch(slurm_parameters({**CLUSTER, **cluster, "sbatch_extra": extra}, "lt"), Path("/jobs/%j"), 1)
    return [line for line in script.splitlines() if line.startswith("#SBATCH") and "/jobs/" not in line]


ARCTLS = ["#SBATCH --cpus-per-task=4", "#SBATCH --job-name=lt", "#SBATCH --nodes=1", "#SBATCH --open-mode=append",
          "#SBATCH --partition=gpu", "#SBATCH --requeue", "#SBATCH --signal=USR1@30", "#SBATCH --time=60",
          "#SBATCH --wckey=submitit"]


@pytest.mark.parametrize("entry, lines", [
    # quotes as a job script has them: removed (they reached SLURM: Comment="hello world", Invalid node name "vm")
    ('#SBATCH --comment="hello world"', ["#SBATCH --comment='hello world'"]),
    ("--mail-user=\"me@x.org\"", ["#SBATCH --mail-user=me@x.org"]),
    ('--nodelist="vm"', ["#SBATCH --nodelist=vm"]),
    ("--constraint='a100|h100'", ["#SBATCH --constraint='a100|h100'"]),
    ('#SBATCH --comment "it\'s (v2), #1"', ["#SBATCH --comment='it'\"'\"'s (v2), #1'"]),
    # a trailing comment: dropped (it was the value's: Comment=abc   # why we need this)
    ("#SBATCH --comment=abc   # why we need this", ["#SBATCH --comment=abc"]),
    ("--exclusive # the whole node", ["#SBATCH --exclusive"]),
    # short options: their long forms (-w became --w, ambiguous; -k became --k, i.e. --kill-on-invalid-dep)
    ("#SBATCH -w vm", ["#SBATCH --nodelist=vm"]),
    ("-wvm", ["#SBATCH --nodelist=vm"]),
    ("-x other", ["#SBATCH --exclude=other"]),
    ("-k", ["#SBATCH --no-kill"]),
    ("-s", ["#SBATCH --oversubscribe"]),
    ("-L 'lic:2'", ["#SBATCH --licenses=lic:2"]),
    ("-m block", ["#SBATCH --distribution=block"]),
    # several options on a line, as sbatch reads them
    ('#SBATCH --comment "a b" --exclusive -w vm', ["#SBATCH --comment='a b'", "#SBATCH --exclusive",
                                                   "#SBATCH --nodelist=vm"]),
    # a backslash escapes the next character, inside quotes too: written so that sbatch reads the value back
    ("--comment='a\\\\b'", ["#SBATCH --comment='a\\\\b'"]),
])
def test_an_entry_is_written_as_sbatch_reads_its_job_script_line(entry, lines):
    block = _parameters_block([entry])
    assert [line for line in block if line not in ARCTLS] == lines, block
    assert [line for line in block if line in ARCTLS] == ARCTLS, block


def test_a_gres_request_in_quotes_is_read_for_its_gpu_count():
    """The GPU-count check read '"gpu:4"' as a GRES without a GPU: arctl's --gpus-per-node=8 line stayed beside
    it (SLURM refuses --gres=gpu with --gpus-per-node) and a count other than cluster.gpus_per_node passed."""
    with pytest.raises(LaunchError, match=re.escape("--gres=gpu:4 asks SLURM for 4 GPU(s) per node, but "
                                                    "cluster.gpus_per_node=8")):
        slurm_parameters({**CLUSTER, "gpus_per_node": 8, "sbatch_extra": ['#SBATCH --gres="gpu:4"']}, "lt")
    block = _parameters_block(['#SBATCH --gres="gpu:4"  # four of them'], gpus_per_node=4)
    assert [line for line in block if re.match(r"#SBATCH --(gres|gpus)", line)] == ["#SBATCH --gres=gpu:4"]


@pytest.mark.parametrize("entry, says", [
    ("-I", "-I is not one of sbatch's short options"),
    ("#SBATCH -l", "-l is not one of sbatch's short options"),
    ("-w", "-w (--nodelist) needs a value — write '--nodelist=VALUE'"),
    # a long option that needs a value, without one: sbatch took arctl's next #SBATCH line as it (from a hunt)
    ("--comment", "--comment needs a value — write '--comment=VALUE'"),
    ('--comment ""', "--comment needs a value — write '--comment=VALUE'"),
    ("#SBATCH --reservation  # the lab's", "--reservation needs a value — write '--reservation=VALUE'"),
    ("--gres", "--gres needs a value — write '--gres=VALUE'"),
    ("--mail-user", "--mail-user needs a value — write '--mail-user=VALUE'"),
    # an abbreviation of one, bare: sbatch read --comm as --comment and took the next line as its value
    ("--comm", "sbatch reads --comm as an abbreviation (of --comment, which needs a value) — write the option in full "
               "with its value, '--comment=VALUE'"),
    ("#SBATCH --reserv", "sbatch reads --reserv as an abbreviation (of --reservation, which needs a value)"),
    ("--mail", "--mail is an abbreviation of several sbatch options (--mail-type, --mail-user) — write the one you "
               "mean in full"),
    # sbatch refuses an ambiguous one at submission, after the launch's checks (from a review)
    ("--over", "--over is an abbreviation of several sbatch options (--overcommit, --oversubscribe)"),
    ("--wai", "--wai is an abbreviation of several sbatch options (--wait, --wait-all-nodes)"),
    ("--ex=x", "--ex is an abbreviation of several sbatch options (--exclude, --exclusive, --export, --export-file, "
               "--extra-node-info)"),
    ("--exclusive --licenses", "--licenses needs a value — write '--licenses=VALUE'"),
    ("--comment='a b", "has an unmatched ' — close the quote"),
    ("-k off", "has 'off' where sbatch expects an option"),
    ("#SBATCH # nothing", "has no sbatch option"),
    ("-t 10", "sets what arctl sets itself — use cluster.time_min"),
    ("-o /x", "sets what arctl sets itself — leave it out: `arctl logs`"),
    ("-n 2", "sets what arctl sets itself — leave it out: an arctl job runs one task per node"),
    ("--out=/x", "sbatch reads --out as an abbreviation (of --output, which arctl reads) — write the option in full"),
    ("--wait", "sets what arctl sets itself — leave it out: sbatch would not answer until the job ended"),
    ("-W", "sets what arctl sets itself — leave it out: sbatch would not answer until the job ended"),
    ("--parsable", "sets what arctl sets itself — leave it out: arctl reads the job id"),
    ("--test-only", "sets what arctl sets itself — leave it out: it submits nothing"),
    ("-h", "sets what arctl sets itself — leave it out: sbatch would print its help"),
])
def test_an_entry_sbatch_would_read_otherwise_is_refused_in_one_line(entry, says):
    with pytest.raises(LaunchError, match=re.escape(says)) as info:
        slurm_parameters({**CLUSTER, "sbatch_extra": [entry]}, "lt")
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("entry, line", [("--exclusive", "#SBATCH --exclusive"), ("--nice", "#SBATCH --nice"),
                                         ("--propagate", "#SBATCH --propagate"), ("--comment=", "#SBATCH --comment=''"),
                                         ("--exclusive --comment=x", "#SBATCH --comment=x")])
def test_an_option_whose_value_is_optional_stays_allowed_bare(entry, line):
    """Only options that require a value are refused bare: sbatch takes no next word for --exclusive or --nice, and
    --comment= gives an empty value (nothing swallowed)."""
    assert line in _parameters_block([entry])


@pytest.mark.parametrize("letter", sorted(SBATCH_SHORT))
def test_each_short_option_of_sbatchs_is_written_as_its_long_form(letter):
    """-X value (or -X, for one that takes none) is the line of its long form; before, only 14 letters were."""
    name = SBATCH_SHORT[letter].removesuffix("[=]")
    value = "v1" if name in SBATCH_VALUED else None
    entry = f"-{letter}" + (f" {value}" if value else "")
    try:
        block = _parameters_block([entry])
    except LaunchError as err:  # one arctl sets itself: refused with the key that sets it
        assert "sets what arctl sets itself" in str(err), err
        return
    assert f"#SBATCH --{name}" + (f"={value}" if value else "") in block, block


def _sbatch_pairs(help_text: str) -> dict[str, str]:
    return dict(re.findall(r"^\s+-([A-Za-z]), --([a-z][a-z-]*)", help_text, re.M))


@pytest.mark.slow
@installed_sbatch
def test_the_short_option_table_is_the_installed_sbatchs():
    """Every short option `sbatch --help` lists (and sbatch(1), where its man page is installed) has its long form in
    the table, and the table has no other."""
    helped = _sbatch_pairs(subprocess.run(["sbatch", "--help"], capture_output=True, text=True, timeout=60).stdout)
    man = Path("/usr/share/man/man1/sbatch.1.gz")
    if man.exists():
        text = gzip.decompress(man.read_bytes()).decode(errors="replace").replace("\\-", "-").replace("\\fR", "")
        helped.update(re.findall(r"^\\fB-([A-Za-z]), \\fB--([a-z][a-z-]*)", text, re.M))
    assert {k: v.removesuffix("[=]") for k, v in SBATCH_SHORT.items()} == helped


def _long_options_documented() -> set[str]:
    """The long options `sbatch --help` and sbatch(1) (where installed) name."""
    names = set(re.findall(r"--([a-z][a-z-]*)", _help()))
    man = Path("/usr/share/man/man1/sbatch.1.gz")
    if man.exists():
        text = gzip.decompress(man.read_bytes()).decode(errors="replace").replace("\\-", "-").replace("\\fR", "")
        names |= set(re.findall(r"^\\fB(?:-[A-Za-z], (?:\\fB)?)?--([a-z][a-z-]*)", text, re.M))
    return names


def _help() -> str:
    return subprocess.run(["sbatch", "--help"], capture_output=True, text=True, timeout=60).stdout


@pytest.mark.slow
@installed_sbatch
def test_the_table_of_options_that_need_a_value_is_the_installed_sbatchs(tmp_path):
    """Every long option `sbatch --help` writes --name=value is in the table; and the table is exactly the documented
    long options that the installed sbatch, given one bare as the last option, says "requires an argument" of (the
    help writes --export[=names] and --container without one, yet sbatch requires it)."""
    helped = set(re.findall(r"^\s+(?:-[A-Za-z],? +)?--([a-z][a-z-]*)=", _help(), re.M))
    assert helped and helped <= SBATCH_VALUED, sorted(helped - SBATCH_VALUED)
    script = tmp_path / "job.sh"
    script.write_text("#!/bin/sh\ntrue\n")
    required = set()
    for name in sorted(_long_options_documented() - {"quiet"}):  # -Q beside -v is refused before the options are read
        said = _sbatch_stderr(["--test-only", "-v", f"--{name}"], tmp_path, stdin=script)
        if f"option '--{name}' requires an argument" in said:
            required.add(name)
    assert required == SBATCH_VALUED, (sorted(required - SBATCH_VALUED), sorted(SBATCH_VALUED - required))


@pytest.mark.slow
@installed_sbatch
def test_the_other_long_options_are_the_installed_sbatchs():
    """The documented long options that need no value are the table's: a bare word that is neither these nor one that
    needs a value, but begins one of those, is refused as an abbreviation."""
    assert _long_options_documented() - SBATCH_VALUED == SBATCH_FLAGS


@pytest.fixture
def shimmed(tmp_path, monkeypatch, specs):
    """sbatch (and SLURM's other programs) as shims; sbatch keeps a copy of each script it is given."""
    saved = tmp_path / "submitted"
    saved.mkdir()
    slurm_shims.use(tmp_path / "bin", monkeypatch, srun="exit 0\n", scontrol="echo 'MaxArraySize = 1001'\n",
                    sbatch=f'n=$(ls {saved} | wc -l)\ncp "$1" {saved}/$n.sh\necho "Submitted batch job $((1000 + n))"\n')
    return saved


def _run(ws: Path, extra: str, *args: str):
    return CliRunner().invoke(app, ["run", "lt", "--arm", "a", "--executor", "slurm", "--workdir", str(ws),
                                    f"cluster.sbatch_extra={extra}", *args])


def test_a_launch_submits_the_lines_sbatch_reads_as_the_user_meant(shimmed, tmp_path):
    extra = "['#SBATCH --comment=\"hello world\"  # why', '#SBATCH -w vm', '--mail-user=\"me@x.org\"']"
    res = _run(tmp_path / "ws", extra)
    assert res.exit_code == 0, res.output
    [script] = [p.read_text() for p in shimmed.iterdir()]
    lines = script.splitlines()
    assert {"#SBATCH --comment='hello world'", "#SBATCH --nodelist=vm", "#SBATCH --mail-user=me@x.org"} <= set(lines)
    dry = _run(tmp_path / "ws2", extra, "--dry-run")
    assert dry.exit_code == 0 and "#SBATCH --comment='hello world'" in dry.output, dry.output


@pytest.mark.parametrize("entry, says", [
    ("#SBATCH -I", ["-I is not one of sbatch's short options", "write the option's long form"]),
    ("--comment", ["--comment needs a value — write '--comment=VALUE'"]),  # (it took --cpus-per-task=1 as its text)
])
def test_an_entry_refused_is_refused_before_anything_is_submitted(shimmed, tmp_path, entry, says):
    for args in ([], ["--dry-run"]):
        res = _run(tmp_path / "ws", f"[{entry!r}]", *args)
        assert res.exit_code == 2, res.output
        [line] = [line for line in res.stderr.splitlines() if line.strip()]
        assert line.startswith("error: ") and all(s in line for s in says), line
    assert list(shimmed.iterdir()) == [] and not (tmp_path / "bin" / "unexpected.log").exists()


def _sbatch_stderr(args: list[str], tmp_path: Path, stdin: Path | None = None) -> str:
    """What ``sbatch ARGS`` says on stderr up to the end of the options it read ("end of defined options", printed
    with -v before it asks the controller), or all of it where it stops before, against a slurm.conf of its own whose
    controller never answers (it is stopped there)."""
    conf = tmp_path / "slurm.conf"
    conf.write_text("ClusterName=qb\nSlurmctldHost=localhost\nSlurmctldPort=9\nNodeName=localhost CPUs=1\n"
                    "PartitionName=p Nodes=localhost Default=YES\n")
    with open(stdin or os.devnull) as given:
        proc = subprocess.Popen(["sbatch", *args], stdin=given, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                text=True, env={**os.environ, "SLURM_CONF": str(conf)})
    said = []
    watchdog = threading.Timer(120, proc.kill)  # an sbatch that never says its options fails the test, not hangs it
    watchdog.start()
    try:
        for line in proc.stderr:
            said.append(line)
            if "end of defined options" in line:
                break
    finally:
        watchdog.cancel()
        proc.kill()
        proc.wait()
    return "".join(said)


def _sbatch_reads(script: str, tmp_path: Path) -> dict[str, str]:
    """The options sbatch reads in ``script``: ``sbatch --test-only -v`` lists them ("defined options")."""
    path = tmp_path / "job.sh"
    path.write_text(script)
    found = re.findall(r"^sbatch: (\S+)\s+: (.*)$", _sbatch_stderr(["--test-only", "-v", str(path)], tmp_path), re.M)
    return dict(found)


@pytest.mark.slow
@installed_sbatch
def test_sbatch_reads_the_values_the_user_meant_from_the_script_arctl_writes(tmp_path):
    extra = ['#SBATCH --comment="it\'s (v2), #1"  # why', "#SBATCH -w vm", "-x 'other,n2'", '--gres="gpu:4"',
             "--mail-user='me@x.org'", "--licenses='a\\\\b'", "--constraint='a100|h100'"]
    script = render_sbatch(slurm_parameters({**CLUSTER, "gpus_per_node": 4, "sbatch_extra": extra}, "lt"),
                           tmp_path / "%j", 1)
    read = _sbatch_reads(script, tmp_path)
    assert {k: read.get(k) for k in ("comment", "nodelist", "exclude", "gres", "mail-user", "licenses", "constraint",
                                     "partition")} == {
        "comment": "it's (v2), #1", "nodelist": "vm", "exclude": "other,n2", "gres": "gres:gpu:4",
        "mail-user": "me@x.org", "licenses": "a\\b", "constraint": "a100|h100", "partition": "gpu"}, read


@pytest.mark.slow
@installed_sbatch
def test_sbatch_reads_arctls_lines_beside_a_bare_option(tmp_path):
    """A bare option whose value is optional (--exclusive) leaves arctl's next line as it is; a bare --comment, which
    sbatch read with arctl's --cpus-per-task=4 as its text (from a hunt), is refused before any script is written."""
    script = render_sbatch(slurm_parameters({**CLUSTER, "sbatch_extra": ["--exclusive"]}, "lt"), tmp_path / "%j", 1)
    read = _sbatch_reads(script, tmp_path)
    assert {k: read.get(k) for k in ("exclusive", "cpus-per-task", "signal", "comment")} == {
        "exclusive": "exclusive", "cpus-per-task": "4", "signal": "USR1@30", "comment": None}, read
    for entry in ("--comment", '--comment ""'):
        with pytest.raises(LaunchError, match="--comment needs a value"):
            slurm_parameters({**CLUSTER, "sbatch_extra": [entry]}, "lt")
