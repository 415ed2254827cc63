"""Checks on a composed run config, before anything runs. Each failure is one SpecError line.

The choice lists and ranges are the schema's (:mod:`arctl.config.schema`); the rules here are the
ones across keys (budgets increasing, a custom prior's probabilities, a batch and its mini-batch,
eval budgets within the thinking budgets, the preemption warning within the time limit, ...)."""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable
from typing import Any

from arctl.algo.methods import control as control_hooks
from arctl.algo.methods.registry import BUILTIN, get_method, method_of, settings_types
from arctl.algo.settings import BudgetControl, Summary
from arctl.backends.base import available_backends
from arctl.compose import plugins
from arctl.compose.errors import SpecError, did_you_mean
from arctl.compose.limits import _MISSING, _lookup, range_problem
from arctl.config.schema import UNREAD_THINKING_TEMPERATURE, bool_fields, field_choices, str_list_fields
from arctl.track.identity import (
    API_KEY_ENV,
    HF_TOKEN_ENV,
    SECRET_LAST_WORD,
    SECRET_MIN_CHARS,
    SECRET_WORD,
    is_secret_name,
    naming_problem,
    secret_in,
    secret_shown,
)

PROB_TOL = 1e-6


def _get(cfg: dict, dotted: str) -> Any:
    node: Any = cfg
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            raise SpecError("missing key", dotted, "the schema arctl/config/schema.py defines it")
        node = node[part]
    return node


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_num(v) -> bool:
    return (isinstance(v, (int, float)) and not isinstance(v, bool)) and math.isfinite(v)


def _check(cfg: dict, key: str, ok: Callable[[Any], bool], expected: str) -> Any:
    value = _get(cfg, key)
    if not ok(value):
        raise SpecError(f"{key}={value!r} is invalid: expected {expected}", key, f"override it, e.g. {key}=...")
    return value


def _choice(cfg: dict, key: str, choices: tuple[str, ...] | None = None) -> str:
    """The value of ``key`` if it is one of ``choices`` (default: the schema's list for the key)."""
    choices = field_choices(plugins.run_config())[key] if choices is None else choices
    value = _get(cfg, key)
    if value not in choices:
        raise SpecError(f"{key}={value!r} is not allowed", key, did_you_mean(str(value), choices))
    return value


def check_budgets(budgets: Any, key: str) -> list[int]:
    """Budgets must be a non-empty, strictly increasing list of positive integers."""
    if not isinstance(budgets, list) or not budgets:
        raise SpecError(f"{key} must be a non-empty list of token budgets", key, f"e.g. {key}=[2000,4000]")
    if not all(_is_int(b) for b in budgets):
        raise SpecError(f"{key}={budgets} must hold integers", key, "budgets are token counts")
    if any(b <= 0 for b in budgets):
        raise SpecError(f"{key}={budgets} has a non-positive budget", key, "every budget must be >= 1 token")
    if not increasing(budgets):
        raise SpecError(f"{key}={budgets} is not strictly increasing", key, "sort them and drop repeats")
    return budgets


def increasing(budgets) -> bool:
    """Each budget above the one before: a support's order, whose last entry is its largest (the resolvers'
    ``arctl.last``/``arctl.part``/``arctl.grid`` read it so: :func:`arctl.compose.resolvers._top`)."""
    budgets = list(budgets)
    return all(b1 < b2 for b1, b2 in zip(budgets, budgets[1:]))


def check_summary_prior(cfg: dict) -> None:
    """``summary.prior``/``summary.probs`` weigh the summaries only under ``summary.weighting=paper``, and that
    weighting applies to decoupled summaries only (:func:`arctl.algo.tree_loss.tree_advantages`): a setting
    read by nothing would change the run id and not one number (from a hunt)."""
    decoupled, weighting = _get(cfg, "summary.decoupled"), _get(cfg, "summary.weighting")
    if weighting == "paper" and not decoupled:
        raise SpecError("summary.weighting=paper weighs decoupled summaries only: this arm's are coupled "
                        "(summary.decoupled=false; only the final budget's summaries are trained, unweighted)",
                        "summary.weighting", "drop summary.weighting=paper, or set summary.decoupled=true")
    if decoupled and weighting == "paper":
        return
    prior, probs, default = _get(cfg, "summary.prior"), _get(cfg, "summary.probs"), Summary().prior
    for key, value, unset in (("summary.prior", prior, default), ("summary.probs", probs, None)):
        if value != unset:
            shown = str(value).replace(" ", "")
            if decoupled:
                raise SpecError(f"{key}={shown} is read only with summary.weighting=paper: here it changes nothing",
                                key, f"add summary.weighting=paper, or drop {key}")
            raise SpecError(f"{key}={shown} is read only with summary.weighting=paper on decoupled summaries: this "
                            "arm's are coupled (summary.decoupled=false), so it changes nothing", key,
                            f"drop {key} (or train decoupled, paper-weighted summaries: summary.decoupled=true "
                            "summary.weighting=paper)")


