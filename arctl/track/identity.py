"""The W&B identity of one arctl run, built in one place for every process that names the run.

:class:`WandbIdentity` reads ``config.wandb`` (and ``experiment``, ``arm``, ``seed``, ``run_id``):
``dir = run_dir/wandb``, project (default ``arctl``), group (``wandb.group``, else the experiment),
name (``wandb.name``, else ``{arm}-s{seed}``; ``{arm}-s{seed}-eval`` with job type ``eval`` for a run that evaluates
a checkpoint only), entity, tags, notes, mode (default ``offline``) and the run id
a resumed attempt continues. Two renderings: :meth:`~WandbIdentity.init_kwargs`, the ``wandb.init``
arguments of :mod:`arctl.track.writer`, and :meth:`~WandbIdentity.env`, the ``WANDB_*`` variables a
trainer that opens its own W&B run (verl's tracker) reads. ``WANDB_API_KEY`` is never part of it. What the process
environment must change besides, before wandb sets itself up in it (an offline run sends nothing, no shell variable
names what the config does not): :meth:`~WandbIdentity.process_env`, :func:`set_environment`.

Where the renderings differ, they keep what each consumer has always done:

- group: with neither ``wandb.group`` nor an experiment, ``init_kwargs`` has no group (None) while
  ``env`` sets ``WANDB_RUN_GROUP=arctl``;
- run id: ``init_kwargs`` takes ``wandb.id``, else the arctl ``run_id``; ``env`` sets ``WANDB_RUN_ID``
  from ``wandb.id`` only; both as :func:`wandb_id` makes it a W&B id (the launcher records the same);
- mode: ``init_kwargs`` refuses a mode other than offline, online or disabled; ``env`` passes it on;
- name without ``wandb.name`` and without an ``arm``: ``{arm_default}-s{seed}``, where the writer's
  default is ``run`` and the verl backend passes ``arm_default=None`` (``None-s0``).
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

API_KEY_ENV = "WANDB_API_KEY"  # the secret: read from the environment only, never written by arctl
# environment variables that hold secrets by their name, read word by word (the parts between "_" and digits): a
# word that ends in KEY, KEYS, TOKEN or PWD, holds SECRET, PASSW, PASSPHRASE, CREDENTIAL or PRIVATE, or is PASS or
# JWT; or a last word PAT (W&B's key, HF_TOKEN_2, AWS_SECRET_ACCESS_KEY, PGPASSWORD, KAGGLE_KEY, OPENAI_APIKEY,
# SSH_PRIVATE_KEY, MYSQL_PWD, SLURM_JWT, GITHUB_PAT). From a hunt: the first rule (names ending in _TOKEN, _API_KEY,
# _SECRET*, _PASSWORD, _PASSWD) missed every one of those after HF_TOKEN: a SLURM submission gave them to sbatch,
# which stores them with the job, and a config holding their value was not refused. Words, not letters:
# TOKENIZERS_PARALLELISM, KEYTIMEOUT, GNOME_KEYRING_CONTROL, SLURM_TOPOLOGY_ADDR_PATTERN hold none.
SECRET_WORD = re.compile(r"(?:KEYS?|TOKEN|PWD)$|SECRET|PASSW|PASSPHRASE|CREDENTIAL|PRIVATE|^(?:PASS|JWT)$")
SECRET_LAST_WORD = "PAT"  # a personal access token: GITHUB_PAT (not PATH, PATTERN)
# a last word that makes the value a place, not a secret (HF_TOKEN_PATH, AWS_SHARED_CREDENTIALS_FILE, SSL_KEY_DIR,
# ACTIONS_ID_TOKEN_REQUEST_URL): a config may well hold such a path, and must not be refused for it
PLACE_WORDS = frozenset({"FILE", "PATH", "DIR", "SOCK", "SOCKET", "URL", "URI", "HOST", "PORT"})
# names the words above would take that hold no secret: the shell's folders, and a path to Google's key file
NOT_SECRET_NAMES = frozenset({"PWD", "OLDPWD", "GOOGLE_APPLICATION_CREDENTIALS"})
SECRET_MIN_CHARS = 8  # shorter values would match ordinary config text


def is_secret_name(name: str) -> bool:
    """Whether an environment variable holds a secret by its name: :data:`API_KEY_ENV`, or a word of it
    :data:`SECRET_WORD` (or a last word :data:`SECRET_LAST_WORD`), unless its last word is a place
    (:data:`PLACE_WORDS`) or the name is one of :data:`NOT_SECRET_NAMES`. Wide on purpose: a secret taken for
    none would reach SLURM's state and config.yaml, while a harmless variable taken for one is only left out of a
    SLURM job's environment (the launch names it; ``cluster.secrets=[NAME]`` passes it)."""
    upper = name.upper()
    if upper == API_KEY_ENV:
        return True
    words = [w for w in re.split(r"[^A-Z]+", upper) if w]
    if not words or upper in NOT_SECRET_NAMES or words[-1] in PLACE_WORDS:
        return False
    return words[-1] == SECRET_LAST_WORD or any(SECRET_WORD.search(w) for w in words)


