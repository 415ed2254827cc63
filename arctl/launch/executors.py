"""submitit executors from a run's ``cluster`` section: slurm, local, debug (and auto).

``auto`` means SLURM when ``sbatch`` is on PATH, else local. SLURM jobs get the ``cluster``
profile as sbatch options (partition, account, qos, nodes, gpus per node, cpus, mem, time,
constraint, extra ``#SBATCH`` lines, setup lines) and are told to send SIGUSR1
``cluster.preempt_warning_s`` before the time limit, which the job turns into checkpoint + requeue.
"""

from __future__ import annotations

import functools
import os
import re
import shlex
import shutil
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

from arctl.config.schema import EXECUTORS as CLUSTER_EXECUTORS

# what the machine gives new processes has its one home beside the report's readers, a layer below;
# vm_stat_available_gb and _cgroup_room_gb are named here too for the callers and tests that import them from here
from arctl.track.runs.pool import _cgroup_room_gb, available_memory_gb, usable_cpus, vm_stat_available_gb  # noqa: F401

EXECUTORS = tuple(e for e in CLUSTER_EXECUTORS if e != "auto")  # what `auto` chooses between
PREEMPT_SIGNAL = "USR1"
MAX_SIGNAL_DELAY_S = 65535  # sbatch --signal=...@sig_time accepts up to 65535 s


