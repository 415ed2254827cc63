"""Running the per-run work (parsing, downloading) in worker processes, with a progress bar and
the files read ahead into the OS page cache."""

from __future__ import annotations

import os
from pathlib import Path


def _progress(enabled: bool, total: int, what: str):
    from contextlib import nullcontext

    from rich.console import Console

    console = Console(stderr=True)
    # a terminal's stderr only: elsewhere (a pipe, a log file, CI) a transient bar draws nothing and leaves a
    # stray blank line (from a hunt)
    if not enabled or total < 2 or not console.is_terminal:
        return nullcontext(None)
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    progress = Progress(
        TextColumn(what),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    )
    return progress


def _prefetch(paths: list[Path]) -> None:
    """Ask the OS to read ``paths`` into its page cache, in order, in a background thread, so the
    disk reads overlap the parsing (a no-op where posix_fadvise does not exist)."""
    if not paths or not hasattr(os, "posix_fadvise"):
        return
    import threading

    def run() -> None:
        for p in paths:
            try:
                fd = os.open(p, os.O_RDONLY)
            except OSError:
                continue
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_WILLNEED)
            except OSError:
                pass
            finally:
                os.close(fd)

    threading.Thread(target=run, name="arctl-prefetch", daemon=True).start()


def _run_parallel(fn, jobs: list[tuple], processes: int | None, progress: bool, what: str,
                  prefetch: list[Path] | None = None) -> list:
    """Call ``fn(*job)`` for every job, in worker processes when there are several jobs;
    ``prefetch``: files the jobs will read, in job order (see :func:`_prefetch`)."""
    results: list = [None] * len(jobs)
    n_proc = min(processes or os.cpu_count() or 1, len(jobs))
    if n_proc <= 1:
        _prefetch(prefetch or [])
        with _progress(progress, len(jobs), what) as bar:
            task = bar.add_task(what, total=len(jobs)) if bar else None
            for i, job in enumerate(jobs):
                results[i] = fn(*job)
                if bar:
                    bar.advance(task)
        return results
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor, as_completed

    # imported once here and inherited by forked workers instead of imported by each of them
    import pandas  # noqa: F401
    import pyarrow.compute  # noqa: F401
    import pyarrow.parquet  # noqa: F401
    import wandb.proto.wandb_internal_pb2  # noqa: F401

    import arctl.track.wandbfile.history_bulk  # noqa: F401
    import arctl.track.wandbfile.reader  # noqa: F401

    methods = mp.get_all_start_methods()
    ctx = mp.get_context("fork" if "fork" in methods else "spawn")
    with ProcessPoolExecutor(max_workers=n_proc, mp_context=ctx) as pool:
        # submit (and so fork) before the progress bar starts its refresh thread
        futures = {pool.submit(fn, *job): i for i, job in enumerate(jobs)}
        _prefetch(prefetch or [])  # a thread: started after the workers were forked
        with _progress(progress, len(jobs), what) as bar:
            task = bar.add_task(what, total=len(jobs)) if bar else None
            for fut in as_completed(futures):
                results[futures[fut]] = fut.result()
                if bar:
                    bar.advance(task)
    return results