def secret_values(environ: Mapping[str, str]) -> dict[str, str]:
    """name -> value (stripped) of every secret in ``environ`` (:func:`is_secret_name`, at least
    :data:`SECRET_MIN_CHARS` long)."""
    return {name: value.strip() for name, value in environ.items()
            if is_secret_name(name) and len(value.strip()) >= SECRET_MIN_CHARS}


# what wandb 0.31 records of a process's environment in every run's files: wandb-core's environment record takes
# each variable that starts with it (into the .wandb file, which an online run uploads and `arctl export` copies)
WANDB_RECORDED_PREFIX = "SLURM_"


def recorded_secrets(environ: Mapping[str, str], kept: set[str] | frozenset[str] = frozenset()) -> list[str]:
    """The names of the secrets in ``environ`` (:func:`is_secret_name`, whatever their length) that W&B would
    record in a run's files (:data:`WANDB_RECORDED_PREFIX`: ``SLURM_JWT``, ``SLURM_PASSWORD``), but those in
    ``kept``. From a hunt: a shell's ``SLURM_JWT`` (``export $(scontrol token)``, for slurmrestd) was in every
    local and debug run's .wandb file."""
    return sorted(name for name in environ
                  if name.startswith(WANDB_RECORDED_PREFIX) and is_secret_name(name) and name not in kept)


# how an error names a password of the netrc file: a W&B login's "WANDB_API_KEY (~/.netrc)" (a second one's
# "WANDB_API_KEY (~/.netrc, HOST)"), any other "password (~/.netrc, HOST)"
NETRC_PASSWORD = "password"
# The hosts wandb 0.31 reads a W&B login under, copied from it (importing wandb.sdk.lib.urls imports all of wandb,
# 0.7 s more for every arctl command; tests/track/test_netrc_hosts.py checks them against the installed wandb):
# its default server (urls.DEFAULT_BASE_URL), whose host `wandb login` writes into ~/.netrc, and the W&B API host
# behind each CoreWeave Forge host (urls.FORGE_HOSTS), where wandb looks when the Forge host has no entry (and
# where wandb before 0.31 wrote it: api.wandb.ai). From a hunt: arctl knew api.wandb.ai only, so the login
# `wandb login` had just written was no login (online SLURM launches refused) and no secret (a key written into
# cluster.setup reached config.yaml, the job script and SLURM's state).
WANDB_DEFAULT_BASE_URL = "https://api.forge.coreweave.com"
WANDB_FORGE_HOSTS = {"forge.coreweave.com": "api.wandb.ai", "qa.forge.coreweave.com": "api.qa.wandb.ai"}
NETRC_DEFAULT = "default"  # a netrc's `default` entry: its password goes to every host without a `machine` entry


