"""Running the per-run work (parsing, downloading) in worker processes, with a progress bar and
the files read ahead into the OS page cache; and what this machine gives those processes (the CPUs
this process may run on, the memory it can take), which the local executor counts on too
(:mod:`arctl.launch.executors`, a layer above: the one home is here)."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

from arctl.config.terminal import redraws

# a worker's peak memory reading a run, in multiples of the largest file it reads: measured 1.81 GB
# peak RSS for one 202 MB .wandb file (10,000 steps x ~500 keys: ~9x; the parse holds the records,
# the columns and the frame at once), rounded up
READ_MEMORY_FACTOR = 10


def usable_cpus() -> int:
    """The CPUs this process may run on (at least 1): its affinity mask where the OS has one, which
    ``taskset``, a SLURM step and a container's cpuset narrow, at most ``os.cpu_count()``; the host's
    count alone started a worker per host core under ``taskset -c 0`` (from a hunt). A CPU quota
    (``docker --cpus``, cgroup ``cpu.max``) is not a mask and is not counted."""
    total = os.cpu_count() or 1
    try:
        mine = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # macOS, Windows: no affinity mask
        return total
    return max(1, min(total, mine))


def available_memory_gb() -> float:
    """The memory this machine can give new processes now, in GiB: Linux ``MemAvailable``, less where a
    cgroup (a container's, a SLURM step's) limits this process to less (its limit minus its use); on
    macOS what ``vm_stat`` counts free (:func:`vm_stat_available_gb`); else 0 (unknown: no run beyond
    the cores; the total memory, which this once fell back to, says nothing of what other programs hold)."""
    found = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                found = int(line.split()[1]) / 2**20
    except (OSError, ValueError, IndexError):
        pass
    if found is None and sys.platform == "darwin":  # a Mac: no /proc; vm_stat says what is free
        import subprocess

        try:
            text = subprocess.run(["vm_stat"], capture_output=True, text=True, timeout=5).stdout
        except (OSError, subprocess.SubprocessError):
            text = ""
        found = vm_stat_available_gb(text)
    if found is None:
        return 0.0  # unknown: no run beyond the cores (the total memory is not what is free)
    limited = _cgroup_room_gb()
    return min(found, limited) if limited is not None else found


def vm_stat_available_gb(text: str) -> float | None:
    """What macOS can give new processes, in GiB, from ``vm_stat``'s output: its free, inactive and
    speculative pages (psutil's "available" on macOS; purgeable pages are inside the active and inactive
    counts already); None when ``text`` is not vm_stat's."""
    page = re.search(r"page size of (\d+) bytes", text)
    counts = dict(re.findall(r"^Pages (free|inactive|speculative):\s+(\d+)\.", text, re.M))
    if not page or "free" not in counts:
        return None
    return sum(int(v) for v in counts.values()) * int(page.group(1)) / 2**30


def _cgroup_room_gb(root: Path = Path("/sys/fs/cgroup"), membership: Path = Path("/proc/self/cgroup")) -> float | None:
    """This process's cgroup memory limit minus its use, in GiB (v2: memory.max and memory.current of
    its own cgroup; v1: memory.limit_in_bytes and memory.usage_in_bytes), or None: no limit, or none
    readable."""
    try:
        lines = membership.read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controllers == "":  # v2
            pair = (root / path.lstrip("/") / "memory.max", root / path.lstrip("/") / "memory.current")
        elif "memory" in controllers.split(","):  # v1
            base = root / "memory" / path.lstrip("/")
            pair = (base / "memory.limit_in_bytes", base / "memory.usage_in_bytes")
        else:
            continue
        try:
            limit, used = (f.read_text().strip() for f in pair)
            if limit == "max" or int(limit) >= 2**60:
                continue
            return max(0, int(limit) - int(used)) / 2**30
        except (OSError, ValueError):
            continue
    return None