def check_prior(prior: str, probs: Any, m: int, key: str) -> None:
    """A custom prior needs m non-negative probabilities summing to 1; named priors take none."""
    if prior != "custom":
        if probs is not None:
            raise SpecError(f"{key}.probs is set but {key}.prior={prior}", f"{key}.probs", f"use {key}.prior=custom")
        return
    if not isinstance(probs, list) or not all(_is_num(p) for p in probs):
        raise SpecError(
            f"{key}.prior=custom needs {key}.probs as a list of numbers", f"{key}.probs", f"e.g. {key}.probs=[0.25,0.75]"
        )
    if len(probs) != m:
        raise SpecError(
            f"{key}.probs has {len(probs)} probabilities but there are {m} budgets",
            f"{key}.probs",
            "give one probability per budget",
        )
    if any(p < 0 for p in probs):
        raise SpecError(f"{key}.probs={probs} has a negative probability", f"{key}.probs")
    if abs(sum(probs) - 1.0) > PROB_TOL:
        raise SpecError(f"{key}.probs={probs} sums to {sum(probs):.6g}, not 1", f"{key}.probs", "normalise them")


def largest_budget(cfg: dict, budgets: list[int]) -> int:
    """The largest thinking or scale budget: how far an evaluation may go; an arm
    trained below the scale's b_m (Elastic) is still evaluated up to it."""
    return max([budgets[-1], *[b for b in (cfg.get("scale") or {}).get("budgets") or [] if _is_int(b)]])


def check_budget_control(cfg: dict, budgets: list[int], composing: bool = True) -> None:
    """The compared methods' section (its choices and numbers' ranges: arctl/config/schema.py); ``composing``: the
    method's rules for new runs too (``new_run_problem``: :func:`validate_config`)."""
    limits = _get(cfg, "budget_control.thinkprune_limits")
    if not isinstance(limits, list) or not limits or any(b > a for a, b in zip(limits, limits[1:])):
        raise SpecError(f"budget_control.thinkprune_limits={limits!r} must be a non-empty, non-increasing list of "
                        "thinking limits (each ThinkPrune round prunes further)", "budget_control.thinkprune_limits",
                        "e.g. budget_control.thinkprune_limits=[4000,3000,2000]")
    targets = _get(cfg, "budget_control.l1_targets")
    if targets is not None:
        check_budgets(targets, "budget_control.l1_targets")
    check_method(str(_get(cfg, "budget_control.method")))
    control = BudgetControl.from_config(cfg)  # the method's own rules (arctl.algo.methods.registry)
    method = method_of(control)
    # the arm's own largest thinking budget: what its training rollout reaches (an L1 target past it, which the
    # scale's larger b_m let through, was one the rollout could never reach; from a review)
    total = _get(cfg, "trainer.total_steps")
    found = _asked(f"budget_control.method {method.name!r}", "budget_control.method",
                   lambda: method.config_problem(control, budgets[-1], total))
    if not found and composing and hasattr(method, "new_run_problem"):  # (a plugin's method may predate the hook)
        found = _asked(f"budget_control.method {method.name!r}", "budget_control.method",
                       lambda: method.new_run_problem(control, budgets[-1], total))
    if found:
        raise SpecError(*found)
    # its flags against its hooks, then (a plugin's) each hook it overrides called once: a mistake there is one line
    # here, not a job that fails on the cluster (the built-ins' hooks are arctl's, tested in tests/algo, and would
    # import torch into every command that validates)
    eval_budgets = _select(cfg, "eval.budgets")
    eval_budgets = eval_budgets if isinstance(eval_budgets, list) and eval_budgets else budgets
    problem = (control_hooks.flags_problem(method) if method.name in BUILTIN else
               control_hooks.hooks_problem(control, budgets, eval_budgets, total, _get(cfg, "summary.group_size")))
    if problem:
        raise SpecError(problem, "budget_control.method",
                        "fix the package that provides the method (arctl.algo.methods.registry.ControlMethod), or "
                        "choose another method")
    penalty = _get(cfg, "reward.length_penalty")
    if method.shapes_rewards and penalty not in (None, "none"):  # arctl.algo.tree_loss.shaped_rewards
        raise SpecError(f"reward.length_penalty={penalty} would replace the rewards budget_control.method={method.name} "
                        "shapes (it scores each summary from correctness alone): the two do not compose",
                        "reward.length_penalty", "set reward.length_penalty=none, or budget_control.method=none")
    _check(cfg, "budget_control.forcing_cue", lambda v: isinstance(v, str) and v.strip() != "", "a non-empty cue text, e.g. Wait")


