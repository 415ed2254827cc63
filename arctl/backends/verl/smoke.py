"""Smoke run of the verl backend (``verl.smoke=true``): a real run's plumbing, without GPU work.

``arctl run main-ar-uniform --scale paper verl.smoke=true`` goes through the same path as the real
run (spec -> launch -> SLURM job with the Ray job body -> ``train``) and stops where the GPU work
would begin. :func:`run_smoke` checks, in order:

1. ``config``  the full verl override list composes into verl's own config and passes verl's
   ``validate_config`` (what the real run does first);
2. ``ray``     it joins the Ray cluster of the job (``RAY_ADDRESS`` from the job body; a local Ray
   when there is none, e.g. ``--executor local``) with the ``ray.init`` arguments of verl's
   ``run_ppo``, waits until ``cluster.nodes`` nodes are alive and runs one task pinned to every
   node: it imports verl there (which must load arctl's plugin through the entry point) and
   reports the host, the SLURM job/step and whether the W&B settings of the runtime env arrived;
3. ``plugin``  the ``verl.plugins`` entry point is declared, ``import verl`` loaded the plugin in
   the driver, and verl's registries hold arctl's agent loop, trainer mode and policy loss;
4. ``inputs``  the data files and the model exist (local directory or Hugging Face cache), and
   Ray sees the GPUs verl will ask for.

Failures of 1-3 raise :class:`SmokeError` (one line) and fail the job. Findings of 4 are
*warnings*: the smoke still completes (so it can check a new cluster before the data is
prepared), but the real run would stop on them. Everything goes to ``run_dir/smoke.json`` (also on
failure) and a summary to the job log. Never written: ``WANDB_API_KEY`` (only whether it is set).
"""

from __future__ import annotations

import json
import os
import platform
import shlex
import socket
import sys
import time
from pathlib import Path
from typing import Any

from arctl.algo.verify import DEEPSCALER, FINAL_ANSWER, round_trip_problem
from arctl.config.files import atomic_write

SMOKE_FILE = "smoke.json"
NODES_TIMEOUT_ENV = "ARCTL_SMOKE_NODES_TIMEOUT_S"  # wait for all nodes to join (default 300 s)
TASK_TIMEOUT_ENV = "ARCTL_SMOKE_TASK_TIMEOUT_S"  # per-node task, verl import included (default 600 s)
PLUGIN_MODULE = "arctl.backends.verl.plugin"
LOCAL_OBJECT_STORE_BYTES = 100_000_000  # a local smoke Ray needs no real object store
PACKAGES = ("arctl", "verl", "ray", "torch", "transformers", "vllm", "flash-attn")


class SmokeError(RuntimeError):
    """A smoke check that failed: the real run would fail the same way."""


def _float_env(name: str, default: float) -> float:
    value = os.environ.get(name)
    try:
        return float(value) if value else default
    except ValueError:
        raise SmokeError(f"{name}={value!r} is not a number of seconds") from None


def _versions() -> dict[str, str | None]:
    from importlib.metadata import PackageNotFoundError, version

    out: dict[str, str | None] = {}
    for name in PACKAGES:
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = None
    return out


def job_facts() -> dict[str, Any]:
    """Where the smoke runs: host, SLURM job, Python, package versions."""
    env = os.environ
    return {
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "slurm_job_id": env.get("SLURM_JOB_ID"),
        "slurm_job_nodelist": env.get("SLURM_JOB_NODELIST"),
        "slurm_cpus_per_task": env.get("SLURM_CPUS_PER_TASK"),
        "cuda_visible_devices": env.get("CUDA_VISIBLE_DEVICES"),
        "python": sys.executable,
        "python_version": platform.python_version(),
        "versions": _versions(),
        "wandb_api_key_set": bool(env.get("WANDB_API_KEY")),
    }


# ------------------------------------------------------------------------------------------------
# 1. verl's config


