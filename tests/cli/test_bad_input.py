"""Every bad input reported in issue 14 (items 5-11), exactly as reported: one ``error:`` line,
exit 2, no traceback, the workspace byte-identical, no sbatch call (tests/support/bad_input.py). The
hypothesis fuzz over the same contract is tests/cli/test_fuzz_input.py."""

from __future__ import annotations

import os

import pytest
from bad_input import launch_args

RUN = ["run", "main-ar-uniform"]

# item 5: out-of-range values
OUT_OF_RANGE = [
    "trainer.total_steps=99999999999999999999999",
    "seed=12345678901234567890123456",
    "cluster.mem_gb=-8",
    "tiny.threads=-1",
    "model.hidden_size=-1",
    "tiny.keep_checkpoints=0",
    "tiny.warmup.steps=-1",
    "rollout.n=10000000000",
    "thinking.budgets=[16,32,48,99999999999999]",
]


@pytest.mark.parametrize("override", OUT_OF_RANGE)
def test_out_of_range_values_are_refused(sandbox, override):
    result = sandbox.check_refused(*RUN, override, *launch_args(sandbox))
    key = override.split("=")[0]
    assert key in result.err


def test_a_figure_that_is_not_a_name_is_refused(sandbox):
    (sandbox.specs / "experiments" / "fig.yaml").write_text(
        "description: x\nfigure: 123\narms:\n  a: [algo=grpo, prior=base]\n")
    assert "figure" in sandbox.check_refused("run", "fig", *launch_args(sandbox)).err


def test_a_key_no_backend_reads_is_refused_not_ignored(sandbox):
    """thinking.temperature is in every run id but read by no backend (rollout.temperature is)."""
    err = sandbox.check_refused(*RUN, "thinking.temperature=0.6", *launch_args(sandbox)).err
    assert "thinking.temperature=0.6 is read by no backend" in err and "rollout.temperature" in err


def test_more_tiny_threads_than_the_job_asks_cores_for_is_refused(sandbox):
    """tiny.threads follows cluster.cpus_per_task; set apart and above it, a SLURM job would run its
    threads on fewer cores and the local executor would put one-thread runs' company beside it."""
    err = sandbox.check_refused(*RUN, "tiny.threads=2", "cluster.cpus_per_task=1", *launch_args(sandbox)).err
    assert "tiny.threads=2 is more than the cores" in err and "cluster.cpus_per_task=2" in err
    ok = sandbox.run(*RUN, "tiny.threads=2", "cluster.cpus_per_task=2", "--dry-run", *launch_args(sandbox))
    assert ok.code == 0 and ok.crash is None, ok.err


# item 6: tracebacks
@pytest.mark.parametrize("args", [
    ["cluster.mem_gb=abc"],
    ["--seeds", "99999999999999999999999"],
    ["--seeds", "0-100000000"],
    ["--seeds", "-3"],
    ["--seeds", "5-2"],
    # found by a black-box pass: an empty entry was skipped, a non-ASCII digit read as one (int() takes both)
    ["--seeds", "1,,2"],
    ["--seeds", "1,"],
    ["--seeds", ",1"],
    ["--seeds", "\u0661"],
    ["--seeds", "0-\u0662"],
], ids=["mem-abc", "seed-overflow", "seed-range-huge", "seed-negative", "seed-range-reversed", "seed-empty-entry",
        "seed-trailing-comma", "seed-leading-comma", "seed-arabic-indic-digit", "seed-range-to-arabic-indic"])
def test_values_that_used_to_raise_are_one_error_line(sandbox, args):
    sandbox.check_refused(*RUN, *args, *launch_args(sandbox))


def test_seeds_too_large_in_a_spec_file_is_an_error(sandbox):
    (sandbox.specs / "experiments" / "big.yaml").write_text(
        "description: x\nseeds: [99999999999999999999999]\narms:\n  a: [algo=grpo, prior=base]\n")
    sandbox.check_refused("run", "big", *launch_args(sandbox))