def check_method(name: Any) -> None:
    """SpecError (one line) where ``budget_control.method`` names a method that cannot be loaded or used (a plugin
    not installed, or broken); a name that is no text is left to the choice check."""
    if not isinstance(name, str):
        return
    try:
        get_method(name)
    except ValueError as err:  # a plugin that does not load or cannot be used (from a review: a traceback)
        raise SpecError(" ".join(str(err).split()), "budget_control.method",
                        "fix or reinstall the package that provides it, or choose another method") from err


def validate_resolved(cfg: dict) -> None:
    """Check a config that was resolved before and comes back from disk (a run's frozen config.yaml,
    which anyone may have edited): its method first (from a hunt: a run whose plugin is not installed was told
    its plugin's setting "takes no number"), every range, no interpolation text, every rule across keys."""
    from arctl.compose.resolvers import leftover_problem

    check_method(_select(cfg, "budget_control.method"))
    found = range_problem(cfg) or leftover_problem(cfg)
    if found:
        raise SpecError(found[1], found[0])
    validate_config(cfg, ranges_checked=True, composing=False)


def check_ranges(cfg: dict) -> None:
    """Every numeric value against its declared range (the schema's fields, the open sections', the
    backend's section): :func:`arctl.compose.limits.range_problem` as one SpecError."""
    found = range_problem(cfg)
    if found:
        key, problem = found
        raise SpecError(problem, key, f"override it, e.g. {key}=...")


ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# A secret written out in a line frozen into config.yaml and the job script (and SLURM's state): a secret's name
# (is_secret_name) given a literal value, `NAME=value`, `export NAME=value`, `--export=ALL,NAME=value`,
# `env_vars.NAME=value`, `NAME: value`; a name in lower case only where a shell assigns it (a line's start, after
# export, ;, &&, |, a parenthesis: `token=...; hf auth login --token $token`, `wandb.login(key=...)`), not a config
# key's tail or a flag's (verl's `data.prompt_key=question`, `ppo_max_token_len_per_gpu=16384`, `--max_token_len=`).
# From a hunt: the first rule read WANDB_API_KEY only, and `export GITHUB_TOKEN=ghp_...`, `export HF_TOKEN=hf_...`,
# `wandb login <key>` reached config.yaml, the job script, SLURM's state and W&B's config.
_ASSIGNED = re.compile(r"(?<![\w$-])([A-Za-z_]\w*)(?:\s*=(?!=)|\s*:(?!:)\s*)")
_SHELL_ASSIGNS = re.compile(r"(?:^|[;&|({]|\b(?:export|declare|typeset|local|readonly|env)(?:\s+-\w+)*)\s*$")
# the commands that take a secret as an argument: `wandb login [--relogin|--host URL ...] KEY` (also
# `python -m wandb login KEY`), `huggingface-cli login --token TOKEN`, `hf auth login --token TOKEN` (and any other
# command of theirs given --token, `hf download --token ...`); the arguments end at the shell's ; & | or )
_LOGIN = re.compile(r"(?<![\w.-])(?:(wandb)\s+login|huggingface-cli|hf)(?![\w.-])([^;&|)\n]*)")
_WANDB_LOGIN_VALUED = ("--host", "--base-url")  # `wandb login`'s options that take a value (not the key)
# a literal: not a reference ($VAR, ${VAR}, "$(cat file)", `cat file`) and at least SECRET_MIN_CHARS long (shorter
# values are flags: HF_HUB_DISABLE_IMPLICIT_TOKEN=1, NCCL_IB_PKEY=0)
_VALUE = re.compile(r"""['"]?([^\s'";&|,)]*)""")


def _literal(value: str) -> bool:  # (a path is no secret's value: SSL_PRIVATE_KEY=/etc/ssl/key.pem)
    return not value.startswith(("$", "`", "/", "~/", "./", "../")) and len(value) >= SECRET_MIN_CHARS


def _names_the_secret(name: str) -> bool:
    """Whether variable ``name`` is a secret whose value a line would write out: :func:`is_secret_name`, and its
    last word names the credential itself (a key, token, password, secret: AWS_SECRET_ACCESS_KEY, HF_TOKEN_2,
    PGPASSWORD, GITHUB_PAT), not a setting about one (from the review of this rule: `export PRIVATE_MODEL_REPO=org/x`
    and `export SECRETS_BACKEND=vault` were refused)."""
    words = [w for w in re.split(r"[^A-Z]+", name.upper()) if w]
    return is_secret_name(name) and bool(words) and (name.upper() == API_KEY_ENV or words[-1] == SECRET_LAST_WORD
                                                     or bool(SECRET_WORD.search(words[-1])))


def _carrier(name: str, line: str) -> str:
    """The variable that should carry the secret ``line`` assigns to ``name``: the name itself where it is a shell
    variable's in upper case; for a lower-case name (a keyword argument, a local: `wandb.login(key=...)`,
    `token=...; hf auth login --token $token`) the one of the tool the line calls."""
    if name == name.upper():
        return name
    low = line.lower()
    return API_KEY_ENV if "wandb" in low else HF_TOKEN_ENV if ("huggingface" in low or "hf " in low) else name.upper()