def pool_size(processes: int | None, n_jobs: int, files: list[Path] | None = None) -> tuple[int, str | None]:
    """(worker processes for ``n_jobs`` jobs, a one-line note or None): ``processes`` (else
    :func:`usable_cpus`), at most one a job, and no more than the available memory holds at
    :data:`READ_MEMORY_FACTOR` x the largest of ``files`` each (at least 1; the memory unknown or
    nothing to read: no cap). Each worker parses one run at a time, and a run of 10,000 steps x 500
    keys takes ~1.8 GB: one worker per core of a 64-core login node asked ~115 GB (from a hunt).
    The note says when the memory capped the count, and why."""
    wanted = max(1, min(processes or usable_cpus(), n_jobs))
    if wanted <= 1:
        return wanted, None
    largest = 0
    for p in files or []:
        try:
            largest = max(largest, os.stat(p).st_size)
        except OSError:
            continue
    per_worker = READ_MEMORY_FACTOR * largest
    room = available_memory_gb() * 2**30
    if per_worker <= 0 or room <= 0:
        return wanted, None
    fits = max(1, int(room // per_worker))
    if fits >= wanted:
        return wanted, None
    gb = 2**30
    return fits, (f"reading with {fits} process(es), not {wanted}: {room / gb:.1f} GB of memory is available and "
                  f"each may take ~{per_worker / gb:.1f} GB ({READ_MEMORY_FACTOR} x the largest file to read, "
                  f"{largest / 2**20:.0f} MB)")


def _progress(enabled: bool, total: int, what: str):
    from contextlib import nullcontext

    from rich.console import Console

    # a terminal's stderr only: elsewhere (a pipe, a log file, CI) a transient bar draws nothing and leaves a
    # stray blank line (from a hunt), or its frames pile up in the file (from a hunt: FORCE_COLOR=1, which rich's
    # Console.is_terminal takes for a terminal); a dumb terminal cannot redraw it. The rule of
    # arctl.config.terminal.redraws (the CLI's progress_bars passes its answer as ``enabled``); here for a library
    # caller's default
    if not enabled or total < 2 or not redraws(sys.stderr):
        return nullcontext(None)
    console = Console(stderr=True)
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


def _note(text: str) -> None:
    """``note: text`` on stderr, one line (where the pool's notes go: the command's own output is stdout)."""
    from rich.console import Console
    from rich.markup import escape

    Console(stderr=True).print(f"[yellow]note[/]: {escape(text)}", highlight=False, soft_wrap=True)


def _why(err: OSError) -> str:
    """``err`` in a few words, and where a lock could not be made, the folder that holds the locks."""
    import errno

    text = f"{err.strerror or err}" if err.errno is None else f"[Errno {err.errno}] {err.strerror}"
    if err.errno in (errno.ENOSPC, errno.EROFS):
        text += "; the pool's locks live in /dev/shm"
    return text


def _run_here(fn, jobs: list[tuple], progress: bool, what: str, prefetch: list[Path] | None) -> list:
    """Call ``fn(*job)`` for every job in this process, in order."""
    results: list = [None] * len(jobs)
    _prefetch(prefetch or [])
    with _progress(progress, len(jobs), what) as bar:
        task = bar.add_task(what, total=len(jobs)) if bar else None
        for i, job in enumerate(jobs):
            results[i] = fn(*job)
            if bar:
                bar.advance(task)
    return results


def _abandon(pool) -> None:
    """Stop a pool whose workers could not all be started: end those that were (they wait on the pool's queue,
    which nothing will feed, and the interpreter joins them at exit) and drop the jobs submitted."""
    started = list((getattr(pool, "_processes", None) or {}).values())  # ProcessPoolExecutor's own record
    pool.shutdown(wait=False, cancel_futures=True)
    for p in started:
        p.terminate()
    for p in started:
        p.join()
        p.close()  # its sentinel pipe


def _run_parallel(fn, jobs: list[tuple], processes: int | None, progress: bool, what: str,
                  prefetch: list[Path] | None = None) -> list:
    """Call ``fn(*job)`` for every job, in worker processes when there are several jobs (as many as
    :func:`pool_size` allows); ``prefetch``: files the jobs will read, in job order (see
    :func:`_prefetch`), whose sizes bound the workers by memory."""
    results: list = [None] * len(jobs)
    n_proc, note = pool_size(processes, len(jobs), prefetch)
    if note:
        _note(note)
    if n_proc <= 1:
        return _run_here(fn, jobs, progress, what, prefetch)
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor, as_completed

    # imported once here and inherited by forked workers instead of imported by each of them
    import pandas  # noqa: F401
    import pyarrow.compute  # noqa: F401
    import pyarrow.parquet  # noqa: F401
    import wandb.proto.wandb_internal_pb2  # noqa: F401

    import arctl.track.wandbfile.history_bulk  # noqa: F401
    import arctl.track.wandbfile.reader  # noqa: F401

    # fork only on Linux: macOS offers it, but its system libraries are not fork-safe (Python's default there is
    # spawn, as report/style.py forks only on Linux); spawned workers import what they need themselves
    methods = mp.get_all_start_methods()
    ctx = mp.get_context("fork" if "fork" in methods and sys.platform.startswith("linux") else "spawn")
    # making the pool's locks and pipes and forking its workers can fail where the jobs would not: a full or
    # read-only /dev/shm (ENOSPC, EROFS: the locks live there; Docker's default is 64 MB, and Ray leaves objects
    # there after a crash), too few file descriptors (EMFILE), no room for a process (EAGAIN, ENOMEM). Then this
    # process reads them all, and a note says why (from a hunt: a 70-line traceback of the first `arctl report`)
    failed = None  # why the workers could not be made: said outside the except, whose traceback holds the
    # half-made pool's pipes (the file descriptors that the reads here need: `ulimit -n 12`, from a hunt)
    try:
        pool = ProcessPoolExecutor(max_workers=n_proc, mp_context=ctx)
    except OSError as err:
        failed = _why(err)
    else:
        try:
            # submit (and so fork) before the progress bar starts its refresh thread
            futures = {pool.submit(fn, *job): i for i, job in enumerate(jobs)}
        except OSError as err:
            failed = _why(err)
        except BaseException:
            _abandon(pool)  # no worker left waiting (the interpreter would wait for it at exit)
            raise
        if failed is not None:
            _abandon(pool)
            del pool
    if failed is not None:
        import gc

        gc.collect()  # closes the half-made pool's pipes and locks now
        _note(f"reading with 1 process: cannot make worker processes ({failed})")
        return _run_here(fn, jobs, progress, what, prefetch)
    with pool:
        _prefetch(prefetch or [])  # a thread: started after the workers were forked
        with _progress(progress, len(jobs), what) as bar:
            task = bar.add_task(what, total=len(jobs)) if bar else None
            for fut in as_completed(futures):
                results[futures[fut]] = fut.result()
                if bar:
                    bar.advance(task)
    return results
