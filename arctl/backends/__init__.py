"""Training backends: ``tiny`` (CPU toy testbed, the embedded default) and ``verl`` (GPU clusters).

Every backend exposes ``train(config: dict, run_dir: Path, stop_event: threading.Event | None = None)
-> str`` returning "completed" or "preempted"; ``arctl.launch.backends`` maps backend names to them
(tiny: ``arctl.backends.tiny.trainer:train``). Backends are imported lazily, so the tiny backend
never pulls in verl/ray.
"""