def _wandb_hosts(environ: Mapping[str, str]) -> set[str]:
    """The hosts (lower case; with a port where the URL has one) a W&B login is stored under, as wandb 0.31 reads
    it: the host of its default server (:data:`WANDB_DEFAULT_BASE_URL`) and of ``$WANDB_BASE_URL`` (a self-hosted
    server), and for a CoreWeave Forge host the W&B host behind it (:data:`WANDB_FORGE_HOSTS`)."""
    from urllib.parse import urlsplit

    hosts = set()
    for url in (WANDB_DEFAULT_BASE_URL, (environ.get("WANDB_BASE_URL") or "").strip()):
        parts = urlsplit(url if "://" in url else f"https://{url}")
        if not parts.hostname:
            continue
        hosts |= {parts.hostname, parts.netloc.rpartition("@")[2].lower()}
        hosts |= {api for forge, api in WANDB_FORGE_HOSTS.items() if parts.hostname in (forge, f"api.{forge}", api)}
    return hosts


def _home(environ: Mapping[str, str]) -> str:
    """``environ``'s ``$HOME`` (else this user's), without a trailing ``/``."""
    return (environ.get("HOME") or str(Path.home())).rstrip("/") or "/"


def _expand(path: str, home: str) -> Path:
    """``path`` with a leading ``~`` (``~/...``) read as ``home`` (``environ``'s ``$HOME``; ``~user``: that
    user's), as wandb and huggingface_hub expand it."""
    if path == "~" or path.startswith("~/"):
        return Path(home.rstrip("/") + path[1:] or "/")
    return Path(os.path.expanduser(path))


def _shown(path: Path, home: str) -> str:
    """``path`` as an error says it: ``~/...`` under ``home``."""
    root = home.rstrip("/")
    return f"~{str(path)[len(root):]}" if root and str(path).startswith(root + "/") else str(path)


def netrc_path(environ: Mapping[str, str]) -> Path:
    """The netrc file wandb 0.31 reads a W&B login from (wandb/sdk/lib/wbauth/wbnetrc.py, _get_netrc_file_path):
    ``$NETRC`` (a leading ``~`` is ``environ``'s ``$HOME``), else ``~/.netrc`` where it exists, else ``~/_netrc``
    where it exists, else ``~/.netrc``."""
    home = _home(environ)
    if environ.get("NETRC"):
        return _expand(environ["NETRC"], home)
    return next((p for p in (Path(home) / ".netrc", Path(home) / "_netrc") if p.exists()), Path(home) / ".netrc")


def netrc_passwords(environ: Mapping[str, str]) -> dict[str, str]:
    """name -> password, for every password of at least :data:`SECRET_MIN_CHARS` characters in the netrc file
    (:func:`netrc_path`), a ``machine``'s or the ``default`` entry's: each is a credential. A W&B login
    (:func:`netrc_secrets`) is named ``WANDB_API_KEY (~/.netrc)`` (a second one ``WANDB_API_KEY (~/.netrc,
    HOST)``; the file as it is: ``~/_netrc``, ``$NETRC``), any other ``password (~/.netrc, HOST)``. From a hunt: only W&B's host
    counted, so a key stored under another (the Forge host wandb 0.31 writes, a ``default`` entry, a
    self-hosted server named in wandb's settings file) written into ``cluster.setup`` reached config.yaml, the job
    script and SLURM's state. Nothing when there is no such file or it cannot be read (not text, not netrc)."""
    import netrc

    path = netrc_path(environ)
    try:
        entries = netrc.netrc(str(path)).hosts
    except (OSError, ValueError, netrc.NetrcParseError):  # ValueError: UnicodeDecodeError (from a review)
        return {}
    shown = _shown(path, _home(environ))
    wandb_hosts = _wandb_hosts(environ)
    out: dict[str, str] = {}
    wandb_named = 0
    for host, entry in sorted(entries.items()):
        key = (entry[2] or "").strip()
        if len(key) < SECRET_MIN_CHARS:
            continue
        if host.lower() in wandb_hosts or "wandb" in host.lower() or host == NETRC_DEFAULT:
            out[f"{API_KEY_ENV} ({shown})" if not wandb_named else f"{API_KEY_ENV} ({shown}, {host})"] = key
            wandb_named += 1
        else:
            out[f"{NETRC_PASSWORD} ({shown}, {host})"] = key
    return out


