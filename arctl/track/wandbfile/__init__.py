"""Reader for W&B offline transaction logs (``run-<id>.wandb``), the only source of truth of an
offline run in wandb 0.31 (see docs/metrics.md and the wandb-offline note).

Modules, one concept each:

- :mod:`~arctl.track.wandbfile.framing`: header, LevelDB-style log blocks and chunks, checksums →
  the payloads of the records (serialized ``wandb_internal_pb2.Record``s)
- :mod:`~arctl.track.wandbfile.wire`: the protobuf wire format: the varint decoder (one position,
  and many at once) and the record type of a serialized Record without parsing it
- :mod:`~arctl.track.wandbfile.values`: ``value_json`` texts → floats or Python values
- :mod:`~arctl.track.wandbfile.history_bulk`: the vectorized (numpy/pyarrow) history decoder
- :mod:`~arctl.track.wandbfile.history`: history records → a dense table, bulk with the protobuf
  fallback
- :mod:`~arctl.track.wandbfile.reader`: one file → :class:`~arctl.track.run_data.RunData`

A truncated or corrupt file never raises: every intact record is kept and the damage is reported
in :attr:`RunData.warnings`.
"""

from arctl.track.wandbfile.framing import (
    BLOCK_LEN,
    CHUNK_HEADER_LEN,
    FIRST,
    FULL,
    HEADER,
    HEADER_LEN,
    LAST,
    MIDDLE,
    WandbFileError,
    crc32c,
    iter_records,
    scan_records,
)
from arctl.track.wandbfile.history import history_table, history_table_at, history_table_protobuf
from arctl.track.wandbfile.reader import (
    SUMMARY_TAIL,
    has_exit_record,
    read_wandb_file,
    read_wandb_header,
    rewind_of,
)
from arctl.track.wandbfile.wire import (
    FIELD_CONFIG,
    FIELD_EXIT,
    FIELD_HISTORY,
    FIELD_RUN,
    FIELD_SUMMARY,
    NON_ONEOF,
    record_field,
    record_fields,
)

__all__ = [
    "BLOCK_LEN",
    "CHUNK_HEADER_LEN",
    "FIELD_CONFIG",
    "FIELD_EXIT",
    "FIELD_HISTORY",
    "FIELD_RUN",
    "FIELD_SUMMARY",
    "FIRST",
    "FULL",
    "HEADER",
    "HEADER_LEN",
    "LAST",
    "MIDDLE",
    "NON_ONEOF",
    "SUMMARY_TAIL",
    "WandbFileError",
    "crc32c",
    "has_exit_record",
    "history_table",
    "history_table_at",
    "history_table_protobuf",
    "iter_records",
    "read_wandb_file",
    "read_wandb_header",
    "record_field",
    "record_fields",
    "rewind_of",
    "scan_records",
]
