"""Permissive stand-ins for packages verl imports but parts d and f of the GPU suite never call, and
the opposite: packages hidden as if they were not installed.

The device machine has no Ray (its wheel is too big to carry), no TransferQueue, no uvicorn and no
FastAPI; importing verl's FSDP engine, its actor worker, its actor config and its loss pulls all four
in at module level (:data:`DEVICE_STUBS`). ``install(["ray", "transfer_queue"])`` puts a finder first on ``sys.meta_path`` that serves those packages and every
submodule as a module whose every attribute is a harmless stand-in (a callable object usable as a
decorator, base class or value; a capitalised name is a stand-in class, a real type, so verl's
``isinstance(data, BatchMeta | KVBatchMeta)`` is False for a TensorDict). Nothing of theirs runs in
parts d and f.

``hide(["verl", ...])`` makes installed packages absent: every finder on ``sys.meta_path`` answers
None for them (``import verl`` raises ModuleNotFoundError, ``importlib.util.find_spec`` gives None)
and ``importlib.metadata`` lists no distribution of that name or owning that module. The suite's
``--hide`` uses it to check that parts d and f fail loudly without verl, and ``--as-device`` to
rehearse the device's image (which packages must travel as wheels, docs/gpu.md; arctl's own
metadata goes too, ``metadata_only``: on the device arctl runs from the working tree, not installed).
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.metadata
import re
import sys
import types
from pathlib import Path


class _Anything:
    """Any attribute, call, decoration or subclassing gives back something usable."""

    def __init__(self, *args, **kwargs):
        pass

    def __call__(self, *args, **kwargs):
        if len(args) == 1 and callable(args[0]) and not kwargs:
            return args[0]  # used as a decorator: keep the decorated function or class
        return _Anything()

    def __getattr__(self, name):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return _Anything()

    def __mro_entries__(self, bases):
        return (object,)

    def __iter__(self):
        return iter(())

    def __or__(self, other):  # annotations such as `ray.ObjectRef | None`
        return _Anything()

    __ror__ = __or__

    def __getitem__(self, item):  # generics such as `ray.ObjectRef[int]`
        return _Anything()

    def __bool__(self):
        return False


class _StubMeta(type):
    """Class-level attribute access on a stand-in class gives a stand-in too."""

    def __getattr__(cls, name):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return _Anything()


class _StubClass(metaclass=_StubMeta):
    """A stand-in *class* (a capitalised name of a stub module, e.g. ``transfer_queue.BatchMeta``): a
    real type, so ``isinstance(x, BatchMeta | KVBatchMeta)`` works (and is False for real data, as
    verl's TransferQueue bridge needs when it is called with a TensorDict), subclassing and
    ``Cls[...]`` too; instances behave as :class:`_Anything`."""

    def __init__(self, *args, **kwargs):
        pass

    def __getattr__(self, name):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return _Anything()

    def __class_getitem__(cls, item):
        return cls


class _StubModule(types.ModuleType):
    def __getattr__(self, name):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        if name[:1].isupper():  # a class by convention: the same type on every access
            cls = _StubMeta(name, (_StubClass,), {"__module__": self.__name__})
            setattr(self, name, cls)
            return cls
        return _Anything()


class _StubFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def __init__(self, roots):
        self.roots = tuple(roots)

    def find_spec(self, fullname, path=None, target=None):
        if fullname.split(".")[0] in self.roots:
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec):
        module = _StubModule(spec.name)
        module.__path__ = []  # a package: submodules resolve through this finder too
        module.__arctl_stub__ = True
        return module

    def exec_module(self, module):
        pass


def install(roots=("ray", "transfer_queue")) -> None:
    """Serve ``roots`` (and their submodules) as stand-ins, ahead of any real installation."""
    for name in list(sys.modules):
        if name.split(".")[0] in roots:
            del sys.modules[name]
    sys.meta_path.insert(0, _StubFinder(roots))


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


class _Hiding:
    """A ``sys.meta_path`` finder seen through a filter: hidden modules and distributions are absent."""

    def __init__(self, finder, roots: frozenset, dists: frozenset):
        self._finder, self._roots, self._dists = finder, roots, dists

    def find_spec(self, fullname, path=None, target=None):
        if fullname.split(".")[0] in self._roots or not hasattr(self._finder, "find_spec"):
            return None
        return self._finder.find_spec(fullname, path, target)

    def find_distributions(self, *args, **kwargs):
        if not hasattr(self._finder, "find_distributions"):
            return iter(())
        return (d for d in self._finder.find_distributions(*args, **kwargs)
                if _norm(d.metadata["Name"] or "") not in self._dists)

    def __getattr__(self, name):
        return getattr(self._finder, name)


def hide(names, metadata_only=()) -> None:
    """Make the packages ``names`` (import names or distribution names) absent from this process:
    their modules, every module of a distribution so named, and their metadata. ``metadata_only``:
    distributions whose metadata (and entry points) go but whose modules stay importable, as a
    package used from a source tree without being installed (arctl on the device)."""
    names = {n for n in names if n}
    owners = importlib.metadata.packages_distributions()  # module root -> distributions
    dists = {_norm(n) for n in names} | {_norm(d) for root in names for d in owners.get(root, ())}
    roots = set(names) | {root for root, ds in owners.items() if any(_norm(d) in dists for d in ds)}
    dists |= {_norm(n) for n in metadata_only}
    for name in list(sys.modules):
        if name.split(".")[0] in roots:
            del sys.modules[name]
    sys.meta_path[:] = [_Hiding(f, frozenset(roots), frozenset(dists)) for f in sys.meta_path]


# The device image: every distribution it holds (device_image.txt, from the device tool's package list).
# Until 2026-12-04 this was eight names plus what they require *as installed here*: that kept pydantic (typer
# requires it here), which the device lacks, and part f's first run there failed on `import pydantic`.
DEVICE_IMAGE_FILE = Path(__file__).with_name("device_image.txt")


def device_image() -> tuple[str, ...]:
    """The distributions of the device's image (normalised names), read from ``DEVICE_IMAGE_FILE``."""
    lines = DEVICE_IMAGE_FILE.read_text().splitlines()
    return tuple(_norm(line.strip()) for line in lines if line.strip() and not line.startswith("#"))


# The wheels docs/gpu.md carries to the device for parts d and f (installed there with --no-deps): what
# verl.workers.engine.fsdp.transformer_impl, verl.trainer.ppo.core_algos, verl.workers.utils.losses,
# verl.workers.engine_workers (part f's actor worker), Hydra's compose (part f) and arctl's verl plugin
# import, less the device image's; each one is needed (the rehearsal without it fails). Ray, TransferQueue,
# uvicorn and FastAPI are stubbed (--stub, DEVICE_STUBS): verl imports them at module level, d and f run
# none of their code. pydantic (with pydantic-core, annotated-types, typing-inspection and a typing-extensions
# new enough for it) is imported by verl's engine workers (part f).
# Not carried since 2026-12-05 (a review): pillow, peft, accelerate, xxhash, psutil and cloudpickle are on the
# image, and what needs them (verl 0.9.1, peft, datasets, tensordict) asks for no version the image's lacks (none
# at all, but peft's accelerate>=0.21.0; the image has accelerate 1.15.0): 9.0 MB less per device call.
# typing-extensions stays: pydantic 2.14.4 and pydantic-core need >= 4.16.0, the image's version is not known.
CARRIED = ("verl", "tensordict", "omegaconf", "antlr4-python3-runtime", "codetiming", "orjson", "pyvers", "datasets",
           "multiprocess", "dill", "hydra-core", "pydantic", "pydantic-core", "annotated-types", "typing-inspection",
           "typing-extensions")
# On the image, needed by the carried wheels: never to be carried again unless a requirement outgrows the image's.
ON_IMAGE_NOT_CARRIED = ("pillow", "peft", "accelerate", "xxhash", "psutil", "cloudpickle")
DEVICE_STUBS = ("ray", "transfer_queue", "uvicorn", "fastapi")
# never hidden: this repository (on sys.path from the working tree on the device too) and the installer
ALWAYS = ("arctl", "pip", "setuptools", "wheel")
# on the device arctl runs from the working tree, not installed: no metadata, so `import verl` finds no
# arctl entry point in ``verl.plugins`` (the suite imports arctl's plugin itself)
NOT_INSTALLED = ("arctl",)


def absent_on_device() -> list[str]:
    """Installed distributions the device would not have: neither in its image (``device_image()``) nor
    CARRIED nor ALWAYS. ``hide()`` them to rehearse parts d and f."""
    installed = {_norm(dist.metadata["Name"] or "") for dist in importlib.metadata.distributions()}
    keep = set(device_image()) | {_norm(n) for n in CARRIED + ALWAYS}
    return sorted(n for n in installed if n and n not in keep)