def netrc_secrets(environ: Mapping[str, str]) -> dict[str, str]:
    """``WANDB_API_KEY (~/.netrc...)`` -> the key, for every W&B login in the netrc file (:func:`netrc_path`): a
    ``machine`` that is a W&B host as wandb 0.31 reads it (:func:`_wandb_hosts`: ``api.forge.coreweave.com``,
    which ``wandb login`` writes, ``api.wandb.ai``, ``$WANDB_BASE_URL``'s), or whose name holds "wandb", or the
    ``default`` entry (wandb takes it for a host without one). Whether a job has a W&B login (the launch's check,
    the verl job's :data:`arctl.backends.verl.ray_job.NETRC_LOGIN_CHECK`). Every other password of the file is
    as secret (:func:`netrc_passwords`)."""
    return {name: key for name, key in netrc_passwords(environ).items() if name.startswith(f"{API_KEY_ENV} (")}


HF_TOKEN_ENV = "HF_TOKEN"  # how an error names a token of Hugging Face's token files


def hf_token_path(environ: Mapping[str, str]) -> Path:
    """Where ``hf auth login`` (``huggingface-cli login``) keeps the token, as ``huggingface_hub.constants``
    finds it: ``$HF_TOKEN_PATH``, else ``$HF_HOME/token``, else ``$XDG_CACHE_HOME/huggingface/token``, else
    ``~/.cache/huggingface/token`` (``~`` is ``environ``'s ``$HOME``)."""
    home = _home(environ)
    if environ.get("HF_TOKEN_PATH"):
        return _expand(environ["HF_TOKEN_PATH"], home)
    hf_home = environ.get("HF_HOME") or str(Path(environ.get("XDG_CACHE_HOME") or f"{home}/.cache") / "huggingface")
    return _expand(hf_home, home) / "token"


def hf_token_secrets(environ: Mapping[str, str]) -> dict[str, str]:
    """``HF_TOKEN (<file>)`` -> the token, for the token in :func:`hf_token_path` and every one ``hf auth login``
    keeps beside it in ``stored_tokens`` (``HF_TOKEN (<file>, <name>)``). A token known only there is as secret
    as the W&B key in ~/.netrc (:func:`netrc_secrets`; from a hunt: ``huggingface-cli login --token hf_...`` in
    ``cluster.setup`` was accepted, frozen into config.yaml and the job script). Nothing for a file that is not
    there or cannot be read."""
    import configparser

    path = hf_token_path(environ)
    shown = _shown(path, _home(environ))  # as an error says it
    out = {}
    try:
        token = path.read_text().strip()
    except (OSError, ValueError):  # no file, a folder, not text
        token = ""
    if len(token) >= SECRET_MIN_CHARS:
        out[f"{HF_TOKEN_ENV} ({shown})"] = token
    stored = configparser.ConfigParser(interpolation=None)
    try:
        stored.read(path.parent / "stored_tokens")
    except (OSError, ValueError, configparser.Error):
        return out
    for section in stored.sections():
        token = stored.get(section, "hf_token", fallback="").strip()
        if len(token) >= SECRET_MIN_CHARS and token not in out.values():
            out[f"{HF_TOKEN_ENV} ({shown[:-len(path.name)]}stored_tokens, {section})"] = token
    return out