def written_secret(line: str) -> tuple[str, str] | None:
    """(what is written out, the variable that should carry it instead) for the first secret written out as a
    literal in ``line`` (a shell line, an sbatch flag, a verl override): a secret's name given a value
    (:data:`_ASSIGNED`), ``wandb login KEY``, ``huggingface-cli``/``hf`` ``--token TOKEN`` (:data:`_LOGIN`); else
    None. The value itself is never part of what it returns (an error line shows what it returns)."""
    for m in _ASSIGNED.finditer(line):
        name = m.group(1)
        if not _names_the_secret(name) or (name != name.upper() and not _SHELL_ASSIGNS.search(line[:m.start()])):
            continue
        if _literal(_VALUE.match(line, m.end()).group(1)):
            return name, _carrier(name, line)
    for m in _LOGIN.finditer(line):
        args = m.group(2).split()
        if m.group(1):  # wandb login: its first argument that is no option (nor an option's value)
            skip = False
            for arg in args:
                if skip or arg.startswith("-"):
                    skip = not skip and arg in _WANDB_LOGIN_VALUED
                    continue
                if _literal(_VALUE.match(arg).group(1)):
                    return "the W&B key (`wandb login <key>`)", API_KEY_ENV
                break
            continue
        for n, arg in enumerate(args):
            value = arg[len("--token="):] if arg.startswith("--token=") else args[n + 1] if (
                arg == "--token" and n + 1 < len(args)) else None
            if value is not None and _literal(_VALUE.match(value).group(1)):
                return f"a Hugging Face token (`{m.group(0).split()[0]} ... --token <token>`)", HF_TOKEN_ENV
    return None


