"""Suite-wide test settings and shared fixtures. Area fixtures live in tests/<area>/conftest.py."""

import os
import sys
from pathlib import Path

import pytest

# Shared helpers live in tests/support/ (resolved.py, micro.py, bad_input.py, slurm_shims.py, wandb_reference.py,
# wandb_workspace.py, fresh_machine.py). Only that folder goes on sys.path: with tests/ itself there, a test
# folder would be importable as a package of its name (tests/verl as `verl` where verl is not installed).
sys.path.insert(0, str(Path(__file__).parent / "support"))

# Never talk to a W&B server from tests; never pick up a developer's key.
os.environ.setdefault("WANDB_MODE", "offline")
os.environ.setdefault("WANDB_SILENT", "true")
os.environ.pop("WANDB_API_KEY", None)
os.environ.pop("WANDB_SERVICE", None)  # each test process owns its W&B service (another's teardown waits for nothing)
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# One OpenMP thread per process (torch's intra-op pool, in every worker and every process a test starts):
# two pytest-xdist workers, the nested fresh-machine suite's two and the jobs tests start share the cores,
# and two threads each only wait on one another (tests/algo, tests/verl and tests/tiny side by side on 2
# cores, two workers: 326 s with it against 362 s without, CPU 581 s against 636 s; docs/benchmarks.md).
# A tiny job still sets its own (tiny.threads, tiny.warmup.threads), as does the CPU rollout server; Ray
# sets OMP_NUM_THREADS only where it is unset, so verl's Ray workers run one thread too (speed only).
os.environ.setdefault("OMP_NUM_THREADS", "1")
# The tiny warm-up cache is user-level (~/.cache/arctl): the suite keeps its own, shared by its tests
# (and by the jobs they start, which inherit the environment), and never touches the developer's.
if "ARCTL_CACHE" not in os.environ:
    import atexit
    import shutil
    import tempfile

    os.environ["ARCTL_CACHE"] = tempfile.mkdtemp(prefix="arctl-test-cache-")
    atexit.register(shutil.rmtree, os.environ["ARCTL_CACHE"], ignore_errors=True)  # the suite's, not left in /tmp


@pytest.fixture
def sandbox(tmp_path, monkeypatch):
    """A workspace with a registry and a copy of the project's specs (``ARCTL_SPECS`` points at it), for the
    bad-input contract and spec tests (:class:`tests/support/bad_input.Sandbox`)."""
    from bad_input import Sandbox

    box = Sandbox(tmp_path)
    monkeypatch.setenv("ARCTL_SPECS", str(box.specs))
    monkeypatch.delenv("ARCTL_HOME", raising=False)
    monkeypatch.delenv("ARCTL_TEST_BACKEND", raising=False)
    return box


@pytest.fixture(scope="session")
def make_bpe_tokenizer():
    """Build a tiny byte-level BPE tokenizer (HF PreTrainedTokenizerFast) with ``<unk>``, ``<eos>``
    and ``</think>`` specials from ``corpus`` — made locally, no hub."""

    def make(corpus: list[str], vocab_size: int, **special):
        from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
        from transformers import PreTrainedTokenizerFast

        tok = Tokenizer(models.BPE(unk_token="<unk>"))
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(
            vocab_size=vocab_size,
            special_tokens=["<unk>", "<eos>", "</think>"],
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        )
        tok.train_from_iterator(corpus, trainer)
        return PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", eos_token="<eos>", **special)

    return make


# How the whole suite runs (``python -m pytest``, CI's command). The non-slow tests run ONCE, inside
# tests/test_fresh_machine.py, as on a fresh machine (SLURM's programs and the verl extra absent; the
# tests that skipped for want of verl again with verl present): running them here as well would run
# them twice (~1,000 worker-seconds of CI). So when that test is selected and can hide programs here,
# this session deselects every non-slow test; `pytest tests/x`, `-m "not slow"` or a machine where
# nothing can be hidden run them here as before. Then the longest tests first: pytest-xdist's
# `--dist loadgroup` hands out units (one test, or one `xdist_group` of a module that shares an
# expensive module fixture) in this order, so it is longest-processing-time-first scheduling of the two
# workers, but for one thing: a worker holds the next unit before it starts one (it must know the
# next test), so the unit after the fresh-machine test would wait behind it for the whole nested suite
# (verl's CPU loop did: 500 s at the end of CI). `pytest_xdist_make_scheduler` below gives a worker that
# runs the fresh-machine test the last unit instead (the slow test that comes last in this order).
FRESH_MACHINE_TEST = "tests/test_fresh_machine.py"


def _is_fresh_machine_test(item) -> bool:
    return Path(str(item.fspath)).as_posix().endswith(FRESH_MACHINE_TEST)


def _runs_first(item) -> int:
    """0 the fresh-machine test (the non-slow suite), 1 slow verl jobs on the real SLURM (Ray and
    verl's loop: minutes each), 2 other slow tests on the real SLURM, 3 other slow tests, 4 the rest."""
    if _is_fresh_machine_test(item):
        return 0
    if item.get_closest_marker("slow"):
        if item.get_closest_marker("slurm"):
            return 1 if item.get_closest_marker("verl") else 2
        return 3
    return 4


@pytest.hookimpl(trylast=True)  # after `-m`/`-k` have deselected what the command line leaves out
def pytest_collection_modifyitems(config, items):
    import fresh_machine  # tests/support/fresh_machine.py

    fresh = any(_is_fresh_machine_test(i) for i in items)
    if fresh and fresh_machine.INSIDE not in os.environ and fresh_machine.available() is None:
        nested = [i for i in items if not i.get_closest_marker("slow")]
        if nested:
            config.hook.pytest_deselected(items=nested)
            items[:] = [i for i in items if i.get_closest_marker("slow")]
    items.sort(key=_runs_first)  # stable: file order within each rank


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist turns `-n auto` into workers
def pytest_cmdline_main(config):
    """Only test files (``pytest tests/x/test_y.py[::name]``): one process, as ``-n 0`` would, since
    starting the workers costs more than such a run (14 s against 6 s for a small file); a folder, the
    whole suite or an explicit ``-n``/``--dist`` keeps the workers."""
    if getattr(config.option, "numprocesses", None) is None or config.args_source != pytest.Config.ArgsSource.ARGS:
        return
    if any(a.startswith(("-n", "--numprocesses", "--dist", "-d", "--tx")) for a in config.invocation_params.args):
        return
    if config.args and all(str(a).split("::")[0].endswith(".py") for a in config.args):
        config.option.numprocesses = 0


def pytest_xdist_make_scheduler(config, log):
    """`--dist loadgroup`, except that the unit queued behind the fresh-machine test is the queue's last."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadGroupScheduling

    class FreshMachineLast(LoadGroupScheduling):
        def _assign_work_unit(self, node) -> None:
            held = self.assigned_work.get(node, {})
            if self.workqueue and any(nodeid.startswith(FRESH_MACHINE_TEST) and not done
                                      for unit in held.values() for nodeid, done in unit.items()):
                # the last unit, moved to the front for the base class to take
                self.workqueue.move_to_end(next(reversed(self.workqueue)), last=False)
            super()._assign_work_unit(node)

    return FreshMachineLast(config, log)
