"""What the registered backends bring to composition: their config sections, ranges and scale profiles.

Every backend of the registry (:mod:`arctl.backends.base`: the built-ins and the ``arctl.backends``
entry points of installed packages) adds, under its own name:

- a section of the run config (``Backend.settings_type``: a dataclass, typed like the core sections,
  or None for an open mapping), after the core sections, in name order: :func:`run_config`;
- the ranges of an open section's numeric keys (``Backend.config_ranges``): :func:`backend_ranges`;
- a directory of config-group options (``Backend.conf_dir``, e.g. ``scale/<name>.yaml``), searched
  after ``arctl/conf``: :func:`conf_dirs`.

Every compared method of :mod:`arctl.algo.methods.registry` that declares settings of its own adds
``budget_control.<method>`` (typed, ranged, validated like the core keys): :func:`run_config`.

Loading a backend here imports only its package's ``__init__`` (cheap by the protocol's contract: no
torch, verl or Ray). A backend that cannot be loaded adds nothing; selecting it is reported then, as
one line (``arctl.compose.validate``).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping
from pathlib import Path

from arctl.algo.methods import registry as methods
from arctl.algo.ranges import fields_problem
from arctl.backends.base import Backend, BackendError, available_backends, backend_problems, get_backend
from arctl.config import schema
from arctl.config.ranges import Range


def backends() -> dict[str, Backend]:
    """name -> backend object, of every registered backend that loads (name order)."""
    return _load_backends()[0]


def backend_failures() -> dict[str, str]:
    """name -> why a registered backend cannot be used here (it does not load; an installed package's
    name that is a core section of the run config, or that two packages declare): one line each."""
    return _load_backends()[1]


@functools.cache
def _load_backends() -> tuple[dict[str, Backend], dict[str, str]]:
    from arctl.backends.base import BUILTIN

    core = {f.name for f in dataclasses.fields(schema.RunConfig)}
    out: dict[str, Backend] = {}
    failed: dict[str, str] = dict(backend_problems())
    scales: dict[str, str] = {}  # scale profile -> the backend that brings it (the built-ins' first)
    for name in sorted(available_backends(), key=lambda n: (n not in BUILTIN, n)):
        if name in core:  # its section would replace the core one (from a review)
            failed[name] = (f"backend {name!r} is named like the run config's own section {name}: the package that "
                            "declares it must rename it")
            continue
        try:
            backend = get_backend(name)
            problem = _hooks_problem(name, backend, scales)
        except BackendError as err:
            problem = " ".join(str(err).split())
        if problem:
            failed[name] = problem
        else:
            out[name] = backend
    return dict(sorted(out.items())), failed


def _hooks_problem(name: str, backend: Backend, scales: dict[str, str]) -> str | None:
    """Why a loaded backend cannot be used, asked once of its composition hooks, or None. Its scale profiles are
    recorded in ``scales`` whatever else is wrong with it, so which backend owns a name never depends on another's
    health. From a hunt of plugin paths: a ``settings_type`` or ``conf_dir`` that raised was a traceback in every
    command, also of runs of other backends; a scale profile named like another backend's (``tiny``) silently
    became the default scale's, renaming every run."""
    try:
        folder = _call(backend, "conf_dir")
        mine = sorted(p.stem for p in (Path(folder) / "scale").glob("*.yaml")) if folder is not None else []
        settings = _call(backend, "settings_type")
        ranges = _call(backend, "config_ranges")
    except (Exception, SystemExit) as err:  # noqa: BLE001 - a plugin's hook that fails (or exits) is one line
        return f"backend {name!r} cannot be used: a hook raised {type(err).__name__}: {' '.join(str(err).split())[:200]}"
    taken = [s for s in mine if s in scales]
    scales.update({s: name for s in mine if s not in scales})
    if taken:
        return (f"backend {name!r} cannot be used: its scale {taken[0]!r} is the {scales[taken[0]]} backend's (two "
                "profiles of one name: the built-ins' come first, then the backends' in name order)")
    if settings is not None and not (isinstance(settings, type) and dataclasses.is_dataclass(settings)):
        return f"backend {name!r} cannot be used: its settings_type() is {settings!r}, not a dataclass type or None"
    if ranges is not None and not isinstance(ranges, Mapping):
        return f"backend {name!r} cannot be used: its config_ranges() is {type(ranges).__name__}, not a mapping"
    if outside := [k for k in ranges or {} if not str(k).startswith(f"{name}.")]:
        return f"backend {name!r} cannot be used: it declares a range for {outside[0]!r}, outside its own section {name}.*"
    ranged = frozenset(str(k).removeprefix(f"{name}.") for k in ranges or {})
    if settings is not None and (problem := fields_problem(settings, ranged)):
        return f"backend {name!r} cannot be used: {name}.{problem}"
    return None


def _call(backend: Backend, method: str, *args):
    """A protocol method the backend may lack (an object that does not subclass BackendDefaults)."""
    fn = getattr(backend, method, None)
    return fn(*args) if callable(fn) else None


def run_config() -> type:
    """The run config's schema: :class:`arctl.config.schema.RunConfig` with a section per backend, and
    ``budget_control.<method>`` per compared method with settings of its own (``ControlMethod.settings``;
    rebuilt when a method is registered in this process)."""
    return _run_config(methods.generation())


@functools.cache
def _run_config(_registered: int) -> type:
    return schema.run_config_type({name: _call(b, "settings_type") for name, b in backends().items()},
                                  methods.settings_types())


def open_sections() -> tuple[str, ...]:
    """``"<backend>."`` of every backend's section: where ``+key=value`` may add a key."""
    return tuple(f"{name}." for name in backends())


def added_key_problem(key: str, backend: str) -> str | None:
    """Why ``+key=`` (a key the composed config lacks) would change nothing for a run of ``backend``:
    it is another backend's section, or not where its own backend reads added keys
    (``Backend.added_keys``); None where it is read."""
    section = key.split(".", 1)[0]
    if section != backend:
        return f"{key} is read by the {section} backend only, and this run's backend is {backend}"
    owner = backends().get(backend)
    prefixes = _call(owner, "added_keys") if owner is not None else None
    if prefixes is None or key.startswith(tuple(prefixes)):
        return None
    return f"{key} is no key of the {backend} section: nothing would read it"


@functools.cache
def backend_ranges() -> dict[str, Range]:
    """dotted key -> range that the backends declare for their open sections (``Backend.config_ranges``)."""
    out: dict[str, Range] = {}
    for b in backends().values():  # each key inside its backend's section (_hooks_problem)
        out.update(_call(b, "config_ranges") or {})
    return out


@functools.cache
def conf_dirs() -> tuple[Path, ...]:
    """The backends' config-group directories (``Backend.conf_dir``) that exist, in name order."""
    dirs = [_call(b, "conf_dir") for b in backends().values()]
    return tuple(Path(d) for d in dirs if d is not None and Path(d).is_dir())


def reset() -> None:
    """Forget what was loaded (a test that changes the installed backends)."""
    for fn in (_load_backends, _run_config, backend_ranges, conf_dirs):
        fn.cache_clear()