def validate_config(cfg: dict, *, ranges_checked: bool = False, composing: bool = True) -> None:
    """Raise SpecError on the first problem in a resolved run config: the ranges (unless the caller
    checked them: ``ranges_checked``, once per command), then the rules across keys and the values
    derived from others, then the backend's own problems (``Backend.config_problem``). ``composing``: a run
    being composed, not a run's frozen config read back to resume it (:func:`validate_resolved`); the rules
    that refuse a config which runs but would not do what it asks (a setting nothing reads, a limit that never
    applies) refuse new runs only, and a run launched before them goes on as it began (from a review: such a
    run's resume was refused, and its frozen config cannot be edited)."""
    if not ranges_checked:
        check_ranges(cfg)
    scale_budgets = (cfg.get("scale") or {}).get("budgets")
    if scale_budgets is not None and composing:  # other values derive from it (arctl.last: its last entry is b_m)
        check_budgets(scale_budgets, "scale.budgets")
    budgets = check_budgets(_get(cfg, "thinking.budgets"), "thinking.budgets")
    m = len(budgets)
    schema = plugins.run_config()  # the core sections and every backend's
    for key, choices in field_choices(schema).items():  # every string key with a choice list, each checked once
        _choice(cfg, key, choices)
    failures = plugins.backend_failures()
    _choice(cfg, "backend", tuple(sorted({*available_backends(), *failures})))
    if cfg.get("backend") in failures:  # a plugin that does not load: why, as one line (from a review: a traceback)
        raise SpecError(failures[cfg["backend"]], "backend", "fix or reinstall the package that provides it, or "
                        "choose another backend")
    for key in bool_fields(schema):
        _check(cfg, key, lambda v: isinstance(v, bool), "true or false")
    for key in bool_fields(schema, nullable=True):
        _check(cfg, key, lambda v: v is None or isinstance(v, bool), "true, false or null")
    secrets = _get(cfg, "cluster.secrets")
    if isinstance(secrets, list):  # an entry that is no name is not shown: it may be a secret's value, pasted in
        # place of its name (from a hunt: the type check echoed `cluster.secrets=['hf_PASTED-...'] is invalid`)
        bad = next((n for n, x in enumerate(secrets) if not (isinstance(x, str) and ENV_NAME.fullmatch(x))), None)
        if bad is not None:
            raise SpecError(f"cluster.secrets[{bad}] is no environment variable's name (not shown: it may be a "
                            "secret's value, pasted in place of a name)", "cluster.secrets",
                            "give the names of variables the shell you launch from sets (letters, digits, _; no $), "
                            "e.g. [HF_TOKEN]")
    for key in str_list_fields(schema):  # shell lines, flags, names (from a review: `cluster.setup=[{a:b}]` went
        # into the job script as the line "{'a': 'b'}")
        _check(cfg, key, lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v), "a list of texts")
    if composing:
        check_summary_prior(cfg)
    for section in ("thinking", "summary"):
        check_prior(_get(cfg, f"{section}.prior"), _get(cfg, f"{section}.probs"), m, section)
    baseline, n = _get(cfg, "thinking.baseline"), _get(cfg, "rollout.n")
    check_budget_control(cfg, budgets, composing=composing)
    if (cfg.get("thinking") or {}).get("temperature", UNREAD_THINKING_TEMPERATURE) != UNREAD_THINKING_TEMPERATURE:
        raise SpecError(  # a key no backend reads: a value set there would change nothing, silently
            f"thinking.temperature={cfg['thinking']['temperature']} is read by no backend",
            "thinking.temperature", "the sampling temperatures are rollout.temperature (training) and "
            "eval.temperature (evaluation)")
    if baseline in ("v2", "brpo") and n < 2:
        raise SpecError(
            f"rollout.n={n} leaves the group baseline V2 nothing to average",
            "rollout.n",
            "use rollout.n>=2 or thinking.baseline=v1/none",
        )
    one = _get(cfg, "summary.group_size") == 1 and n < 2  # arctl.algo.tree_loss.tree_advantages, either layout
    if one and (composing or _get(cfg, "summary.decoupled")):  # (coupled: refused for new runs since 2026-12-05)
        raise SpecError(
            f"summary.group_size=1 with rollout.n={n} trains the summaries with zero advantage: a summary's baseline "
            "is the mean reward of its question's summaries at its budget, here its own reward",
            "summary.group_size",
            "use rollout.n>=2 or summary.group_size>=2",
        )
    lo = _get(cfg, "optim.clip_ratio")
    _check(cfg, "optim.clip_ratio_high", lambda v: v >= lo, f"a number >= optim.clip_ratio={lo}")
    lr, decay = _get(cfg, "optim.lr"), _get(cfg, "optim.weight_decay")
    if composing and lr * decay >= 1:  # (new runs only: a frozen run resumes as it ran)
        raise SpecError(  # from a hunt: lr=10, weight_decay=10 flipped every weight x(-99) a step, loss NaN by step 3
            f"optim.lr={lr:g} x optim.weight_decay={decay:g} = {lr * decay:g} >= 1: AdamW's decoupled decay multiplies "
            "every weight by 1 - lr x weight_decay <= 0 at each step",
            "optim.weight_decay", "keep optim.lr x optim.weight_decay well below 1")
    _check(cfg, "optim.loss_norm_len", lambda v: v is not None,
           "an integer >= 1 (tokens per tree of the Dr. GRPO constant; null picks the authors' rule, which "
           "needs summary.max_tokens)")
    _check(cfg, "optim.betas", lambda v: isinstance(v, list) and len(v) == 2, "[beta1, beta2] in [0, 1)")
    batch, mini = _get(cfg, "data.train_batch_size"), _get(cfg, "data.ppo_mini_batch_size")
    if batch % mini:
        raise SpecError(
            f"data.train_batch_size={batch} is not a multiple of data.ppo_mini_batch_size={mini}",
            "data.ppo_mini_batch_size",
            "pick a divisor of the batch size",
        )
    max_budget = largest_budget(cfg, budgets)
    for key in ("eval.budgets", "eval.grid"):  # derived from the thinking budgets unless set
        eval_budgets = check_budgets(_get(cfg, key), key)
        if eval_budgets[-1] > max_budget:
            raise SpecError(
                f"{key} goes up to {eval_budgets[-1]} but thinking stops at {max_budget}",
                key,
                f"keep eval budgets <= the largest thinking or scale budget ({max_budget})",
            )
    _check(cfg, "eval.datasets", lambda v: isinstance(v, list) and v and all(isinstance(d, str) for d in v), "a non-empty list of dataset names")
    limit = int(_get(cfg, "cluster.time_min")) * 60
    _check(cfg, "cluster.preempt_warning_s", lambda v: _is_int(v) and 1 <= v < limit,
           f"an integer of seconds >= 1 and below the time limit (cluster.time_min = {limit} s); it must cover "
           "finishing a training step and writing a checkpoint")
    if API_KEY_ENV in _get(cfg, "cluster.secrets") and (cfg.get("wandb") or {}).get("mode") != "online":
        raise SpecError(f"cluster.secrets names {API_KEY_ENV}, which only an online run's job uses (an offline "
                        "run's never gets it)", "cluster.secrets",
                        f"leave {API_KEY_ENV} out of cluster.secrets, or log online (wandb.mode=online)")
    check_init_from(cfg)
    # whatever the spelling (`wandb login <key>`, a .netrc line, an HF token in a verl override): the value of a
    # secret of this shell found anywhere in the config (from a review: `wandb login <key>` in cluster.setup
    # reached config.yaml, W&B's config and the job script). First: it names the secret
    found = secret_in(cfg, os.environ)
    if found:
        key, name = found
        raise SpecError(f"the value of {secret_shown(name)} is written here: the config is frozen into the run's "
                        "config.yaml, W&B's config and the job script, where a secret must not be", key,
                        "read it from the environment where it is used (\"$VARIABLE\", a file of mode 600, "
                        "`wandb login` on the cluster), not written into the config")
    # lines frozen into config.yaml and the job script (and SLURM's state): no secret written out there, known to
    # this shell or not (written_secret). A line that reads it from elsewhere ($(cat ~/.key), "$VAR") or unsets it
    # is fine (from a review of the first rule)
    for key in ("cluster.setup", "cluster.sbatch_extra", "verl.overrides"):
        lines = _get(cfg, key) if key != "verl.overrides" else (cfg.get("verl") or {}).get("overrides")
        # one text is one line (read letter by letter, a key in it was missed); a value of another type is refused
        # by its own check (verl.overrides=5 was a traceback here: from an audit)
        lines = lines if isinstance(lines, (list, tuple)) else [] if lines is None else [lines]
        for n, line in enumerate(lines):
            written = written_secret(str(line))
            if written:
                what, variable = written
                raise SpecError(f"{key}[{n}] writes out {what} (not shown): its lines are frozen into the run's "
                                "config.yaml and job script (and SLURM's state), where a secret must not be", key,
                                f"use `wandb login` on the cluster (its job reads ~/.netrc), or set {API_KEY_ENV} in "
                                f"the shell you launch from (a SLURM job gets it only with cluster.secrets="
                                f"[{API_KEY_ENV}])" if variable == API_KEY_ENV else
                                f"set {variable} in the shell you launch from and name it in cluster.secrets="
                                f"[{variable}], which passes it to the job from there")
    naming = naming_problem(cfg.get("wandb") or {})
    if naming:
        key, what, hint = naming
        raise SpecError(what, key, hint)
    problem = _asked(f"backend {cfg['backend']!r}", "backend", lambda: plugins.backends()[cfg["backend"]].config_problem(cfg))
    if problem:
        raise SpecError(*problem)


