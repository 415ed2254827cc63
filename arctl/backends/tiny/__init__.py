"""The tiny CPU backend: the whole AnytimeReasoner loop on a ~1M-parameter Qwen2 and a toy task.

Entry point: :func:`arctl.backends.tiny.trainer.train`. One module per concept: ``task`` (problems,
traces, verifier), ``tokenizer``, ``model``, ``warmup`` (cached supervised warm-up), ``rollout``
(KV-cached thinking and branching summaries), ``update`` (tree-packed PPO-clip), ``evaluate``,
``checkpoint``, ``trainer``.

Its config section ``tiny`` is an open mapping that its scale profiles set
(``conf/scale/tiny.yaml``, ``conf/scale/tiny-running-sum.yaml``); ``settings`` declares the ranges
of its keys and reads them typed (``TinyRun``).
"""

from pathlib import Path

from arctl.backends.base import BackendDefaults

CONF = Path(__file__).resolve().parent / "conf"


class TinyBackend(BackendDefaults):
    """The :class:`arctl.backends.base.Backend` of the tiny testbed (imports torch only to train; the
    toy task is generated, so there is no data to prepare and no job body beyond the plain entry)."""

    name = "tiny"

    def config_ranges(self):
        from arctl.backends.tiny.settings import RANGES

        return RANGES

    def added_keys(self):
        # the scale profile (conf/scale/tiny.yaml) has every key the tiny loop reads; a toy task's knobs
        # are read and checked where the task is built (arctl.backends.tiny.tasks.task_section)
        return ("tiny.task.",)

    def conf_dir(self):
        return CONF  # scale/tiny.yaml (the default scale) and scale/tiny-running-sum.yaml

    def weights_identity(self, config):
        """The vocabulary the run's task gives its tokenizer (the embedding's rows): its size and the sha256 of its
        words in order, so that a run starting from another run's weights with another task's vocabulary (a
        running_sum curriculum with longer sums, the search task from a running_sum run) is refused at the launch,
        not by its job (from a review: it was refused only by the job, in one line, after the queue); a task whose
        knobs change only the problems (the same words) passes."""
        import hashlib

        from arctl.backends.tiny.tasks import toy_task

        try:
            task = toy_task((config.get("tiny") or {}).get("task") or {})
            words = task.vocabulary()
        except (ValueError, TypeError, AttributeError):
            return None  # a bad tiny.task is config_problem's to say
        sha = hashlib.sha256("\n".join(words).encode()).hexdigest()[:12]
        # the knobs it depends on named (from a review: "tiny.task gives a vocabulary of 344 words" left the user to
        # find which of a dozen knobs differs)
        at = ", ".join(f"tiny.task.{task.name}.{k}={getattr(task, k)}" for k in task.VOCAB_KNOBS)
        return {"tiny.task": f"the {task.name} task's vocabulary{' at ' + at if at else ''} ({len(words)} words, "
                             f"sha256 {sha})"}

    def launch_notes(self, configs):
        from arctl.backends.tiny.warmup_key import launch_notes

        return launch_notes(configs)

    def launch_problem(self, config, run_dir):
        """Each tiny job caches its warm-up in the user cache as it starts: one that cannot be written there is
        refused at the launch, naming ``ARCTL_CACHE``, ``XDG_CACHE_HOME`` or ``~/.cache`` (from a hunt: such a
        launch was submitted, and every job failed "PermissionError: ... '.../tiny-warmup'", naming no
        setting). Asked by creating and removing a probe file, nothing made. A cache whose file system has no room
        for a warm-up entry the run must make is refused too (:func:`arctl.backends.tiny.warmup_key.launch_problem`;
        from a hunt: found only once the whole warm-up had trained)."""
        from arctl.backends.tiny.warmup_key import launch_problem
        from arctl.config.files import TINY_WARMUP_CACHE, cache_problem

        return cache_problem(TINY_WARMUP_CACHE) or launch_problem(config)

    def slurm_problem(self, config):
        """A tiny run trains on the CPU and never uses a GPU: a SLURM request for GPUs (``cluster.gpus_per_node``,
        which the shipped ``cluster=slurm`` and ``slurm-a100`` profiles set to 8 for the paper scale) is refused
        (from a hunt: ``arctl run ablation-vr --scale tiny cluster=slurm`` reserved 8 GPUs for each run, without a
        word). A GPU request in ``cluster.sbatch_extra`` must ask for ``cluster.gpus_per_node`` GPUs per node (the
        launch refuses another count before asking here), so this one check finds it too. Asked for SLURM only:
        the local and debug executors request no GPU."""
        cluster = config.get("cluster") or {}
        gpus = int(cluster.get("gpus_per_node") or 0)
        if gpus <= 0:
            return None
        nodes = max(1, int(cluster.get("nodes") or 1))
        extra = " and with no GPU request in cluster.sbatch_extra" if cluster.get("sbatch_extra") else ""
        return (f"the tiny backend uses no GPU: cluster.gpus_per_node={gpus} would reserve {gpus * nodes} GPU(s) per "
                "run that it never uses", "submit it with the tiny scale's own request: --executor slurm, without a "
                f"GPU cluster profile{extra} (cluster.gpus_per_node=0 alone keeps the profile's CPUs and memory, and "
                "tiny.threads follows its cluster.cpus_per_task: other runs)")

    def config_problem(self, config):
        from arctl.backends.tiny.settings import (
            NEEDS_VALUE,
            dataset_problem,
            model_problem,
            seeds_problem,
            warmup_source_problem,
        )

        if problem := warmup_source_problem():
            return problem
        if problem := dataset_problem(config) or seeds_problem(config):
            return problem
        for key, hint in NEEDS_VALUE.items():
            section, _, leaf = key.partition(".")
            if (config.get(section) or {}).get(leaf) is None:
                return (f"{key} is null, which means 'a dataset's size' to verl; the tiny task is generated "
                        "and needs a number", key, hint)
        if problem := model_problem(config.get("model") or {}):
            return problem
        threads, cores = (config.get("tiny") or {}).get("threads"), (config.get("cluster") or {}).get("cpus_per_task")
        if isinstance(threads, int) and isinstance(cores, int) and threads > cores:
            return (f"tiny.threads={threads} is more than the cores a job asks for (cluster.cpus_per_task={cores}): "
                    "its threads would share them, and the local executor would put other runs beside it",
                    "tiny.threads", f"set cluster.cpus_per_task={threads} instead (tiny.threads follows it)")
        if problem := eval_reach_problem(config):
            return problem
        control = config.get("budget_control") or {}
        from arctl.algo.methods.registry import method_of
        from arctl.algo.settings import BudgetControl

        settings = BudgetControl.from_config(config)
        method = method_of(settings)
        if method.writes_target:
            targets = method.target_choices(settings) or ()
            if not 1 <= len(targets) <= 9:
                key = method.targets_key or f"budget_control.{method.name}"
                return (f"the tiny task writes budget_control.method={method.name}'s prompt target as one word, its "
                        f"rank among the fixed targets, so it needs 1 to 9 of them (got {list(targets) or 'null'})",
                        key, f"e.g. {key}=[16,32,48,64]" if method.targets_key else "give the method 1 to 9 fixed targets")
        from arctl.backends.tiny.tasks import toy_task

        try:
            toy = toy_task((config.get("tiny") or {}).get("task") or {})
        except ValueError as err:
            return str(err), "tiny.task", "see arctl/backends/tiny/conf/scale/tiny.yaml for the tasks and their knobs"
        if int(control.get("forcing_extensions") or 0) > 0:
            cue = str(control.get("forcing_cue", ""))
            if cue not in toy.vocabulary() or cue in ("</think>", "<think>"):
                return (f"the tiny task's budget-forcing cue must be one word of the toy vocabulary, not {cue!r}",
                        "budget_control.forcing_cue", "e.g. budget_control.forcing_cue=chk (the toy's re-check word)")
        return None

    def train(self, config, run_dir, stop_event=None):
        from arctl.backends.tiny.trainer import train

        return train(config, run_dir, stop_event)

    def resume_step(self, config, run_dir):
        from arctl.backends.tiny.trainer import resume_point

        return resume_point(config, run_dir)

    def checkpoint_gb(self, config):
        return 0.0  # a model of ~1M parameters: its checkpoints are megabytes, nothing a dry run's disk check counts


def eval_reach_problem(config):
    """The tiny loop evaluates at ``eval.budgets`` and needs them to reach the largest thinking budget (its job
    refuses it at start: :func:`arctl.backends.tiny.trainer.check_config`); said at submission, as one line
    (from a hunt: ``eval.budgets=[48]`` passed the dry run and the job failed as it started)."""
    thinking, evals = (config.get("thinking") or {}).get("budgets"), (config.get("eval") or {}).get("budgets")
    if not (isinstance(thinking, list) and isinstance(evals, list) and thinking and evals
            and all(isinstance(b, int) for b in [*thinking, *evals])):
        return None  # validation names a budget list that is no list of integers
    if max(thinking) > max(evals):
        reach = ",".join(map(str, [*evals, max(thinking)]))
        return (f"eval.budgets go up to {max(evals)} but thinking.budgets to {max(thinking)}: the tiny backend "
                "evaluates up to the largest thinking budget, and its job would refuse to start", "eval.budgets",
                f"let eval.budgets reach {max(thinking)}, e.g. eval.budgets=[{reach}], or leave "
                "eval.budgets unset (null: the scale's and the thinking budgets)")
    return None


BACKEND = TinyBackend()