def test_a_spec_file_that_is_not_utf8_is_an_error(sandbox):
    (sandbox.specs / "experiments" / "latin.yaml").write_bytes(
        "description: caf\xe9\narms:\n  a: [algo=grpo, prior=base]\n".encode("latin-1"))
    assert "UTF-8" in sandbox.check_refused("run", "latin", *launch_args(sandbox)).err


# item 7: markup injection: user text is printed as text
@pytest.mark.parametrize("args", [
    ["run", "[/x]"],
    ["status", "[/]"],
    ["run", "main-ar-uniform", "thinking.lam=[/]"],
    ["run", "[link=file:///etc/passwd]x"],
    ["run", "main-ar-uniform", "[bold]nosuch.key[/bold]=1"],
], ids=["run-closing-tag", "status-closing-tag", "override-value", "link", "override-key"])
def test_rich_markup_in_user_text_is_printed_verbatim(sandbox, args):
    extra = launch_args(sandbox) if args[0] == "run" else ["--workdir", str(sandbox.ws)]
    result = sandbox.check_refused(*args, *extra)
    shown = args[1] if args[0] != "run" or len(args) == 2 else args[2].split("=")[0]
    assert shown in result.err, result.err  # escaped, not interpreted or rewritten


# item 8: names are names
@pytest.mark.parametrize("name", ["/etc/passwd", "../sweeps/lambda", "a/b", "..", ".hidden", "Main-GRPO", ""])
def test_experiment_names_that_are_paths_are_refused(sandbox, name):
    sandbox.check_refused("run", name, *launch_args(sandbox))


def _valid_spec_outside(sandbox):
    """A valid experiment file outside ``experiments/`` (what a path would reach)."""
    text = (sandbox.specs / "experiments" / "main-grpo.yaml").read_text()
    (sandbox.specs / "outside.yaml").write_text(text)
    (sandbox.root / "x.yaml").write_text(text)


@pytest.mark.parametrize("how", ["relative", "absolute", "sweep-as-experiment"])
def test_a_name_cannot_load_a_file_outside_the_experiments_folder(sandbox, how):
    _valid_spec_outside(sandbox)
    name = {"relative": "../outside", "absolute": str(sandbox.specs / "outside"),
            "sweep-as-experiment": "../sweeps/lambda"}[how]
    sandbox.check_refused("run", name, *launch_args(sandbox))


def test_a_sweep_cannot_reach_outside_the_experiments_folder(sandbox):
    _valid_spec_outside(sandbox)
    (sandbox.specs / "sweeps" / "escape.yaml").write_text("description: x\nexperiments: ['../../x']\nseeds: [0]\n")
    sandbox.check_refused("sweep", "escape", *launch_args(sandbox))


# item 9: no resolver reads the environment or files
@pytest.mark.parametrize("override", [
    "wandb.name=${oc.env:WANDB_API_KEY}",
    "wandb.name=${oc.env:HOME,x}",
    "wandb.notes=prefix-${oc.env:USER}",
], ids=["api-key", "with-default", "inside-a-string"])
def test_oc_env_in_an_override_is_refused(sandbox, monkeypatch, override):
    monkeypatch.setenv("WANDB_API_KEY", "planted-key-0123456789")
    result = sandbox.check_refused(*RUN, override, *launch_args(sandbox))
    assert "oc.env" in result.err and "planted-key" not in result.err


def test_oc_env_in_a_spec_file_is_refused(sandbox, monkeypatch):
    monkeypatch.setenv("WANDB_API_KEY", "planted-key-0123456789")
    (sandbox.specs / "experiments" / "leak.yaml").write_text(
        "description: x\noverrides: ['wandb.name=${oc.env:WANDB_API_KEY}']\narms:\n  a: [algo=grpo, prior=base]\n")
    result = sandbox.check_refused("run", "leak", *launch_args(sandbox))
    assert "planted-key" not in result.err