def check_config(config: dict, run_dir: Path) -> tuple[dict, Any]:
    """Compose + validate verl's config as the real run does; (facts, composed cfg)."""
    from omegaconf import OmegaConf

    from arctl.backends.verl.run_config import verl_run_config, with_wandb_env

    overrides, cfg = verl_run_config(config, run_dir)  # VerlConfigError (one line) on a bad key/type
    with_wandb_env(cfg, config, run_dir)
    facts = {
        "overrides": len(overrides),
        "trainer_mode": OmegaConf.select(cfg, "trainer.v1.trainer_mode"),
        "agent_loop": OmegaConf.select(cfg, "actor_rollout_ref.rollout.agent.default_agent_loop"),
        "policy_loss": OmegaConf.select(cfg, "actor_rollout_ref.actor.policy_loss.loss_mode"),
        "model_path": OmegaConf.select(cfg, "actor_rollout_ref.model.path"),
        "nnodes": int(OmegaConf.select(cfg, "trainer.nnodes")),
        "n_gpus_per_node": int(OmegaConf.select(cfg, "trainer.n_gpus_per_node")),
        "max_response_length": int(OmegaConf.select(cfg, "data.max_response_length")),
        "checkpoint_dir": OmegaConf.select(cfg, "trainer.default_local_dir"),
        "eval_only": bool(OmegaConf.select(cfg, "arctl.eval_only", default=False)),
    }
    return facts, cfg


# ------------------------------------------------------------------------------------------------
# 2. Ray


def probe_node() -> dict[str, Any]:
    """Runs as a Ray task on one node: what a verl worker there would see."""
    import importlib

    before = PLUGIN_MODULE in sys.modules
    started = time.monotonic()
    importlib.import_module("verl")
    from ray import get_runtime_context

    env = os.environ
    return {
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "node_id": get_runtime_context().get_node_id(),
        "slurm_job_id": env.get("SLURM_JOB_ID"),
        "slurm_step_id": env.get("SLURM_STEP_ID"),
        "plugin_loaded_by_import_verl": (not before) and PLUGIN_MODULE in sys.modules,
        "plugin_loaded": PLUGIN_MODULE in sys.modules,
        "import_verl_s": round(time.monotonic() - started, 2),
        "wandb_dir": env.get("WANDB_DIR"),
        "wandb_api_key_set": bool(env.get("WANDB_API_KEY")),
        "cuda_visible_devices": env.get("CUDA_VISIBLE_DEVICES"),
        "python": sys.executable,
    }


def _local_temp_dir() -> Path:
    return Path("/tmp") / f"arctl-ray-smoke-{os.getpid()}"


def check_ray(config: dict, cfg: Any, expected_nodes: int) -> dict[str, Any]:
    """Join (or start) Ray as verl's run_ppo would, wait for every node, run one task on each."""
    import ray

    from arctl.backends.verl.ray_connect import RayConnectError, ray_init_kwargs, wait_for_head

    address = os.environ.get("RAY_ADDRESS") or None
    kwargs = ray_init_kwargs(cfg)
    facts: dict[str, Any] = {"address": address, "started_by": "job body" if address else "smoke (local Ray)",
                             "temp_dir": os.environ.get("ARCTL_RAY_TMP") if address else None,
                             "nodes_expected": expected_nodes}
    local_dir = None
    if address:
        try:
            facts["head_wait_s"] = round(wait_for_head(address), 2)
        except RayConnectError as err:
            raise SmokeError(str(err)) from None
    else:  # no job body (local executor): a small local Ray, as run_ppo would start one (Ray's auth defaults)
        local_dir = _local_temp_dir()
        kwargs.update(num_cpus=kwargs.get("num_cpus") or 1, num_gpus=None if _cuda_count() else 0,
                      object_store_memory=LOCAL_OBJECT_STORE_BYTES, include_dashboard=False,
                      _temp_dir=str(local_dir))
        facts["temp_dir"] = str(local_dir)
    facts["auth_mode"] = os.environ.get("RAY_AUTH_MODE")
    started = time.monotonic()
    try:
        try:
            ray.init(**kwargs, log_to_driver=False, logging_level="WARNING")
        except Exception as err:  # noqa: BLE001 - any ray.init failure is one line for the user
            text = " ".join(str(err).split())[:300]
            where = f"the Ray cluster at RAY_ADDRESS={address}" if address else "a local Ray"
            raise SmokeError(f"cannot join {where}: {type(err).__name__}: {text}") from None
        facts["init_s"] = round(time.monotonic() - started, 2)
        _probe_cluster(ray, facts, expected_nodes)
        return facts
    finally:
        ray.shutdown()
        if local_dir is not None:
            import shutil

            shutil.rmtree(local_dir, ignore_errors=True)