def known_secrets(environ: Mapping[str, str]) -> dict[str, str]:
    """name -> value of every secret arctl knows of: the environment's (:func:`secret_values`), the passwords
    of the netrc file (:func:`netrc_passwords`: the W&B key `wandb login` stored, and every other) and the Hugging
    Face tokens of its token files (:func:`hf_token_secrets`). A name is a variable's, or a file's:
    ``WANDB_API_KEY (~/.netrc...)``, ``password (~/.netrc, HOST)``, ``HF_TOKEN (~/.cache/huggingface/token)``."""
    # the environment's first: an error names it
    return {**secret_values(environ), **netrc_passwords(environ), **hf_token_secrets(environ)}


def secret_shown(name: str) -> str:
    """A secret's name as an error says it: ``$WANDB_API_KEY``, or a file's as :func:`known_secrets` names it
    (``WANDB_API_KEY (~/.netrc)``; no variable's name holds a space)."""
    return name if " (" in name else f"${name}"


def secret_in(config: Any, environ: Mapping[str, str]) -> tuple[str, str] | None:
    """(dotted key, secret name) of the first text in ``config`` that holds a secret's value
    (:func:`known_secrets`), or None. The value itself is never part of what it returns."""
    secrets = known_secrets(environ)
    if not secrets:
        return None
    stack: list[tuple[str, Any]] = [("", config)]
    while stack:
        where, node = stack.pop()
        if isinstance(node, Mapping):
            stack.extend((f"{where}.{k}" if where else str(k), v) for k, v in node.items())
        elif isinstance(node, (list, tuple)):
            stack.extend((f"{where}[{i}]", v) for i, v in enumerate(node))
        elif isinstance(node, str):
            for name, value in secrets.items():
                if value in node:
                    return where, name
    return None
DEFAULT_PROJECT = "arctl"
DEFAULT_MODE = "offline"
MODES = ("offline", "online", "disabled")
# wandb 0.31 sends telemetry of its own unless the *process's* W&B settings (those it sets up from the environment
# and its settings files) say offline; wandb.init's mode is not enough: the SDK's OpenTelemetry metrics are POSTed
# to W&B's server (/sdk/otel/v1/metrics; requests adds the W&B login of ~/.netrc as Basic auth), and wandb-core
# reports its own errors unless WANDB_ERROR_REPORTING is false. From a hunt: every offline run (the default) made
# an authenticated request to W&B's host. A process that opens a run of these modes gets WANDB_MODE = the run's mode
# and QUIET_DEFAULTS where its environment sets none (WandbIdentity.process_env; a verl job: .env, .quiet_defaults)
QUIET_MODES = ("offline", "disabled")
MODE_ENV = "WANDB_MODE"
QUIET_DEFAULTS = {"WANDB_ERROR_REPORTING": "false"}
# what wandb.init takes from the environment where it is given None (the identity's attribute -> the variable): a
# config without them gives the run none, whatever the shell says (WandbIdentity.unset_env). From a hunt: a shell's
# WANDB_ENTITY, WANDB_TAGS and WANDB_NOTES went into the run's .wandb file, which the dry run and config.yaml did not
# show, and a later `wandb sync` sent the run to that entity. Project, name, group and job type are always given.
SHELL_FALLBACKS = {"entity": "WANDB_ENTITY", "tags": "WANDB_TAGS", "notes": "WANDB_NOTES"}
ENV_DEFAULT_GROUP = "arctl"  # WANDB_RUN_GROUP with neither wandb.group nor an experiment
RESUME = "allow"  # a resumed attempt writes a new fragment of the same run id
# what wandb.init refuses (wandb 0.31, wandb_settings: validate_project, validate_run_tags): checked when
# a config is validated, so that a job is not submitted to fail at its first line
PROJECT_MAX_CHARS = 128
PROJECT_FORBIDDEN = "/\\#?%:"
TAG_MAX_CHARS = 64
ID_MAX_CHARS = 64  # wandb.init's run id
_ID_HASH = 10


GENERATIONS_SEARCHED = 10_000  # --force reruns of one run whose hashed W&B id wandb_generation recognises