def warning_seconds(cluster: dict) -> int:
    """Seconds before the time limit at which the job gets its preemption warning (USR1):
    ``cluster.preempt_warning_s`` (the spec fills it in; validation keeps it below the limit)."""
    time_s = int(cluster.get("time_min") or 60) * 60
    value = cluster.get("preempt_warning_s")
    value = int(value) if value is not None else max(1, min(60, time_s // 4))
    return max(1, min(MAX_SIGNAL_DELAY_S, value, time_s - 1))


class LaunchError(ValueError):
    """A launch request that cannot be satisfied (bad executor, bad cluster option, sbatch failure)."""


def slurm_controllers() -> list[tuple[str, int]] | None:
    """(address, port) of the slurmctld(s) in slurm.conf; None when there is no readable slurm.conf."""
    conf = Path(os.environ.get("SLURM_CONF") or "/etc/slurm/slurm.conf")
    try:
        text = conf.read_text(errors="replace")
    except OSError:
        return None
    port_match = re.search(r"^\s*SlurmctldPort\s*=\s*(\d+)", text, re.M | re.I)
    port = int(port_match.group(1)) if port_match else 6817
    hosts = []
    for match in re.finditer(r"^\s*(?:SlurmctldHost|ControlMachine|ControlAddr)\s*=\s*([^\s#]+)", text, re.M | re.I):
        value = match.group(1)
        inner = re.search(r"\(([^)]+)\)", value)  # name(addr)
        hosts.append((inner.group(1) if inner else value, port))
    return hosts


def slurm_controller_answers(timeout_s: float = 1.5) -> bool:
    """Does a slurmctld accept connections? (True when slurm.conf cannot tell: configless sites.)"""
    import socket

    controllers = slurm_controllers()
    if not controllers:
        return True
    for host, port in controllers:
        try:
            with socket.create_connection((host, port), timeout=timeout_s):
                return True
        except OSError:
            continue
    return False


def choose_executor(requested: str | None, configured: str | None, requested_by: str = "--executor") -> tuple[str, str]:
    """(executor, one-line reason). ``requested`` (--executor, or what ``requested_by`` names: e.g.
    the executor a resumed run ran on) beats the config's cluster.executor.

    ``auto``: SLURM when ``sbatch`` is on PATH (and the slurmctld of slurm.conf answers), else local.
    """
    name = requested or configured or "auto"
    if name == "auto":
        if shutil.which("sbatch"):
            if slurm_controller_answers():
                return "slurm", "executor: slurm (sbatch found on PATH)"
            return "local", "executor: local (sbatch is on PATH but no SLURM controller answers; this machine runs the jobs)"
        return "local", "executor: local (no sbatch on PATH; this machine runs the jobs)"
    if name not in EXECUTORS:
        raise LaunchError(f"unknown executor {name!r} — choose one of: auto, {', '.join(EXECUTORS)}")
    if name == "slurm" and not shutil.which("sbatch"):
        raise LaunchError("executor slurm needs `sbatch` on PATH — use --executor local, or run on a SLURM login node")
    origin = requested_by if requested else "cluster.executor"
    return name, f"executor: {name} ({origin})"


def local_parallelism(cluster: dict, n_runs: int, requested: int | None = None) -> int:
    """Concurrent local jobs: --array-parallelism, else as many as the cores allow (>= 1), and more
    than that for one-thread runs where sharing the cores ends the last run sooner and the memory
    (``cluster.mem_gb`` a run) holds them: 3 runs on 2 cores take 1.5 run-lengths side by side
    against 2 two at a time (:func:`shared_makespan`). Each run computes the same numbers either way
    (one thread, its own process); only when each ends changes."""
    if requested:
        return max(1, min(requested, n_runs))
    cores = local_cores()
    per_job = max(1, int(cluster.get("cpus_per_task") or 1))
    bound = max(1, min(int(cluster.get("array_parallelism") or 1), n_runs))
    fit = max(1, min(cores // per_job, bound))
    mem_gb = float(cluster.get("mem_gb") or 0)
    if per_job > 1 or fit >= bound or mem_gb <= 0:  # a run of several threads would spin against the others
        return fit
    room = int(available_memory_gb() // mem_gb)
    best = fit
    for p in range(fit + 1, min(bound, room) + 1):
        if shared_makespan(n_runs, p, cores) < shared_makespan(n_runs, best, cores):
            best = p
    return best


def local_cores() -> int:
    """The cores the local executor counts on: those this process may run on (:func:`arctl.track.runs.pool.
    usable_cpus`, its affinity mask: ``taskset``, a SLURM step's cpuset), not the host's ``os.cpu_count()``,
    which ran two runs side by side on the one core ``taskset -c 0`` leaves (from a hunt)."""
    return usable_cpus()


def shared_makespan(n_runs: int, parallel: int, cores: int) -> Fraction:
    """When the last of ``n_runs`` equal one-thread runs ends, ``parallel`` at a time on ``cores``
    cores, in run-lengths: the full rounds of ``parallel`` runs, each max(1, p / cores) long (p > cores
    share them), then a last round of the r runs left, max(1, r / cores)."""
    rounds, left = divmod(n_runs, parallel)
    return rounds * Fraction(max(parallel, cores), cores) + (Fraction(max(left, cores), cores) if left else 0)


# sbatch's short options, every one sbatch(1) and `sbatch --help` document (SLURM 22.05), and their long forms; "NAME[=]"
# takes an optional value, joined only (-koff); whether the others take one is :data:`SBATCH_VALUED`'s (-w vm, -wvm: a
# value; -H: none, and -Hs is -H -s)
SBATCH_SHORT = {"A": "account", "a": "array", "B": "extra-node-info", "b": "begin", "C": "constraint",
                "c": "cpus-per-task", "D": "chdir", "d": "dependency", "e": "error", "F": "nodefile", "G": "gpus",
                "H": "hold", "h": "help", "i": "input", "J": "job-name", "k": "no-kill[=]", "L": "licenses",
                "M": "clusters", "m": "distribution", "N": "nodes", "n": "ntasks", "O": "overcommit", "o": "output",
                "p": "partition", "Q": "quiet", "q": "qos", "S": "core-spec", "s": "oversubscribe", "t": "time",
                "V": "version", "v": "verbose", "W": "wait", "w": "nodelist", "x": "exclude"}
# sbatch's long options that require a value (SLURM 22.05, `required_argument` in its getopt table): written bare (or
# with an empty one, --comment "") sbatch takes the next word as the value, in a job script the option of arctl's next
# #SBATCH line (from a hunt: --comment ate --cpus-per-task=4, --reservation ate --signal=USR1@30), so it is refused;
# those whose value is optional (--exclusive, --nice, --propagate, --get-user-env, --no-kill) stay allowed bare
SBATCH_VALUED = frozenset("""
    account acctg-freq array batch bb bbf begin chdir cluster-constraint clusters comment constraint container core-spec
    cores-per-socket cpu-freq cpus-per-gpu cpus-per-task deadline delay-boot dependency distribution error exclude export
    export-file extra-node-info gid gpu-bind gpu-freq gpus gpus-per-node gpus-per-socket gpus-per-task gres gres-flags
    hint input job-name kill-on-invalid-dep licenses mail-type mail-user mcs-label mem mem-bind mem-per-cpu mem-per-gpu
    mincpus network nodefile nodelist nodes ntasks ntasks-per-core ntasks-per-gpu ntasks-per-node ntasks-per-socket
    open-mode output partition power prefer priority profile qos reservation signal sockets-per-node switches
    thread-spec threads-per-core time time-min tmp uid wait-all-nodes wckey wrap""".split())
# sbatch's other documented long options (SLURM 22.05): no value, or an optional one. A bare word that is neither these
# nor :data:`SBATCH_VALUED`'s but begins one of the latter is an abbreviation sbatch reads as it (--comm: --comment)
SBATCH_FLAGS = frozenset("""
    contiguous exclusive get-user-env help hold ignore-pbs nice no-kill no-requeue overcommit oversubscribe parsable
    propagate quiet reboot requeue spread-job test-only usage use-min-nodes verbose version wait""".split())
# sbatch options arctl sets itself (or that would break what it relies on): the key to use instead, or why not
ARCTL_SBATCH = {  # (resources, e.g. --gres, --mem=0, --gpus-per-node=a100:8, replace arctl's line: allowed)
    "time": "use cluster.time_min (the preemption warning is placed before it)",
    "signal": "use cluster.preempt_warning_s (arctl's jobs checkpoint on its signal)",
    "array": "use cluster.array_parallelism (arctl makes the job arrays)",
    "dependency": "leave it out: arctl chains the jobs (trainer.init_from, cluster.array_parallelism)",
    "job_name": "leave it out: arctl names each job after its runs",
    "output": "leave it out: `arctl logs` reads the logs where arctl's jobs write them",
    "error": "leave it out: `arctl logs` reads the logs where arctl's jobs write them",
    "wrap": "leave it out: arctl submits a script of its own",
    "chdir": "leave it out: arctl's jobs run from their run folder",
    # from a hunt: these replaced arctl's line while the job body (one task per node, Ray sized from the cluster
    # keys) kept its own count: a second node never joined, a task ran the job twice
    "nodes": "use cluster.nodes (the job body starts Ray on each of them)",
    "cpus_per_task": "use cluster.cpus_per_task (each node's Ray is sized from it and the launch checks it)",
    "ntasks": "leave it out: an arctl job runs one task per node",
    "ntasks_per_node": "leave it out: an arctl job runs one task per node",
    # options of sbatch's own run, not of the job: the launch would hang, misread or submit nothing (after a hunt)
    "wait": "leave it out: sbatch would not answer until the job ended (`arctl status` follows the runs)",
    "parsable": "leave it out: arctl reads the job id from sbatch's usual answer",
    "test_only": "leave it out: it submits nothing (`arctl run --dry-run` shows what would be submitted)",
    "help": "leave it out: sbatch would print its help and submit nothing",
    "usage": "leave it out: sbatch would print its usage and submit nothing",
    "version": "leave it out: sbatch would print its version and submit nothing",
}
# sbatch options that ask for GPUs (typed GPUs or a site's GRES spelling may replace arctl's --gpus-per-node line)
GPU_SBATCH = ("gpus_per_node", "gpus_per_task", "gpus", "gres")
# the options arctl reads in sbatch_extra: sbatch takes an unambiguous prefix of a long option for it (--out=x is
# --output=x), so an abbreviation of one of these must be written in full for arctl to read it as sbatch does
_READ_SBATCH = (*ARCTL_SBATCH, *GPU_SBATCH, "requeue", "no_requeue")


def sbatch_words(text: str, entry: str = "") -> list[str]:
    """The words sbatch reads in the options of one ``#SBATCH`` line (``_get_argument`` in SLURM's src/sbatch/opt.c):
    blanks end a word outside quotes; '...' and "..." quote, their marks dropped; a backslash takes the next character
    as it is, inside quotes too; an unquoted ``#`` ends the line (a comment); an empty word also ends it. An unmatched
    quote is refused, as sbatch refuses the script."""
    words: list[str] = []
    word: list[str] = []
    started = escaped = False
    quote = ""
    for char in text:
        if char in " \t\n\v\f\r" and not quote:  # (C's isspace) ends the word, even after a backslash
            if started and not word:
                return words
            if word:
                words.append("".join(word))
            word, started, escaped = [], False, False
            continue
        if escaped:
            escaped = False
        elif char == "\\":
            escaped = started = True
            continue
        elif quote:
            if char == quote:
                quote = ""
                continue
        elif char in "'\"":
            quote, started = char, True
            continue
        elif char == "#":
            break
        word.append(char)
        started = True
    if quote:
        raise LaunchError(f"cluster.sbatch_extra entry {entry or text!r} has an unmatched {quote} — close the quote "
                          "(sbatch refuses such a line)")
    if word:
        words.append("".join(word))
    return words


def sbatch_options(raw) -> list[tuple[str, str | None]]:
    """The (long option name, value or None) pairs sbatch reads in one ``cluster.sbatch_extra`` entry, written as an
    ``#SBATCH`` line is (the ``#SBATCH`` word optional): ``--name=value``, ``--name value``, ``-X value``, ``-Xvalue``
    (a short option is its long form: :data:`SBATCH_SHORT`; one sbatch does not have is refused). Quotes are removed
    and a ``# comment`` dropped as sbatch does (:func:`sbatch_words`)."""
    text = _one_line(str(raw).strip(), "cluster.sbatch_extra")
    words = sbatch_words(re.sub(r"^#SBATCH(?=\s|$)", "", text), str(raw))
    if not words:
        raise LaunchError(f"cluster.sbatch_extra entry {raw!r} has no sbatch option — write e.g. '--exclusive' or "
                          "'--reservation=NAME'")
    options: list[tuple[str, str | None]] = []
    i = 0
    while i < len(words):
        word = words[i]
        i += 1
        if re.match(r"--[A-Za-z]", word):
            name, eq, value = word[2:].partition("=")
            if not eq and i < len(words) and not re.match(r"-[A-Za-z-]", words[i]):
                value, i = words[i], i + 1  # --name value
            if not eq and not value and name in SBATCH_VALUED:
                raise LaunchError(f"cluster.sbatch_extra entry {raw!r}: --{name} needs a value — write '--{name}=VALUE' "
                                  "(sbatch would take the next #SBATCH line's option as its value)")
            known = name in SBATCH_VALUED or name in SBATCH_FLAGS
            meant = [] if known else sorted(o for o in SBATCH_VALUED | SBATCH_FLAGS if o.startswith(name))
            if len(meant) > 1:  # sbatch refuses it at submission ("is ambiguous"), after arctl's checks passed it
                raise LaunchError(f"cluster.sbatch_extra entry {raw!r}: --{name} is an abbreviation of several sbatch "
                                  f"options ({', '.join('--' + o for o in meant)}) — write the one you mean in full")
            if not eq and not value and meant and meant[0] in SBATCH_VALUED:  # (from a review: --comm ate the next
                # line as --comment's value)
                raise LaunchError(f"cluster.sbatch_extra entry {raw!r}: sbatch reads --{name} as an abbreviation (of "
                                  f"--{meant[0]}, which needs a value) — write the option in full with its value, "
                                  f"'--{meant[0]}=VALUE' (sbatch would take the next #SBATCH line's option as its value)")
            options.append((name, value if eq or value else None))
            continue
        if not re.match(r"-[A-Za-z]", word):
            raise LaunchError(f"cluster.sbatch_extra entry {raw!r} has {word!r} where sbatch expects an option — "
                              "write e.g. '--exclusive' or '--reservation=NAME', one option and its value at a time")
        letters = word[1:]
        while letters:
            letter, letters = letters[0], letters[1:]
            if letter not in SBATCH_SHORT:
                raise LaunchError(f"cluster.sbatch_extra entry {raw!r}: -{letter} is not one of sbatch's short "
                                  f"options ({' '.join('-' + k for k in sorted(SBATCH_SHORT, key=str.lower))}) — "
                                  "write the option's long form, --NAME=VALUE (`sbatch --help` lists them)")
            long = SBATCH_SHORT[letter]
            name = long.removesuffix("[=]")
            if name not in SBATCH_VALUED:  # no value, or one joined only (-koff)
                value = letters if long.endswith("[=]") and letters else None
                letters = "" if value else letters
            elif letters:
                value, letters = letters, ""  # -wvm
            elif i < len(words):
                value, i = words[i], i + 1  # -w vm
            else:
                raise LaunchError(f"cluster.sbatch_extra entry {raw!r}: -{letter} (--{name}) needs a value — write "
                                  f"'--{name}=VALUE'")
            options.append((name, value))
    return options


def _sbatch_extra(lines: list) -> dict:
    """``["--exclusive", "--mail-type=END", "#SBATCH --reservation=x"]`` -> additional_parameters (the values as
    sbatch reads them: :func:`sbatch_options`; :func:`sbatch_written` writes them for the script). An option arctl sets
    itself (:data:`ARCTL_SBATCH`) is refused with the key that sets it: here it would replace arctl's silently (a time
    limit the preemption warning is not placed before, logs `arctl logs` cannot find)."""
    extra: dict = {}
    for raw in lines or []:
        for name, value in sbatch_options(raw):
            key = name.replace("-", "_")
            full = [k for k in _READ_SBATCH if k.startswith(key)]
            if key not in _READ_SBATCH and full:
                raise LaunchError(f"cluster.sbatch_extra entry {raw!r}: sbatch reads --{name} as an abbreviation "
                                  f"(of --{full[0].replace('_', '-')}, which arctl reads) — write the option in full")
            if key in ARCTL_SBATCH:
                raise LaunchError(f"cluster.sbatch_extra entry {raw!r} sets what arctl sets itself — {ARCTL_SBATCH[key]}")
            extra[key] = True if value is None else value
    return extra


def sbatch_written(value):
    """A value as it must be written for sbatch to read it back (:func:`sbatch_words`): submitit quotes it for the
    ``#SBATCH`` line, but sbatch takes a backslash as an escape even inside quotes, so each is doubled."""
    return value.replace("\\", "\\\\") if isinstance(value, str) else value


def _gpu_count(key: str, value) -> int | None:
    """The GPUs an sbatch GPU option (:data:`GPU_SBATCH`) asks for: ``[type:]N`` (a comma list: summed), a GRES list's
    ``gpu[:type][:N]`` entries (``gpu`` alone: 1); None for a GRES without a GPU or a count arctl cannot read."""
    total, seen = 0, False
    for part in str(value).split(","):
        part = re.sub(r"\(.*\)$", "", part.strip())  # a GRES entry's socket binding, e.g. gpu:4(S:0-1)
        fields = part.split(":")
        if key == "gres":
            if fields[0] != "gpu":
                continue
            fields = fields[1:] or ["1"]
            if not fields[-1].isdigit():  # gpu:a100 is one a100
                fields.append("1")
        if not fields[-1].isdigit():
            return None
        total, seen = total + int(fields[-1]), True
    return total if seen else None


def _gpu_lines(extra: dict, cluster: dict) -> bool:
    """Whether ``cluster.sbatch_extra`` asks for the job's GPUs itself (typed, or as a GRES), refusing one whose
    count per node is not ``cluster.gpus_per_node``: Ray and verl are given that count (from a hunt:
    ``--gpus-per-node=a100:4`` beside the default 8 left Ray asking for GPUs SLURM had not granted, after the job
    had queued; ``a100:8`` beside 4 billed 8 and used 4)."""
    want = int(cluster.get("gpus_per_node") or 0)
    nodes = max(1, int(cluster.get("nodes") or 1))
    asked = False
    for key in GPU_SBATCH:
        if key not in extra:
            continue
        count = _gpu_count(key, extra[key])
        if count is None:
            continue  # a GRES without a GPU (--gres=nvme:1)
        asked = True
        per_node = count / nodes if key == "gpus" else count  # --gpus counts the job's; one task per node
        if per_node != want:
            flag = f"--{key.replace('_', '-')}={extra[key]}"
            said = f"{count} GPU(s) in all ({per_node:g} per node of {nodes})" if key == "gpus" else f"{count} GPU(s) per node"
            raise LaunchError(f"cluster.sbatch_extra entry {flag} asks SLURM for {said}, but cluster.gpus_per_node={want}, "
                              "the count the job's Ray and verl are given — set cluster.gpus_per_node to the same number "
                              "per node")
    return asked


_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def _one_line(value, key: str) -> str:
    """An sbatch option value: any text, but never a line break (it would end the #SBATCH line)."""
    text = str(value)
    if _CONTROL.search(text):
        raise LaunchError(f"{key}={text!r} contains a line break or control character — sbatch options must be one line")
    return text


def sbatch_job_name(name: str) -> str:
    """The SLURM job name arctl gives the jobs of sweep or experiment ``name``."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", str(name))[:64] or "arctl"


def slurm_parameters(cluster: dict, job_name: str, array_parallelism: int | None = None) -> dict:
    """submitit SlurmExecutor parameters for a ``cluster`` section.

    Values are quoted by submitit (and written so that sbatch reads them back as they are: :func:`sbatch_written`);
    values with line breaks are refused (they could start new script lines). ``cluster.setup`` lines are shell by
    design: they come from your cluster profile.
    """
    time_min = int(cluster.get("time_min") or 60)
    delay = warning_seconds(cluster)
    extra = _sbatch_extra(cluster.get("sbatch_extra") or [])
    # a typed or GRES request in sbatch_extra gives the GPUs instead of arctl's line (SLURM refuses --gres=gpu beside
    # --gpus-per-node: they are mutually exclusive)
    gpus_asked = _gpu_lines(extra, cluster)
    extra = {key: sbatch_written(value) for key, value in extra.items()}
    extra["signal"] = f"{PREEMPT_SIGNAL}@{delay}"
    if "no_requeue" not in extra:  # submitit requeues with `scontrol requeue`, which a site's JobRequeue=0
        extra["requeue"] = True  # refuses for a job not submitted requeueable (the run would end at its limit)
    params: dict = {
        "job_name": sbatch_job_name(job_name),
        "time": time_min,
        "nodes": int(cluster.get("nodes") or 1),
        "cpus_per_task": int(cluster.get("cpus_per_task") or 1),
        "signal_delay_s": delay,
        "array_parallelism": int(array_parallelism or cluster.get("array_parallelism") or 16),
        # the job's submitit must treat our preemption signal as "checkpoint and requeue"
        "setup": [f"export SUBMITIT_PREEMPT_SIGNAL={PREEMPT_SIGNAL}", *[str(s) for s in cluster.get("setup") or []]],
        "additional_parameters": extra,
    }
    if cluster.get("mem_gb"):
        mem = float(cluster["mem_gb"])
        params["mem"] = f"{int(mem)}GB" if mem == int(mem) else f"{int(mem * 1024)}MB"
    for key in ("partition", "account", "qos", "constraint"):
        if cluster.get(key):
            params[key] = sbatch_written(_one_line(cluster[key], f"cluster.{key}"))
    if not gpus_asked and int(cluster.get("gpus_per_node") or 0) > 0:
        params["gpus_per_node"] = int(cluster["gpus_per_node"])
    return params


EXEC_KEY = "_exec_python"  # our marker: run the job under the batch shell's runner function (Ray jobs)
JOB_RUNNER = "arctl_run_job"
# The batch shell of a Ray job runs submitit's entry through this function: as a child, so the
# shell's EXIT trap (stop Ray) still runs when the job ends, with the signals SLURM sends to the
# shell (B:USR1 before the time limit, TERM) passed on to it.
JOB_RUNNER_LINES = [
    "# the job entry runs as a child of this shell: the EXIT trap (stop Ray) runs after it, and",
    "# the signals SLURM sends to this shell (B:USR1 before the time limit, TERM) are passed on",
    "# (the traps come first: a signal before the job entry has started is passed on once it has)",
    f"{JOB_RUNNER}() {{",
    '  arctl_job_pid=""; arctl_pending=""',
    "  arctl_pass() {",
    '    if [ -n "$arctl_job_pid" ]; then kill -"$1" "$arctl_job_pid" 2>/dev/null || true',
    '    else arctl_pending="$arctl_pending $1"; fi',
    "  }",
    "  trap 'arctl_pass USR1' USR1",
    "  trap 'arctl_pass TERM' TERM",
    '  "$@" &',
    "  arctl_job_pid=$!",
    '  for s in $arctl_pending; do kill -"$s" "$arctl_job_pid" 2>/dev/null || true; done',
    "  local rc",
    "  while :; do",
    '    rc=0; wait "$arctl_job_pid" || rc=$?',
    '    kill -0 "$arctl_job_pid" 2>/dev/null || break',
    "  done",
    '  return "$rc"',
    "}",
]


def array_limit_of_config(config: str) -> int | None:
    """The most tasks one job array may have, from ``scontrol show config``'s text: MaxArraySize bounds the index
    (0 to MaxArraySize-1, so MaxArraySize tasks) and ``SchedulerParameters=max_array_tasks=N`` the count, which
    slurm.conf(5) lets be lower (from a hunt: with MaxArraySize=1001 and max_array_tasks=4, a sweep of 6 runs went
    out as one array of 6 and sbatch refused it, "Invalid job array specification"). None where neither is set."""
    index = re.search(r"^MaxArraySize\s*=\s*(\d+)", config, re.M)
    params = re.search(r"^SchedulerParameters\s*=\s*(.*)$", config, re.M)
    tasks = re.search(r"(?:^|,)\s*max_array_tasks=(\d+)", params.group(1)) if params else None
    limits = [int(m.group(1)) for m in (index, tasks) if m and int(m.group(1)) > 0]
    return min(limits) if limits else None


@functools.lru_cache(maxsize=1)
def site_max_array_size() -> int | None:
    """The most tasks one job array may have at this site (:func:`array_limit_of_config` of ``scontrol show
    config``), or None when it cannot be asked."""
    if not shutil.which("scontrol"):
        return None
    try:
        out = subprocess.run(["scontrol", "show", "config"], capture_output=True, text=True, timeout=30).stdout
    except (subprocess.SubprocessError, OSError):
        return None
    return array_limit_of_config(out)


def array_chunk_size(cluster: dict, ask_site: bool = True) -> int:
    """Tasks per array: cluster.max_array_size, capped by the site's limit (:func:`site_max_array_size`)."""
    size = max(1, int(cluster.get("max_array_size") or 1000))
    site = site_max_array_size() if ask_site else None
    return min(size, site) if site else size


def python_command(params: dict) -> str:
    python = shlex.quote(sys.executable)
    return f"{JOB_RUNNER} {python}" if params.get(EXEC_KEY) else python


def submitit_command(folder: Path, params: dict | None = None) -> str:
    """The command submitit puts in the sbatch script (the python of this environment)."""
    return " ".join([python_command(params or {}), "-u -m submitit.core._submit", shlex.quote(str(folder))])


def render_sbatch(params: dict, folder: Path, n_tasks: int) -> str:
    """The sbatch script submitit would write for ``n_tasks`` array tasks (1: a plain job)."""
    from submitit.slurm.slurm import _make_sbatch_string

    kwargs = {k: v for k, v in params.items() if k != EXEC_KEY}
    if n_tasks > 1:
        kwargs["map_count"] = n_tasks
    return _make_sbatch_string(command=submitit_command(folder, params), folder=folder, **kwargs)


MAX_REQUEUES = 20
"""How many times submitit requeues a job after its time limit (its ``max_num_timeout``); at the next one the job
ends preempted and ``arctl resume`` goes on (:class:`arctl.launch.job.RunJob`)."""


def reservation(configs: list[dict]) -> dict | None:
    """What the SLURM jobs of runs with these resolved configs ask of the cluster, one attempt each: ``jobs``,
    ``gpus`` and ``cpus`` (all jobs together: per node x ``cluster.nodes``), the longest time limit ``max_hours``
    (``cluster.time_min``) and the ceilings ``gpu_hours`` and ``cpu_hours`` (every job to its time limit), with
    ``requeues`` (:data:`MAX_REQUEUES`: a run still training at its time limit asks as much again each time; 0 where
    ``cluster.sbatch_extra`` says ``--no-requeue``). Read from :func:`slurm_parameters`, what the jobs are submitted
    with. None for no config, or one whose cluster section the launch refuses (its refusal says why). A dry run says
    it before GPU hours are spent (what a sweep reserves was nowhere in its preview)."""
    if not configs:
        return None
    gpus = cpus = 0
    gpu_hours = cpu_hours = max_hours = 0.0
    requeues = 0
    for config in configs:
        cluster = config.get("cluster") or {}
        try:
            params = slurm_parameters(cluster, "reservation")
        except LaunchError:
            return None
        nodes, hours = params["nodes"], params["time"] / 60.0
        # a GPU request given in sbatch_extra instead of arctl's line still counts cluster.gpus_per_node per node
        g, c = nodes * int(cluster.get("gpus_per_node") or 0), nodes * params["cpus_per_task"]
        gpus, cpus, max_hours = gpus + g, cpus + c, max(max_hours, hours)
        gpu_hours, cpu_hours = gpu_hours + g * hours, cpu_hours + c * hours
        if params["additional_parameters"].get("requeue"):
            requeues = MAX_REQUEUES
    return {"jobs": len(configs), "gpus": gpus, "cpus": cpus, "max_hours": max_hours, "gpu_hours": gpu_hours,
            "cpu_hours": cpu_hours, "requeues": requeues}


def reservation_line(asked: dict) -> str:
    """The dry run's line of :func:`reservation`: "asks SLURM for 27 job(s): 216 GPUs, 1,728 CPUs, each job for up to
    48 h (cluster.time_min): at most 10,368 GPU-hours if every job runs to its time limit; a run still training
    then is requeued (up to 20 times) and asks as much again"."""
    def hours(h: float) -> str:
        return f"{h:,.0f}" if h >= 10 else f"{h:,.1f}"

    what, ceiling = ((f"{asked['gpus']:,} GPUs, {asked['cpus']:,} CPUs", f"{hours(asked['gpu_hours'])} GPU-hours")
                     if asked["gpus"] else (f"{asked['cpus']:,} CPUs, no GPU", f"{hours(asked['cpu_hours'])} CPU-hours"))
    return (f"asks SLURM for {asked['jobs']} job(s): {what}, each job for up to {hours(asked['max_hours'])} h "
            f"(cluster.time_min): at most {ceiling} if every job runs to its time limit; a run still training then "
            + (f"is requeued (up to {asked['requeues']} times) and asks as much again" if asked["requeues"] else
               "ends there (cluster.sbatch_extra has --no-requeue)"))


def slurm_executor(folder: Path, params: dict, max_num_timeout: int = MAX_REQUEUES):
    """A submitit SlurmExecutor; ``max_num_timeout`` bounds the requeues after time limits."""
    from submitit import SlurmExecutor

    executor = SlurmExecutor(folder=folder, max_num_timeout=max_num_timeout, python=python_command(params))
    try:
        executor.update_parameters(**{k: v for k, v in params.items() if k != EXEC_KEY})
    except ValueError as err:
        raise LaunchError(f"bad cluster option: {str(err).splitlines()[0]}") from None
    return executor


LOCAL_TIME_LIMIT_MIN = 366 * 24 * 60  # a local job's: none to speak of
LOCAL_GPUS_ENV = "ARCTL_LOCAL_CUDA_VISIBLE_DEVICES"  # the launching shell's CUDA_VISIBLE_DEVICES, for the job
LOCAL_GPUS_UNSET = "<unset>"


def local_executor(folder: Path, cluster: dict):
    """A submitit LocalExecutor for one run. Its controller sets ``CUDA_VISIBLE_DEVICES`` to its own GPU
    count (none: ``""``); the shell's value (or its absence) goes along in :data:`LOCAL_GPUS_ENV`, and the
    job entry puts it back (:func:`arctl.launch.job.restore_gpus`)."""
    from submitit import LocalExecutor

    os.environ[LOCAL_GPUS_ENV] = os.environ.get("CUDA_VISIBLE_DEVICES", LOCAL_GPUS_UNSET)  # submitit copies os.environ

    executor = LocalExecutor(folder=folder, max_num_timeout=MAX_REQUEUES)
    # no time limit: cluster.time_min is a scheduler's. With it, the controller stopped the job every time_min
    # (a checkpoint and a restart, the step in progress lost) and gave up after six restarts (submitit's
    # max_retry): the run ended FAILED "died without reporting" at 6 h by default (from a review)
    executor.update_parameters(timeout_min=LOCAL_TIME_LIMIT_MIN, signal_delay_s=warning_seconds(cluster))
    return executor


def backend_job_setup(config: dict, run_dir: Path) -> str | None:
    """The job setup the run's backend wants before the job entry (verl: a Ray cluster sized to the
    allocation, a single node included: ``Backend.job_setup``), or None for the plain job entry."""
    from arctl.backends.base import BackendError, get_backend

    try:
        backend = get_backend(str(config.get("backend", "tiny")))
    except BackendError:
        return None
    return backend.job_setup(config, run_dir)


def with_ray_setup(params: dict, setup: str) -> dict:
    """Run the backend's job setup (``Backend.job_setup``: verl's Ray part, a head on ``nodes[0]``,
    workers on the other nodes, ``RAY_ADDRESS`` exported, an EXIT trap that stops Ray) before the
    submitit job, which runs our job entry on the head node as a child of the batch shell (no srun)
    through :data:`JOB_RUNNER`: the time-limit signal (``--signal=B:USR1@...``) reaches the shell,
    which passes it on so submitit can checkpoint and requeue, and the EXIT trap still stops Ray
    when the job ends.
    """
    lines = [line for line in setup.splitlines() if not line.startswith("#!")]
    delay = str(params.get("additional_parameters", {}).get("signal", "USR1@90")).split("@")[-1]
    extra = {**params.get("additional_parameters", {}), "signal": f"B:{PREEMPT_SIGNAL}@{delay}"}
    return {**params, "setup": [*params.get("setup", []), *lines, *JOB_RUNNER_LINES], "use_srun": False,
            "additional_parameters": extra, EXEC_KEY: True}


def scancel_failed(job_id: str) -> str:
    """What is said of a run whose job a best-effort :func:`scancel_quietly` could not cancel."""
    return f"scancel failed: cancel its job yourself (`scancel {job_id}`)"


def release_quietly(job_id: str) -> bool:
    """Release held SLURM job ``job_id`` (best effort; a job not held is left as it is): whether scontrol said
    yes."""
    try:
        return subprocess.run(["scontrol", "release", job_id], capture_output=True, timeout=60,
                              check=False).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def scancel_quietly(job_ids: list[str]) -> bool:
    """Cancel SLURM jobs ``job_ids`` (best effort, while something else is on its way): whether scancel
    said yes."""
    try:
        return subprocess.run(["scancel", *job_ids], capture_output=True, timeout=60, check=False).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False
