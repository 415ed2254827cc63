"""What a run started from, as a tiny run records it and the reports read it: the contract of the two sides.

A tiny run writes its warm-up's record (``run_dir/warmup.json``, and the W&B run's config under
:data:`WARMUP_SECTION`) and the kind of machine it trained on (the config's :data:`MACHINE_SECTION`); the
reports read them back as the runs table's flattened config columns (:func:`warmup_column`: ``config.warmup.key``).
A warm-up trained here where arctl ships one for the key has its own cache entry, the key plus
:data:`TRAINED_SUFFIX`: one starting point of the same key whichever way it was reached.
"""

from __future__ import annotations

from arctl.track.metrics_schema import CONFIG_PREFIX

WARMUP_SECTION = "warmup"
MACHINE_SECTION = "machine"
WARMUP_RECORD = "warmup.json"  # the run's warm-up record, in its folder
WARMUP_FIELDS = ("key", "source", "weights_sha256", "accuracy_per_budget", "accuracy", "accuracy_eval", "threads",
                 "torch", "rounds", "seconds")
"""The fields of the warm-up record, in :data:`WARMUP_RECORD` and W&B: ``accuracy_eval``, the settings its
``accuracy_per_budget`` was measured under (:func:`arctl.backends.tiny.warmup_key.measure_settings`)."""
TRAINED_SUFFIX = "-trained"  # the cache entry of a warm-up trained here where arctl ships one for the key


def warmup_column(field: str) -> str:
    """The runs table's column of the warm-up record's ``field`` (one of :data:`WARMUP_FIELDS`)."""
    if field not in WARMUP_FIELDS:
        raise KeyError(f"the warm-up record has no field {field!r}")
    return f"{CONFIG_PREFIX}{WARMUP_SECTION}.{field}"


MACHINE_COLUMN = f"{CONFIG_PREFIX}{MACHINE_SECTION}"
"""The runs table's column of the kind of machine a run trained on."""