def wandb_generation(run_id: str, wid: str | None) -> int | None:
    """The ``--force`` generation whose W&B id (:func:`wandb_id` of ``<run_id>-g<N>``, the run id itself for
    0) is ``wid``, or None. A long run id's W&B id ends in a hash, not in ``-g<N>`` (from a review: a
    repair read every such run as generation 0, and its next rerun reused an id)."""
    if not wid:
        return None
    wid = str(wid)
    if wid in (run_id, wandb_id(run_id)):
        return 0
    plain = re.fullmatch(re.escape(str(run_id)) + r"-g(\d{1,6})", wid)  # ids of W&B's length, as written
    if plain:
        return int(plain.group(1))
    if len(wid) != ID_MAX_CHARS:  # a hashed id is exactly that long: no generation can give this one (the
        return None               # online reader asks of every run; the search is 10,000 hashes)
    return next((n for n in range(1, GENERATIONS_SEARCHED) if wandb_id(f"{run_id}-g{n}") == wid), None)


def wandb_id(text: str) -> str:
    """The W&B run id of an arctl run id (or of ``wandb.id``): W&B's characters, at most 64. A longer
    id keeps its start and ends in a hash of the whole, never cut at 64: a long experiment name's
    run id, or its ``--force`` rerun's ``-g2``, would lose the end that tells them apart (from a
    review: two reruns, and verl's and arctl's writers, under one cut id)."""
    text = re.sub(r"[^A-Za-z0-9_.-]", "-", str(text))
    if len(text) <= ID_MAX_CHARS:
        return text
    digest = hashlib.sha256(text.encode()).hexdigest()[:_ID_HASH]
    return f"{text[:ID_MAX_CHARS - _ID_HASH - 1]}-{digest}"


def naming_problem(wandb: Mapping[str, Any]) -> tuple[str, str, str] | None:
    """(key, what is wrong, what to do) for a value of a config's ``wandb`` section that ``wandb.init``
    would refuse (a project longer than 128 characters or holding one of ``/ \\ # ? % :``, a tag empty or
    over 64 characters), that would reach it changed (a tag holding ``,``: the verl backend passes tags
    in ``WANDB_TAGS``, which wandb splits on commas), or that is a mistake (an empty project: a ``$VAR``
    left unset, where W&B would log to the default project without a word); else None."""
    project = wandb.get("project")
    if project is not None:
        text = str(project)
        bad = sorted({c for c in PROJECT_FORBIDDEN if c in text})
        if not text.strip():
            return "wandb.project", "wandb.project is empty", f"leave it out for the default ({DEFAULT_PROJECT!r})"
        if len(text) > PROJECT_MAX_CHARS:
            return ("wandb.project", f"wandb.project is {len(text)} characters long: W&B takes at most {PROJECT_MAX_CHARS}",
                    "choose a shorter project name")
        if bad:
            return ("wandb.project", f"wandb.project={text!r} contains {' '.join(bad)}: W&B refuses "
                    f"{' '.join(PROJECT_FORBIDDEN)} in a project name",
                    "the entity goes in wandb.entity (wandb.entity=TEAM wandb.project=NAME)" if "/" in bad
                    else "choose a name without them")
    for tag in wandb.get("tags") or []:
        if not 1 <= len(str(tag)) <= TAG_MAX_CHARS:
            return ("wandb.tags", f"wandb.tags has the tag {str(tag)!r}: W&B takes tags of 1 to {TAG_MAX_CHARS} characters",
                    "shorten or drop it")
        if "," in str(tag):
            return ("wandb.tags", f"wandb.tags has the tag {str(tag)!r}: a comma would split it in two (WANDB_TAGS "
                    "is comma-separated)", "write each tag as its own list entry")
    return None


EVAL_SUFFIX = "-eval"  # the default W&B name of a run that evaluates a checkpoint only (its job type: EVAL_JOB_TYPE)
EVAL_JOB_TYPE = "eval"