def _probe_cluster(ray, facts: dict[str, Any], expected_nodes: int) -> None:
    """Wait for ``expected_nodes`` alive nodes, then run :func:`probe_node` pinned to each of them."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    try:
        facts["session_dir"] = ray._private.worker.global_worker.node.get_session_dir_path()
    except Exception:  # noqa: BLE001 - informative only
        facts["session_dir"] = None
    from arctl.backends.verl.ray_connect import wait_for_nodes

    timeout = _float_env(NODES_TIMEOUT_ENV, 300.0)
    nodes = wait_for_nodes(ray, expected_nodes, timeout)
    facts["nodes"] = len(nodes)
    facts["node_ips"] = sorted(n.get("NodeManagerAddress") for n in nodes)
    wanted = ("CPU", "GPU", "memory", "object_store_memory")
    facts["resources"] = {k: v for k, v in ray.cluster_resources().items() if k in wanted}
    if len(nodes) != expected_nodes:
        raise SmokeError(
            f"Ray has {len(nodes)} alive node(s) but cluster.nodes={expected_nodes} (waited {timeout:.0f}s) — "
            "a `ray start` did not join: see the job log"
        )
    probe = ray.remote(num_cpus=0)(probe_node)
    refs = {n["NodeID"]: probe.options(scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False)).remote()
            for n in nodes}
    try:
        results = ray.get(list(refs.values()), timeout=_float_env(TASK_TIMEOUT_ENV, 600.0))
    except Exception as err:  # noqa: BLE001 - GetTimeoutError, RayTaskError, worker crash
        text = " ".join(str(err).split())[:300]
        raise SmokeError(f"the smoke task did not run on every Ray node: {type(err).__name__}: {text}") from None
    facts["tasks"] = results
    missing = sorted(set(refs) - {r["node_id"] for r in results})
    if missing:
        raise SmokeError(f"the smoke tasks ran on the wrong nodes (none on {missing[0]})")
    for result in results:
        if not result["plugin_loaded"]:
            raise SmokeError(
                f"`import verl` in the Ray worker on {result['host']} did not load arctl's plugin — install arctl "
                f"(with its verl.plugins entry point) in the workers' Python {result['python']}"
            )


def _cuda_count() -> int:
    try:
        import torch

        return torch.cuda.device_count() if torch.cuda.is_available() else 0
    except Exception:  # noqa: BLE001
        return 0


# ------------------------------------------------------------------------------------------------
# 3. plugin


def check_plugin(loaded_before_verl: bool) -> dict[str, Any]:
    """The entry point is declared, ``import verl`` loaded the plugin, and verl's registries hold our names.

    ``loaded_before_verl``: was the plugin module imported before anything imported verl?
    """
    from importlib.metadata import entry_points

    eps = [ep.value for ep in entry_points(group="verl.plugins") if ep.name == "arctl"]
    if not eps:
        raise SmokeError("arctl's verl.plugins entry point is not installed — reinstall arctl: pip install -e '.[verl]'")
    import verl  # noqa: F401 - loads every verl.plugins entry point

    loaded = PLUGIN_MODULE in sys.modules
    if not loaded:
        raise SmokeError(
            "`import verl` did not load arctl's plugin — is VERL_USE_EXTERNAL_PLUGINS set to 'none' or a list without arctl?"
        )
    from arctl.backends.verl import plugin

    registered = plugin.registered()
    missing = [k for k, ok in registered.items() if not ok]
    failed = plugin.failures()
    if failed:  # the cause, kept by the plugin's hook (verl logs plugin errors at DEBUG only)
        module, why = next(iter(failed.items()))
        raise SmokeError(f"arctl's plugin could not extend {module} after `import verl`: {why}")
    if missing:
        raise SmokeError(f"arctl's {missing[0]} ({plugin.NAMES[missing[0]]}) is not in verl's registry after `import verl`")
    return {"entry_point": eps[0], "loaded_by_import_verl": not loaded_before_verl, "registered": registered,
            "names": dict(plugin.NAMES)}


# ------------------------------------------------------------------------------------------------
# 4. inputs (warnings)


def check_data(config: dict, cfg: Any) -> tuple[dict, list[str]]:
    from arctl.backends.verl.overrides import data_dir
    from arctl.backends.verl.run_config import data_files, data_format_problem

    files = {name: Path(name).expanduser().exists() for name in data_files(cfg)}
    missing = [f for f, ok in files.items() if not ok]
    warnings = []
    if missing:
        shown = ", ".join(missing[:3]) + (f" and {len(missing) - 3} more" if len(missing) > 3 else "")
        warnings.append(
            f"{len(missing)} of {len(files)} data file(s) missing: {shown} — run `arctl data prepare --out "
            f"{shlex.quote(str(data_dir(config)))}` (or set verl.data_dir); the real run stops here"
        )
    # the files there, in verl's row format (from a hunt: a file without ground truths trained on rewards of 0)
    if not missing and (problem := data_format_problem(config, cfg)):
        warnings.append(f"{problem}; the real run stops here")
    return {"files": files, "missing": missing}, warnings


def local_tokenizer(path: str) -> Any | None:
    """The model's tokenizer, where it can be read here without downloading; else None."""
    try:
        from transformers import AutoTokenizer

        from arctl.backends.verl.run_config import model_source

        return AutoTokenizer.from_pretrained(model_source(path), local_files_only=True)
    except Exception:  # noqa: BLE001 - no tokenizer here: the job's own start says
        return None