def _asked(who: str, key: str, ask) -> tuple | None:
    """A plugin's ``config_problem`` answer: None, or (what[, key[, hint]]) texts; one that raises or answers
    something else is the plugin's own problem, said as one line (from a hunt: a traceback, exit 1)."""
    try:
        found = ask()
    except Exception as err:  # noqa: BLE001 - a plugin's rule that fails names the plugin
        raise SpecError(f"{who}'s config_problem raised {type(err).__name__}: {' '.join(str(err).split())[:200]}", key,
                        "fix or reinstall the package that provides it, or choose another") from None
    if found is None or (isinstance(found, tuple) and 1 <= len(found) <= 3 and all(isinstance(x, str) for x in found)):
        return found
    raise SpecError(f"{who}'s config_problem answered {found!r:.80}, not None or (what, key, hint)", key,
                    "fix or reinstall the package that provides it, or choose another")


def check_init_from(cfg: dict) -> None:
    """``trainer.init_from`` names an arm (``ARM`` or ``EXPERIMENT/ARM``); ``trainer.init_run`` is
    the launcher's (the id of that arm's run), never set without it."""
    from arctl.compose.experiment import NAME_RE

    value, run = _get(cfg, "trainer.init_from"), _get(cfg, "trainer.init_run")
    if value is not None:
        parts = str(value).split("/")
        if len(parts) > 2 or not all(NAME_RE.match(p) for p in parts):
            raise SpecError(f"trainer.init_from={value!r} is not an arm", "trainer.init_from",
                            "write ARM (an arm of the same experiment) or EXPERIMENT/ARM")
    elif run is not None:
        raise SpecError(f"trainer.init_run={run!r} without trainer.init_from", "trainer.init_run",
                        "trainer.init_run is written by the launcher: set trainer.init_from=ARM instead")


TINY_UNREAD = {  # keys of the core sections the tiny backend never reads: (why, what to do)
    "trainer.total_epochs": ("the tiny task is generated and has no epochs; a tiny run is trainer.total_steps steps",
                             "set trainer.total_steps=N instead"),
    "data.max_prompt_length": ("the tiny task's prompts are as long as the generated problem (the tiny model's "
                               "context holds them)", "leave it out (--scale paper runs verl, which reads it)"),
    "data.train_files": ("the tiny backend trains on its generated task and reads no file",
                         "leave it out (--scale paper runs verl, which reads it)"),
    "data.val_files": ("the tiny backend evaluates its generated task and reads no file",
                       "leave it out (--scale paper runs verl, which reads it)"),
}
# a budget-control method's own keys (arctl.algo.methods): read only when budget_control.method names it; a plugin's
# section budget_control.<name> (arctl.algo.methods.registry.settings_types) is read only by method=<name> as well
METHOD_KEYS = {"thinkprune": ("budget_control.thinkprune_limits", "budget_control.thinkprune_round"),
               "l1": ("budget_control.l1_mode", "budget_control.l1_alpha", "budget_control.l1_delta",
                      "budget_control.l1_targets")}


