"""Permissive stand-ins for packages verl imports but part d of the GPU suite never calls.

The device machine has no Ray (its wheel is too big to carry) and no TransferQueue; importing verl's
FSDP engine, its actor config and its loss pulls both in at module level. ``install(["ray",
"transfer_queue"])`` puts a finder first on ``sys.meta_path`` that serves those packages and every
submodule as a module whose every attribute is a harmless stand-in (a callable class that returns
itself, usable as a decorator, base class or value). Nothing of theirs runs in part d.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import types


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


class _StubModule(types.ModuleType):
    def __getattr__(self, name):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
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