def prompt_problem(path: str, tok: Any | None = None) -> str | None:
    """:func:`arctl.algo.prompts.opens_thinking_problem` of the model's own chat template (a question with the
    generation prompt, as verl's agent loop builds it), where its tokenizer (``tok``, else :func:`local_tokenizer`)
    can be read here; else None."""
    from arctl.algo.prompts import opens_thinking_problem

    tok = tok if tok is not None else local_tokenizer(path)
    if tok is None:
        return None
    try:
        ids = tok.apply_chat_template([{"role": "user", "content": "What is 1 + 1?"}], add_generation_prompt=True,
                                      tokenize=True)
    except Exception:  # noqa: BLE001 - no chat template: the job's own start says
        return None
    ids = ids["input_ids"] if not isinstance(ids, list) else ids
    return opens_thinking_problem(tok, ids)


def _with_prompt_check(facts: dict, name: str, path: str, grader: str, at: str) -> tuple[dict, list[str]]:
    """``facts`` with ``prompt_opens_thinking`` (:func:`prompt_problem`) and ``tokenizer_round_trips``
    (:func:`arctl.algo.verify.round_trip_problem` under the run's ``grader`` and ``at``), and a warning for each
    that fails."""
    tok = local_tokenizer(path)
    problem = prompt_problem(path, tok)
    garbled = round_trip_problem(tok, grader, at) if tok is not None else None
    facts["prompt_opens_thinking"] = problem is None
    facts["tokenizer_round_trips"] = None if tok is None else garbled is None
    return facts, [f"{name}: {p}" for p in (problem, garbled) if p is not None]


def check_model(path: str, grader: str = DEEPSCALER, at: str = FINAL_ANSWER) -> tuple[dict, list[str]]:
    """Facts about ``model.path`` and warnings (its tokenizer checked under the run's ``grader`` and ``at``, where
    it can be read here)."""
    local = Path(path).expanduser()
    if local.is_dir():
        ok = (local / "config.json").exists()
        facts = {"path": path, "kind": "local directory", "config_json": ok}
        if not ok:
            return facts, [f"model.path={path} has no config.json — is it a Hugging Face model directory?"]
        return _with_prompt_check(facts, f"model.path={path}", path, grader, at)
    cached = None
    try:
        from huggingface_hub import try_to_load_from_cache

        hit = try_to_load_from_cache(path, "config.json")
        cached = isinstance(hit, str)
    except Exception:  # noqa: BLE001 - not a repo id, or no huggingface_hub
        cached = False
    facts = {"path": path, "kind": "hugging face id", "in_cache": cached, "hf_home": os.environ.get("HF_HOME")}
    if cached:
        return _with_prompt_check(facts, f"model {path}", path, grader, at)
    return facts, [
        f"model {path} is neither a local directory nor in the Hugging Face cache here — every node will download "
        "it at start (pre-download it with `huggingface-cli download`, on a filesystem all nodes share via HF_HOME)"
    ]