def is_written(written, key: str) -> bool:
    """Whether the user's overrides write ``key``: the key itself or a key below it (a section given as a dict
    counts as its leaves: :func:`arctl.compose.overrides.leaf_keys`)."""
    return any(w == key or w.startswith(key + ".") for w in written)


def _shown(value: Any) -> str:
    return "null" if value is None else str(value).replace(" ", "")


def read_at_another_scale(key: str, cfg: dict) -> bool:
    """Whether :func:`unread_settings` finds ``key`` unread only because this run's scale is not one that reads it
    (the verl section and TINY_UNREAD at the tiny backend; another tiny task's knobs, ``tiny.task.<task>.*``, which
    the scale of that task reads): a sweep or experiment file, which runs at every scale, may write it for the scale
    that does."""
    if cfg.get("backend") != "tiny":
        return False
    if key == "verl" or key.startswith("verl.") or key in TINY_UNREAD:
        return True
    parts = key.split(".")
    return len(parts) > 3 and parts[:2] == ["tiny", "task"] and parts[2] != _select(cfg, "tiny.task.name")


def reads_none_of(cfg: dict, keys) -> bool:
    """Whether the run of ``cfg`` reads nothing of any of the dotted ``keys``: :func:`unread_settings` finds each
    of them (or a section above it) unread there."""
    said = {key for _, key, _ in unread_settings(cfg, set(keys))}
    return all(any(k == s or k.startswith(s + ".") for s in said) for k in keys)


def unread_settings(cfg: dict, written, *, grid_literal: bool = False) -> list[tuple[str, str, str]]:
    """The settings the USER wrote (``written``: the keys of the command line's overrides, a config-group
    choice as the keys it sets) that this run never reads: each (what, key, hint). A scale, an experiment or an
    arm sets some of these keys itself (the tiny scale sets budget_control.l1_alpha and forcing_cue, every arm of
    GRPO prior=base), so the config's values alone cannot say what was asked for; a value nothing reads would
    change the run id and not one number (from a hunt). ``grid_literal``: eval.grid is a list written out, not
    derived from eval.grid_size."""
    written = {str(w).lstrip("+~") for w in written}
    found: list[tuple[str, str, str]] = []
    backend = cfg.get("backend")
    get = lambda dotted, default=None: _select(cfg, dotted, default)  # noqa: E731
    if backend == "tiny":  # 1-2: the verl section and the data files of a verl run
        for key in sorted(w for w in written if w == "verl" or w.startswith("verl.")):
            found.append((f"{key} is read by the verl backend only, and this run's backend is tiny", key,
                          "leave it out (--scale paper runs verl)"))
        for key, (why, hint) in TINY_UNREAD.items():
            if is_written(written, key) and get(key) is not None:  # (null: unset, as the tiny scale has it)
                found.append((f"{key}={_shown(get(key))} is read by the verl backend only ({why})", key, hint))
        task = get("tiny.task.name")
        for key in sorted(w for w in written if w.startswith("tiny.task.") and w != "tiny.task.name"):
            other = key.split(".")[2]
            if other != task:
                found.append((f"{key} is a knob of the {other} task, and this run's task is "
                              f"tiny.task.name={task}: nothing reads it", key,
                              f"leave it out, or set tiny.task.name={other}"))
    penalty = get("reward.length_penalty")
    if is_written(written, "reward.alpha") and penalty in (None, "none"):  # 3: arctl.algo.tree_loss.shaped_rewards
        found.append((f"reward.alpha={_shown(get('reward.alpha'))} is read only by a length penalty, and "
                      "reward.length_penalty=none", "reward.alpha",
                      "add reward.length_penalty=v1|v2, or drop reward.alpha"))
    kl_coef = get("optim.kl_coef")
    if is_written(written, "optim.kl_type") and not kl_coef:  # 4: no KL loss at all (arctl.backends.verl.overrides)
        found.append((f"optim.kl_type={get('optim.kl_type')} is read only with a KL loss, and optim.kl_coef=0",
                      "optim.kl_type", "add optim.kl_coef=C (> 0), or drop optim.kl_type"))
    budgets = get("thinking.budgets")
    if isinstance(budgets, list) and len(budgets) == 1:  # 5: one budget: every prior gives it probability 1
        for key in ("thinking.prior", "thinking.probs"):
            value = get(key)
            if is_written(written, key) and value not in ("base", None):
                found.append((f"{key}={_shown(value)} weighs the thinking budgets, and this arm has one "
                              f"(thinking.budgets={_shown(budgets)}): every prior gives it probability 1", key,
                              "drop it (a prior matters to an arm with several thinking budgets)"))
    method = get("budget_control.method")  # 9: a method's keys when another method is chosen
    sections = {owner: tuple(sorted(w for w in written if is_written([w], f"budget_control.{owner}")))
                for owner in settings_types()}  # a plugin's own section, budget_control.<name> (from a hunt: dropped)
    for owner, keys in {**METHOD_KEYS, **sections}.items():
        for key in keys:
            if owner != method and is_written(written, key):
                found.append((f"{key} is read only by budget_control.method={owner}, and this run's is "
                              f"budget_control.method={method}", key,
                              f"add budget_control.method={owner}, or drop {key}"))
    if is_written(written, "budget_control.forcing_cue") and not int(get("budget_control.forcing_extensions") or 0):
        found.append(("budget_control.forcing_cue is read only by budget forcing, and "
                      "budget_control.forcing_extensions=0", "budget_control.forcing_cue",
                      "add budget_control.forcing_extensions=K (> 0), or drop budget_control.forcing_cue"))
    if grid_literal and is_written(written, "eval.grid_size"):  # 8: resolve._finalize derives eval.grid only when null
        found.append((f"eval.grid_size={get('eval.grid_size')} sizes a derived grid, and eval.grid is a list "
                      f"written out ({_shown(get('eval.grid'))})", "eval.grid_size",
                      "drop eval.grid_size, or set eval.grid=null to derive the grid from it"))
    if backend == "verl":
        found += _verl_unread(cfg, written, get)
    return found