@pytest.mark.parametrize("override", ['cluster.setup=["export WANDB_API_KEY=planted-key-0123456789"]',
                                      'cluster.sbatch_extra=["--export=ALL,WANDB_API_KEY=planted-key-0123456789"]'],
                         ids=["setup", "sbatch-extra"])
@pytest.mark.parametrize("command", ["run", "show"])
def test_an_api_key_in_the_job_scripts_lines_is_refused(sandbox, override, command):
    """From a review: a key written into cluster.setup was shown, frozen into config.yaml, written into the
    sbatch script (and SLURM's state) and exported with the run."""
    args = [command, "main-grpo", override, *(launch_args(sandbox) if command == "run" else [])]
    result = sandbox.check_refused(*args)
    assert "WANDB_API_KEY" in result.err and "planted-key" not in result.err


@pytest.mark.parametrize("line", ["export WANDB_API_KEY=$(cat ~/.wandb_key)", 'export WANDB_API_KEY="$MY_KEY"',
                                  "unset WANDB_API_KEY"])
def test_a_setup_line_that_reads_or_unsets_the_api_key_is_no_secret(sandbox, line):
    """A review of the rule above: it refused any line naming the variable, a key read from a file included."""
    done = sandbox.run("show", "main-grpo", f"cluster.setup=['{line}']", "--json")
    assert done.code == 0, done.err


def test_an_api_key_in_verls_raw_overrides_is_refused(sandbox):
    """verl.overrides are frozen into config.yaml too (a review of the rule above: only the job script's lines
    were looked at)."""
    done = sandbox.run("show", "ctx-16k", "--scale", "paper",
                       "verl.overrides=['+actor_rollout_ref.env_vars.WANDB_API_KEY=planted-key-0123456789']", "--json")
    assert done.code == 2 and "writes out WANDB_API_KEY" in done.err and "planted-key" not in done.err, done.err


@pytest.mark.parametrize("variable, override", [
    ("WANDB_API_KEY", "cluster.setup=['wandb login planted0123456789abcdef0123456789abcdef']"),
    ("WANDB_API_KEY", "cluster.setup=['echo machine api.wandb.ai password planted0123456789abcdef0123456789abcdef "
                      ">> ~/.netrc']"),
    ("HF_TOKEN", "cluster.sbatch_extra=['--export=ALL,HF_TOKEN=planted0123456789abcdef0123456789abcdef']"),
    ("AWS_SECRET_ACCESS_KEY", "wandb.tags=[xplanted0123456789abcdef0123456789abcdefx]"),
])
@pytest.mark.parametrize("command", ["run", "show"])
def test_a_secret_of_the_shell_written_anywhere_in_the_config_is_refused(sandbox, monkeypatch, variable, override,
                                                                        command):
    """From a review: the rule above reads one spelling (WANDB_API_KEY=...); `wandb login <key>`, a .netrc line or
    an HF token reached config.yaml, W&B's config and the job script. The value of a secret of the launching
    shell, whatever the spelling and wherever in the config, is refused, and never echoed."""
    monkeypatch.setenv(variable, "planted0123456789abcdef0123456789abcdef")
    args = [command, "main-grpo", override, *(launch_args(sandbox) if command == "run" else [])]
    result = sandbox.check_refused(*args)
    assert f"the value of ${variable} is written" in result.err and "planted" not in result.err, result.err
    monkeypatch.delenv(variable)  # the same config, with no such secret in the shell: accepted, unless its spelling
    # says a secret is written out (`wandb login KEY`, HF_TOKEN=...: tests/spec/test_setup_secrets.py)
    done = sandbox.run("show", "main-grpo", override, "--json")
    spelled = "wandb login" in override or f"{variable}=" in override
    assert (done.code, "writes out" in done.err) == ((2, True) if spelled else (0, False)), done.err