def run_name(config: dict, arm_default: Any = "run", evaluates: bool = False) -> str:
    """W&B run name ``{arm}-s{seed}``; ``{arm}-s{seed}-eval`` for a run that evaluates a checkpoint only
    (``evaluates``): in W&B it sits beside the training run of its cell, in the same group."""
    return f"{config.get('arm', arm_default)}-s{config.get('seed', 0)}" + (EVAL_SUFFIX if evaluates else "")


def _name(given: Any, config: dict, arm_default: Any, evaluates: bool) -> Any:
    """``wandb.name``, else :func:`run_name`; the schema's default name (``{arm}-s{seed}``, which every composed
    config holds) of a run that ``evaluates`` a checkpoint only gets its ``-eval`` suffix."""
    if not given or (evaluates and str(given) == run_name(config, arm_default)):
        return run_name(config, arm_default, evaluates)
    return given


def wandb_dir(run_dir) -> Path:
    """The W&B folder of the run in ``run_dir``: ``run_dir/wandb`` (``dir`` of ``wandb.init``; W&B writes each
    attempt's files in its own ``wandb/`` folder inside it, ``offline-run-<time>-<id>/``)."""
    return Path(run_dir) / "wandb"


W_AND_B_OWN = "wandb"  # the folder W&B makes inside the ``dir`` it is given (:func:`wandb_dir`), for its run folders