def _select(cfg: dict, dotted: str, default: Any = None) -> Any:
    """``cfg``'s value at ``dotted``, or ``default`` where a key on the way is missing."""
    value = _lookup(cfg, dotted)
    return default if value is _MISSING else value


def _verl_unread(cfg: dict, written, get) -> list[tuple[str, str, str]]:
    """6-7: verl's knobs that another knob turns off (arctl.backends.verl.overrides, run_config)."""
    found = []
    eval_only, dynamic = bool(get("verl.eval_only")), bool(get("verl.use_dynamic_bsz"))
    if is_written(written, "verl.eval_checkpoint") and get("verl.eval_checkpoint") is not None and not eval_only:
        found.append((f"verl.eval_checkpoint={get('verl.eval_checkpoint')} is read only by an eval-only run, and "
                      "verl.eval_only=false", "verl.eval_checkpoint",
                      "add verl.eval_only=true, or drop verl.eval_checkpoint (training starts from model.path, or "
                      "from trainer.init_from=ARM)"))
    if is_written(written, "verl.max_token_len_per_gpu") and not dynamic:
        found.append((f"verl.max_token_len_per_gpu={get('verl.max_token_len_per_gpu')} is the token budget of "
                      "dynamic batches, and verl.use_dynamic_bsz=false (micro-batches of "
                      "verl.micro_batch_size_per_gpu rows)", "verl.max_token_len_per_gpu",
                      "add verl.use_dynamic_bsz=true, or drop verl.max_token_len_per_gpu"))
    if is_written(written, "verl.micro_batch_size_per_gpu") and dynamic:
        found.append((f"verl.micro_batch_size_per_gpu={get('verl.micro_batch_size_per_gpu')} is read only without "
                      "dynamic batches, and verl.use_dynamic_bsz=true (micro-batches of verl.max_token_len_per_gpu "
                      "tokens)", "verl.micro_batch_size_per_gpu",
                      "drop verl.micro_batch_size_per_gpu, or set verl.use_dynamic_bsz=false"))
    gpus = int(get("cluster.gpus_per_node") or 0)
    if is_written(written, "verl.n_gpus_per_node") and gpus and gpus != get("verl.n_gpus_per_node"):
        found.append((f"verl.n_gpus_per_node={get('verl.n_gpus_per_node')} is read only when cluster.gpus_per_node "
                      f"is 0, and cluster.gpus_per_node={gpus} (verl trains on the GPUs SLURM gives each node)",
                      "verl.n_gpus_per_node", "set cluster.gpus_per_node=N instead, or drop verl.n_gpus_per_node"))
    if is_written(written, "verl.rehearsal_step_s") and not int(get("verl.rehearsal_steps") or 0):
        found.append((f"verl.rehearsal_step_s={get('verl.rehearsal_step_s')} is read only by a rehearsal, and "
                      "verl.rehearsal_steps=0", "verl.rehearsal_step_s",
                      "add verl.rehearsal_steps=N (> 0), or drop verl.rehearsal_step_s"))
    if is_written(written, "data.train_dataset") and get("data.train_files"):
        found.append((f"data.train_dataset={get('data.train_dataset')} is read only when data.train_files is unset, "
                      "and data.train_files is set (verl trains on those files)", "data.train_dataset",
                      "drop data.train_dataset, or data.train_files"))
    if is_written(written, "data.val_files") and get("data.val_files") and eval_only:
        found.append(("data.val_files is not read by an eval-only run: it evaluates the files of eval.final_datasets "
                      "(else eval.datasets), by name, as its metrics are named", "data.val_files",
                      "name the datasets with eval.final_datasets=[...] and drop data.val_files"))
    return found