def check_gpus(config_facts: dict, ray_facts: dict) -> tuple[dict, list[str]]:
    expected = config_facts["nnodes"] * config_facts["n_gpus_per_node"]
    ray_gpus = int((ray_facts.get("resources") or {}).get("GPU", 0))
    facts = {"cuda_devices_here": _cuda_count(), "ray_gpus": ray_gpus, "verl_expects": expected}
    if ray_gpus >= expected:
        return facts, []
    return facts, [
        f"Ray sees {ray_gpus} GPU(s) but verl will ask for {expected} (trainer.nnodes={config_facts['nnodes']} x "
        f"trainer.n_gpus_per_node={config_facts['n_gpus_per_node']}) — the real run would wait for GPUs forever: "
        "set cluster.gpus_per_node (or verl.n_gpus_per_node) to what each node has"
    ]


# ------------------------------------------------------------------------------------------------


def _write(run_dir: Path, summary: dict) -> Path:
    path = run_dir / SMOKE_FILE
    atomic_write(path, json.dumps(summary, indent=2, sort_keys=False, default=str) + "\n")
    return path


def _log(message: str) -> None:
    print(f"arctl smoke: {message}", flush=True)


def run_smoke(config: dict, run_dir: Path) -> dict[str, Any]:
    """Run every check, write ``run_dir/smoke.json``, log a summary; raise SmokeError on a failure."""
    from arctl.backends.verl.overrides import VerlConfigError

    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    started = time.time()
    plugin_before_verl = PLUGIN_MODULE in sys.modules and "verl" not in sys.modules
    summary: dict[str, Any] = {
        "status": "running", "ok": None, "error": None, "failed_check": None, "warnings": [],
        "run_id": config.get("run_id"), "experiment": config.get("experiment"), "arm": config.get("arm"),
        "seed": config.get("seed"), "started_at": started, "job": job_facts(), "timings_s": {},
    }
    step = "config"
    try:
        t = time.monotonic()
        summary["config"], cfg = check_config(config, run_dir)
        summary["timings_s"]["config"] = round(time.monotonic() - t, 2)
        _log(f"verl config accepted ({summary['config']['overrides']} overrides)")

        step = "ray"
        t = time.monotonic()
        expected = int((config.get("cluster") or {}).get("nodes") or 1)
        summary["ray"] = check_ray(config, cfg, expected)
        summary["timings_s"]["ray"] = round(time.monotonic() - t, 2)
        hosts = ", ".join(sorted({r["host"] for r in summary["ray"]["tasks"]}))
        _log(f"Ray: {summary['ray']['nodes']}/{expected} node(s) via {summary['ray']['started_by']}; task ran on {hosts}")

        step = "plugin"
        t = time.monotonic()
        summary["plugin"] = check_plugin(plugin_before_verl)
        summary["timings_s"]["plugin"] = round(time.monotonic() - t, 2)
        _log(f"plugin registered: {summary['plugin']['names']}")

        step = "inputs"
        summary["data"], warnings = check_data(config, cfg)
        from arctl.backends.verl.overrides import answer_at_of, grader_of

        summary["model"], more = check_model(str(summary["config"]["model_path"]), grader_of(config),
                                             answer_at_of(config))
        warnings += more
        summary["gpus"], more = check_gpus(summary["config"], summary["ray"])
        summary["warnings"] = warnings + more
    except (SmokeError, VerlConfigError) as err:
        summary.update(status="failed", ok=False, error=str(err), failed_check=step)
        summary["elapsed_s"] = round(time.time() - started, 2)
        _write(run_dir, summary)
        _log(f"FAILED at {step}: {err}")
        raise SmokeError(f"verl smoke failed at {step}: {err}") from None
    summary.update(status="ok with warnings" if summary["warnings"] else "ok", ok=True)
    summary["elapsed_s"] = round(time.time() - started, 2)
    path = _write(run_dir, summary)
    for warning in summary["warnings"]:
        _log(f"WARNING {warning}")
    _log(f"{summary['status']} in {summary['elapsed_s']:.0f}s — {path}")
    return summary
