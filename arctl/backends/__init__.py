"""Training backends: ``tiny`` (CPU toy testbed, the embedded default) and ``verl`` (GPU clusters).

What a backend is (the :class:`~arctl.backends.base.Backend` protocol: ``train``, its config checks,
its section's ranges, its job body and data) and how one is found by name (built-ins, then the
``arctl.backends`` entry points) live in :mod:`arctl.backends.base`. Backend packages are imported
lazily, by the registry, so the tiny backend never pulls in verl or Ray.
"""