@dataclass(frozen=True)
class WandbIdentity:
    """Who the run is in W&B, as ``config`` says (values as the config gives them: the ``env``
    rendering turns them into strings)."""

    run_dir: str | Path | None  # the run's W&B files go to run_dir/wandb
    project: Any
    group: Any  # wandb.group, else the experiment; None when neither is set
    name: Any
    mode: Any
    entity: Any = None
    tags: Any = None  # as the config gives them (a list)
    id: Any = None  # wandb.id: the launcher's W&B id (the run id, suffixed after a --force rerun)
    run_id: Any = None  # the arctl run id (init_kwargs falls back to it without wandb.id)
    notes: Any = None  # wandb.notes: the run's notes (free text)
    job_type: Any = None  # W&B's job type: None, "train"; EVAL_JOB_TYPE for a run that evaluates a checkpoint only

    @classmethod
    def from_config(cls, config: dict, run_dir: str | Path | None, *, mode: str | None = None,
                    arm_default: Any = "run", evaluates: bool = False) -> WandbIdentity:
        """The identity of ``config``; ``mode`` overrides ``wandb.mode``; ``arm_default``: the arm of
        the default name when the config has no ``arm``; ``evaluates``: the run evaluates a checkpoint
        only (a backend's eval-only mode): its default name ends in ``-eval`` and its job type is
        ``eval``, so W&B does not show it as a second training run of the cell."""
        wb = config.get("wandb") or {}
        return cls(
            run_dir=run_dir,
            project=wb.get("project") or DEFAULT_PROJECT,
            group=wb.get("group") or config.get("experiment") or None,
            name=_name(wb.get("name"), config, arm_default, evaluates),
            mode=mode or wb.get("mode") or DEFAULT_MODE,
            entity=wb.get("entity") or None,
            tags=wb.get("tags"),
            id=wb.get("id") or None,
            run_id=config.get("run_id"),
            notes=wb.get("notes") or None,
            job_type=EVAL_JOB_TYPE if evaluates else None,
        )

    @property
    def dir(self) -> Path:
        """``run_dir/wandb`` (:func:`wandb_dir`)."""
        return wandb_dir(self.run_dir)

    def init_kwargs(self, config: dict, job_type: str = "train") -> dict:
        """The ``wandb.init`` keyword arguments (``config``: the W&B config of the run)."""
        job_type = self.job_type or job_type  # an eval-only run's, else the caller's
        if self.mode not in MODES:
            raise ValueError(f"wandb.mode must be offline, online or disabled, got {self.mode!r}")
        kwargs = {
            "project": self.project,
            "entity": self.entity,
            "group": self.group,
            "name": self.name,
            "tags": list(self.tags or []) or None,
            "notes": str(self.notes) if self.notes else None,
            "config": config,
            "dir": str(self.dir),
            "mode": self.mode,
            "job_type": job_type,
        }
        # the launcher's W&B id, else one derived from the arctl run id: resuming writes a new
        # fragment of the same id, which the reader stitches on trainer/global_step
        run_id = self.id or self.run_id
        if run_id:
            kwargs["id"] = wandb_id(run_id)
            kwargs["resume"] = RESUME
        return kwargs

    def quiet_defaults(self) -> dict[str, str]:
        """:data:`QUIET_DEFAULTS` for a run whose mode is offline or disabled (:data:`QUIET_MODES`), else nothing:
        the variables a process of the run needs where its environment does not set them (a user's
        ``WANDB_ERROR_REPORTING=true`` stays)."""
        return dict(QUIET_DEFAULTS) if str(self.mode) in QUIET_MODES else {}

    def unset_env(self) -> list[str]:
        """The variables of :data:`SHELL_FALLBACKS` that the config does not set: a process of the run must not
        have them, so that wandb records what the config says (the ones it sets, :meth:`env` sets)."""
        return [var for attr, var in SHELL_FALLBACKS.items() if not getattr(self, attr)]

    def process_env(self, environ: Mapping[str, str]) -> dict[str, str | None]:
        """What ``environ`` (a process's environment) must change before wandb is set up in it to open this run:
        name -> value, None for a variable to remove. An offline or disabled run: ``WANDB_MODE`` = its mode and
        :meth:`quiet_defaults` where ``environ`` has none, so that wandb sends nothing; every mode: the
        :meth:`unset_env` variables ``environ`` has, removed. An online run keeps W&B's own behaviour otherwise.
        Applied with :func:`set_environment`."""
        changes: dict[str, str | None] = {}
        if str(self.mode) in QUIET_MODES:
            changes[MODE_ENV] = str(self.mode)
            changes.update({k: v for k, v in self.quiet_defaults().items() if not environ.get(k)})
        changes.update({var: None for var in self.unset_env() if var in environ})
        return changes

    def env(self, *, name: bool = True, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        """The ``WANDB_*`` environment variables (never ``WANDB_API_KEY``). ``name``: include
        ``WANDB_NAME``; ``extra``: the caller's own variables, placed after ``WANDB_MODE`` and before
        the optional entity, tags and run id. What the environment must not have (:meth:`unset_env`) and
        the defaults of a quiet run (:meth:`quiet_defaults`) are the caller's to apply to it."""
        env = {
            "WANDB_DIR": str(self.dir),
            "WANDB_PROJECT": str(self.project),
            "WANDB_RUN_GROUP": str(self.group or ENV_DEFAULT_GROUP),
        }
        if name:
            env["WANDB_NAME"] = str(self.name)
        env[MODE_ENV] = str(self.mode)
        env.update(extra or {})
        if self.entity:
            env["WANDB_ENTITY"] = str(self.entity)
        if self.tags:
            env["WANDB_TAGS"] = ",".join(str(t) for t in self.tags)
        if self.notes:
            env["WANDB_NOTES"] = str(self.notes)
        if self.job_type:
            env["WANDB_JOB_TYPE"] = str(self.job_type)
        if self.id:
            env["WANDB_RUN_ID"] = wandb_id(self.id)
            env["WANDB_RESUME"] = RESUME
        return env


def set_environment(changes: Mapping[str, str | None]) -> dict[str, str | None]:
    """Apply ``changes`` to ``os.environ`` (a value set, None removed: :meth:`WandbIdentity.process_env`) and
    return what those variables were, in the same form, to put back once ``wandb.init`` has set W&B up (wandb
    reads the environment then, and the run keeps what it read; the process's other code, ``wandb.Api`` or a
    later run, is not changed)."""
    saved = {name: os.environ.get(name) for name in changes}
    for name, value in changes.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    return saved