KEY = "planted0123456789abcdef0123456789abcdef"


@pytest.mark.parametrize("overrides", [["cluster.setup=['wandb login " + KEY + "']"],
                                       ["wandb.notes=" + KEY, "wandb.notes=x"],  # the config ends clean
                                       ["wandb.tags=[" + KEY]],  # unparsable: refused before Hydra echoes it
                         ids=["setup", "overridden-later", "unparsable"])
@pytest.mark.parametrize("where", ["environment", "netrc"])
def test_a_secret_in_an_override_is_refused_unechoed_even_where_a_later_one_replaces_it(sandbox, monkeypatch,
                                                                                        overrides, where):
    """From an audit: `wandb.notes=$KEY wandb.notes=x` passed (the composed config was clean) and a debug run's
    W&B file recorded the command line; a key set only by `wandb login` (~/.netrc, not the environment) written
    into cluster.setup reached config.yaml, the job script and SLURM's state; a parse error echoed the key."""
    home = sandbox.ws.parent / "home"
    home.mkdir(exist_ok=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("NETRC", raising=False)
    if where == "environment":
        monkeypatch.setenv("WANDB_API_KEY", KEY)
        said = "the value of $WANDB_API_KEY is written"
    else:
        monkeypatch.delenv("WANDB_API_KEY", raising=False)
        (home / ".netrc").write_text(f"machine api.wandb.ai\n  login user\n  password {KEY}\n")
        said = "the value of WANDB_API_KEY (~/.netrc) is written"
    result = sandbox.check_refused("run", "main-grpo", *overrides, *launch_args(sandbox))
    assert said in result.err and "planted" not in result.err, result.err


# item 10: an empty target is an error, never "everything"
@pytest.mark.parametrize("command", ["cancel", "resume", "status", "logs", "show"])
@pytest.mark.parametrize("target", ["", "  "], ids=["empty", "blank"])
def test_an_empty_target_is_an_error(sandbox, command, target):
    sandbox.add_runs()  # `arctl cancel "$RUN"` with RUN unset must not cancel these
    sandbox.check_refused(command, target, "--workdir", str(sandbox.ws))


# item 11: usage mistakes are one error line
@pytest.mark.parametrize("args", [
    ["sweep", "priors", "--array-parallelism", "0"],
    ["sweep", "priors", "--array-parallelism", "x"],
    ["run", "main-ar-uniform", "--no-such-option"],
    ["run"],
    ["nosuchcommand"],
], ids=["parallelism-0", "parallelism-x", "unknown-option", "missing-argument", "unknown-command"])
def test_usage_mistakes_are_one_error_line(sandbox, args):
    sandbox.check_refused(*args, "--workdir", str(sandbox.ws))


# arctl cp (issue 18): a bad name or an existing destination writes nothing
@pytest.mark.parametrize("args", [["cp", "../sweeps/lambda"], ["cp", "nosuch"], ["cp", "[/]"],
                                  ["cp", "ablation-vr", "--kind", "figure"]],
                         ids=["path", "unknown", "markup", "bad-kind"])
def test_cp_refuses_bad_names(sandbox, args):
    sandbox.check_refused(*args, str(sandbox.ws / "copy.yaml"))


@pytest.mark.parametrize("name, kind, says", [("main-grpo", "sweep", "'main-grpo' is an experiment, not a sweep"),
                                              ("priors", "experiment", "'priors' is a sweep, not an experiment")])
def test_cp_of_a_name_of_another_kind_says_which_kind_it_is(sandbox, name, kind, says):
    """Found by a black-box pass: 'no experiment, sweep or report named 'main-grpo' — did you mean 'main-grpo'"."""
    err = sandbox.check_refused("cp", name, "--kind", kind, str(sandbox.ws / "copy.yaml")).err
    assert says in err and "did you mean" not in err


def test_cp_dest_ending_in_a_slash_is_a_new_folder_and_an_empty_or_unmakeable_one_is_refused(sandbox):
    """Found by a black-box pass: typer's Path dropped the trailing '/' ('DEST: /x/newdir is not a .yaml
    file'), an empty DEST copied into the current folder, and /proc/x.yaml named the temporary file
    ('/proc/.x.yaml.v9w1jxcl.tmp: No such file or directory')."""
    done = sandbox.run("cp", "ablation-vr", str(sandbox.ws / "newdir") + "/")
    assert done.code == 0 and (sandbox.ws / "newdir" / "ablation-vr.yaml").is_file(), done.err
    assert "DEST is empty" in sandbox.check_refused("cp", "ablation-vr", "").err
    err = sandbox.check_refused("cp", "ablation-vr", "/proc/arctl-copy.yaml").err
    assert "/proc/arctl-copy.yaml:" in err and ".tmp" not in err
    (sandbox.ws / "afile").write_text("mine\n")  # a file where a folder of DEST would be: "afile: File exists" before
    err = sandbox.check_refused("cp", "ablation-vr", str(sandbox.ws / "afile" / "x.yaml")).err
    assert f"{sandbox.ws / 'afile'} is a file, not a folder" in err


def test_cp_refuses_to_overwrite_without_force(sandbox):
    (sandbox.ws / "mine.yaml").write_text("description: mine\n")
    result = sandbox.check_refused("cp", "ablation-vr", str(sandbox.ws / "mine.yaml"))
    assert "--force" in result.err


@pytest.mark.parametrize("value", ["trian", "yes", "[bold]x[/bold]"])
def test_an_unknown_warm_up_source_in_the_environment_is_refused(sandbox, monkeypatch, value):
    """$ARCTL_TINY_WARMUP is read by every tiny job: a typo stops the submission (it used to be
    ignored, and the jobs took the shipped warm-start the user had asked not to get)."""
    monkeypatch.setenv("ARCTL_TINY_WARMUP", value)
    err = sandbox.check_refused(*RUN, *launch_args(sandbox)).err
    assert "$ARCTL_TINY_WARMUP" in err and repr(value) in err and "shipped, train" in err


@pytest.mark.parametrize("value", ["train", "shipped", "TRAIN", ""])
def test_the_known_warm_up_sources_pass_validation(monkeypatch, value):
    from arctl.backends.tiny import settings
    from arctl.compose import resolve_experiment

    monkeypatch.setenv("ARCTL_TINY_WARMUP", value)
    resolve_experiment("main-ar-uniform", scale="tiny")  # validates: raises SpecError on a problem
    assert settings.warmup_source() == (value.lower() or "shipped")


def test_a_gpu_run_that_asks_slurm_for_no_gpu_is_refused(sandbox):
    """cluster=auto (the default) at paper scale: SLURM with a CPU job's defaults, no GPU; a site's
    profile (or cluster.gpus_per_node) gives it GPUs; the smoke and CPU runs ask for none on purpose."""
    err = sandbox.check_refused(*RUN, "--scale", "paper", *launch_args(sandbox)).err
    assert "cluster.gpus_per_node=0 asks SLURM for none" in err and "8 GPUs per node" in err
    assert "cluster=<profile> (slurm, slurm-a100" in err
    from arctl.backends.verl.overrides import slurm_gpu_problem
    from arctl.compose import resolve_experiment

    (paper,) = [r.config for r in resolve_experiment("main-ar-uniform", scale="paper")]
    assert slurm_gpu_problem(paper) is not None
    for fix in ({"cluster": {**paper["cluster"], "gpus_per_node": 8}}, {"verl": {**paper["verl"], "smoke": True}},
                {"verl": {**paper["verl"], "device": "cpu"}}):
        assert slurm_gpu_problem({**paper, **fix}) is None, fix


# found by a black-box pass: click keeps the last of a repeated option and drops the first silently
@pytest.mark.parametrize("args", [
    ["run", "main-ar-uniform", "--seeds", "0", "--seeds", "1"],
    ["run", "main-ar-uniform", "--seeds=0", "--scale", "tiny", "--seeds", "1"],
    ["sweep", "priors", "--scale", "tiny", "--scale=micro"],
    ["status", "--json", "--workdir", "a", "--workdir=b"],
    ["data", "prepare", "-o", "x", "--out=y"],
], ids=["run-seeds", "run-seeds-equals", "sweep-scale", "status-workdir", "data-short-and-long"])
def test_an_option_given_twice_is_refused(sandbox, args):
    extra = launch_args(sandbox) if args[0] in ("run", "sweep") else []
    err = sandbox.check_refused(*args, *extra).err
    assert "is given more than once" in err and f"`arctl {' '.join(args[:2] if args[0] == 'data' else args[:1])} --help`" in err


def test_every_single_valued_option_of_every_command_is_checked_and_multiple_ones_may_repeat():
    from arctl.cli.main import command, repeated_option

    root, checked, free = command(), 0, 0

    def walk(cmd, path):
        nonlocal checked, free
        for sub_name, sub in getattr(cmd, "commands", {}).items():
            walk(sub, [*path, sub_name])
        for param in cmd.params:
            if getattr(param, "param_type_name", "") != "option" or param.is_flag or param.count or not path:
                continue
            for opt in param.opts:
                args = [*path, opt, "v", opt, "v"]
                line = repeated_option(root, args)
                if param.multiple:
                    free += 1
                    assert line is None, args
                else:
                    checked += 1
                    assert line is not None and "/".join(param.opts) in line, args
                    assert repeated_option(root, [*path, opt, "v"]) is None, args
                    assert repeated_option(root, [*path, opt, "v", "--", opt, "v"]) is None, args  # after --: arguments
                    assert repeated_option(root, [*path, opt, opt, "--help"]) is None, args  # a value that looks like it
                    assert repeated_option(root, [*path, opt, "v", opt, "v", "--help"]) is None, args  # help wins
                    assert repeated_option(root, ["--version", *path, opt, "v", opt, "v"]) is None, args
    walk(root, [])
    assert checked > 30 and free >= 4, (checked, free)


def test_netrc_logins_of_a_self_hosted_wandb_count_and_an_unreadable_netrc_is_no_traceback(sandbox, monkeypatch):
    """From a review: a ~/.netrc that is not UTF-8 made every run/show a traceback (netrc raised UnicodeDecodeError);
    a self-hosted server's login ($WANDB_BASE_URL's host) was not a secret, and of two W&B logins only the first."""
    from arctl.track.identity import known_secrets, netrc_secrets

    home = sandbox.ws.parent / "home"
    home.mkdir(exist_ok=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("NETRC", raising=False)
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    (home / ".netrc").write_bytes(b"machine example.com login me password p\xe9ss\n")
    assert netrc_secrets({"HOME": str(home)}) == {}
    assert sandbox.run("show", "main-grpo", "--json").code == 0
    other = "corp" + KEY[4:]
    (home / ".netrc").write_text(f"machine api.wandb.ai login u password {KEY}\nmachine ml.corp.example login u "
                                 f"password {other}\n")
    assert set(known_secrets({"HOME": str(home)}).values()) == {KEY, other}  # every netrc password is a secret
    assert set(netrc_secrets({"HOME": str(home)}).values()) == {KEY}  # ml.corp.example is no W&B host by itself
    monkeypatch.setenv("WANDB_BASE_URL", "https://ml.corp.example:8443")
    assert set(known_secrets(dict(os.environ)).values()) == {KEY, other}
    for value in (KEY, other):  # either login's key, written in an override: refused, never echoed
        result = sandbox.check_refused("run", "main-grpo", f"wandb.notes={value}", *launch_args(sandbox))
        assert "WANDB_API_KEY (~/.netrc" in result.err and value not in result.err, result.err
