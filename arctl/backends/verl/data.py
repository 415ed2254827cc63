"""DeepScaleR (train) and the paper's eval sets -> verl parquet files.

One row per problem, in verl's RL dataset format::

    data_source  "aime24"
    prompt       [{"role": "user", "content": problem + PROMPT_SUFFIX}]  (with_instruction)
    ability      "math"
    reward_model {"style": "rule", "ground_truth": answer}
    extra_info   {"split": "test", "index": i}

Written to ``OUT/<name>/<split>.parquet`` (the paths :mod:`arctl.backends.verl.overrides` uses).
Sources: a local json / jsonl / parquet file per dataset, or the Hugging Face hub through
``datasets``: asked once (:func:`hub_unreachable`); when it cannot be reached, or ``datasets`` is
offline, the copy in the Hugging Face cache.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from arctl.backends.base import BackendUserError
from arctl.config.files import on_read_only_mount, replacing

PROMPT_SUFFIX = " Let's think step by step and output the final answer within \\boxed{}."


@dataclass(frozen=True)
class DatasetSpec:
    name: str
    split: str  # train | test
    hf_id: str
    hf_config: str | None
    hf_split: str
    expected_size: int | None


DATASETS: dict[str, DatasetSpec] = {
    "deepscaler": DatasetSpec("deepscaler", "train", "agentica-org/DeepScaleR-Preview-Dataset", None, "train", 40315),
    "aime24": DatasetSpec("aime24", "test", "HuggingFaceH4/aime_2024", None, "train", 30),
    "amc22": DatasetSpec("amc22", "test", "AI-MO/aimo-validation-amc", None, "train", 83),
    "math500": DatasetSpec("math500", "test", "HuggingFaceH4/MATH-500", None, "test", 500),
    "minerva": DatasetSpec("minerva", "test", "math-ai/minervamath", None, "test", 272),
    "olympiadbench": DatasetSpec("olympiadbench", "test", "Hothan/OlympiadBench", "OE_TO_maths_en_COMP", "train", 675),
}

PROBLEM_KEYS = ("problem", "question", "Problem", "Question", "prompt")
ANSWER_KEYS = ("answer", "final_answer", "Answer", "ground_truth", "gt_answer")


class DataError(BackendUserError):
    """A dataset source that cannot be read or converted (one clear line)."""


SPLIT_KEYS = ("train", "validation", "test")  # the splits a JSON object of splits may hold


def read_records(path: Path, split: str | None = None, hub_split: str | None = None) -> list[dict[str, Any]]:
    """Rows of a local .json (list of objects, {"data": [...]}, or an object of splits: ``split``'s list, else
    ``hub_split``'s (the split the dataset's hub copy has: AIME24's is "train"), else its only one), .jsonl or
    .parquet file."""
    path = Path(path).expanduser()
    if not path.exists():
        raise DataError(f"dataset file {path} does not exist")
    suffix = path.suffix.lower()
    try:
        if suffix == ".parquet":
            import pandas as pd

            with open(path, "rb") as fh:  # a handle: pyarrow refuses a path that is not UTF-8 (from a hunt)
                frame = pd.read_parquet(fh)
            for column in frame.columns:  # float32 answers: to_dict widens 0.1 to 0.10000000149011612 (a hunt)
                if frame[column].dtype.kind == "f" and frame[column].dtype.itemsize < 8:
                    frame[column] = pd.Series([None if _missing(v) else _text(v) for v in frame[column].to_numpy()],
                                              index=frame.index, dtype=object)
            return frame.to_dict("records")
        if suffix == ".jsonl":
            return _json_lines(path)
        if suffix == ".json":
            try:
                data = json.loads(path.read_text(encoding="utf-8-sig"))
            except json.JSONDecodeError as err:
                if err.msg != "Extra data":
                    raise
                return _json_lines(path)  # JSON Lines named .json (from a hunt: refused as "Extra data")
            if isinstance(data, dict):
                for key in ("data", "rows", "problems", *(k for k in (split, hub_split) if k)):
                    if isinstance(data.get(key), list):
                        return data[key]
                splits = [k for k in SPLIT_KEYS if isinstance(data.get(k), list)]
                if len(splits) == 1:  # one split: no doubt which rows are meant (a saved DatasetDict)
                    return data[splits[0]]
                if splits:  # from an audit: {"train": [...], "test": [...]} as an eval set gave its train rows
                    raise DataError(f"{path}: a JSON object of splits ({', '.join(splits)}) without the "
                                    f"{split or 'needed'!r} split this dataset reads; give a file of that split")
                raise DataError(f"{path}: a JSON object must hold a list under 'data' (or be a list)")
            if isinstance(data, list):
                return data
            raise DataError(f"{path}: expected a JSON list of problems")
    except DataError:
        raise
    except Exception as err:  # malformed file
        raise DataError(f"cannot read {path}: {' '.join(str(err).split())[:200]}") from None
    raise DataError(f"{path}: unsupported file type {suffix or '(none)'}; use .json, .jsonl or .parquet")


def _json_lines(path: Path, first: bool = False) -> list[Any]:
    """The rows of a JSON Lines file, each parsed alone: an error names the file's line, not the row's (a review);
    ``first``: the first row only."""
    rows = []
    with open(path, encoding="utf-8-sig") as fh:
        for number, line in enumerate(fh, 1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as err:
                    raise DataError(f"cannot read {path}: line {number}, column {err.colno}: {err.msg}") from None
                if first:
                    break
    return rows


def _chat(value: Any) -> bool:
    """Whether ``value`` is a verl row's prompt: a non-empty list of ``{role, content}`` messages."""
    value = value.tolist() if hasattr(value, "tolist") else value
    return (isinstance(value, (list, tuple)) and bool(value)
            and all(isinstance(m, dict) and "role" in m and "content" in m for m in value))


def _bare(text: str) -> str:
    r"""An answer without the math delimiters that wrap all of it (``$x=3$``, ``$$120^{\circ}$$``, as
    OlympiadBench's ``final_answer`` writes them): the grader's normalisers drop only escaped ``\$``, so
    a right ``\boxed{3}`` scored 0 against ``$x=3$`` (and 1 against ``x=3``)."""
    for mark in ("$$", "$"):
        inner = text[len(mark):-len(mark)] if len(text) > 2 * len(mark) and text.startswith(mark) and text.endswith(mark) else None
        if inner is not None and "$" not in inner and inner.strip():
            return inner.strip()
    return text


def _missing(value: Any) -> bool:
    """No value: None, or the NaN/NA a parquet or pandas table holds for a missing cell (a float column's
    null reads as NaN, and ``str(NaN)`` is ``"nan"``: an answer no summary can match)."""
    if value is None:
        return True
    try:
        import pandas as pd

        return bool(pd.isna(value)) if not isinstance(value, (list, tuple, dict, str)) and pd.api.types.is_scalar(value) else False
    except ImportError:
        return isinstance(value, float) and value != value


def _answers(value: Any) -> list[str]:
    """The acceptable answers of a record: a list in the source (Minerva's ``['0.01', '0.02']``,
    OlympiadBench's one-element ``final_answer``) is a list of alternatives, any of which is right
    (the authors' grader matches any), never one answer joined from them; each without the ``$``
    that wrap all of it (:func:`_bare`)."""
    if _missing(value):
        return []
    if hasattr(value, "tolist"):
        # float32 alternatives as numpy scalars, written at their own precision (tolist() widens them)
        value = list(value) if _narrow_float(getattr(value, "dtype", None)) else value.tolist()
    if isinstance(value, (list, tuple)):
        return [_bare(text) for text in (_text(v) for v in value if not _missing(v)) if text]
    text = _text(value)
    return [_bare(text)] if text else []


def _text(value: Any) -> str:
    """An answer as text: a number as it is written (AMC's 142.0 is "142", 1e-05 is "0.00001": the grader
    reads no exponent), a true/false refused (no answer of a maths problem; from an audit: "True")."""
    if isinstance(value, bool):
        raise DataError(f"answer {value!r} is true/false, not an answer")
    if isinstance(value, float) or _narrow_float(getattr(value, "dtype", None)):
        import numpy as np

        return np.format_float_positional(value, trim="-")  # a float32 at its own precision: 0.1, not 0.100000001
    return str(value).strip()


def _narrow_float(dtype: Any) -> bool:
    """Whether ``dtype`` is a numpy float narrower than a Python float (float32, float16): widened, its 0.1 reads
    0.10000000149011612, a ground truth no right answer matches."""
    return getattr(dtype, "kind", None) == "f" and getattr(dtype, "itemsize", 8) < 8


def _unwritable(text: str) -> str | None:
    """Why ``text`` cannot be written to a parquet file (UTF-8), or None: a lone surrogate (a JSON ``\\ud800``)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as err:
        return f"{text[err.start]!r} (character {err.start + 1}), a lone surrogate that cannot be written as UTF-8"
    return None


def _field(row: dict, keys: Iterable[str]) -> Any:
    """The value of the first of ``keys`` the row gives a value: a missing, blank or empty one is none (a source
    with an empty ``answer`` column beside its ``final_answer``: the answer is the latter, not "no answer")."""
    for key in keys:
        value = row.get(key)
        if _missing(value) or (isinstance(value, str) and not value.strip()) or (
                isinstance(value, (list, tuple)) and not value):
            continue
        return value
    return None


def to_verl_rows(records: list[dict[str, Any]], name: str, split: str, source: str = "") -> list[dict[str, Any]]:
    """Convert raw problem records to verl rows; a record without problem or answer is an error."""
    rows = []
    for i, rec in enumerate(records):
        if not isinstance(rec, dict):
            raise DataError(f"{source or name}: row {i} is not an object")
        problem = _field(rec, PROBLEM_KEYS)
        try:
            answers = _answers(_field(rec, ANSWER_KEYS))
        except DataError as err:
            raise DataError(f"{source or name}: row {i}: {err}") from None
        answer = answers[0] if answers else None
        if (not (isinstance(problem, str) and problem.strip()) and _chat(rec.get("prompt"))
                and isinstance(rec.get("reward_model"), dict) and "ground_truth" in rec["reward_model"]):
            raise DataError(f"{source or name}: row {i} is already a verl row (its prompt is a list of chat "
                            "messages), not a problem to convert: give the file to the run as it is, with "
                            "data.val_files (an eval set) or data.train_files")
        if not isinstance(problem, str) or not problem.strip():
            raise DataError(
                f"{source or name}: row {i} has no problem text (looked for {', '.join(PROBLEM_KEYS)})"
            )
        if answer is None:
            raise DataError(f"{source or name}: row {i} has no answer (looked for {', '.join(ANSWER_KEYS)})")
        for what, text in (("problem", problem), *(("answer", a) for a in answers)):
            if why := _unwritable(text):
                raise DataError(f"{source or name}: row {i}: the {what} holds {why} — fix or remove that row")
        rows.append(
            {
                "data_source": name,
                # as the authors' data script writes it: f"{question} {instruction}", the problem unstripped
                "prompt": [{"role": "user", "content": with_instruction(problem)}],
                "ability": "math",
                # ground_truth: the first acceptable answer; alternatives: all of them when there are several
                # (one list per row, empty otherwise, so every row has one parquet type)
                "reward_model": {"style": "rule", "ground_truth": answer,
                                 "alternatives": answers if len(answers) > 1 else []},
                "extra_info": {"split": split, "index": i},
            }
        )
    if not rows:
        raise DataError(f"{source or name}: no problems found")
    return rows


def with_instruction(problem: str) -> str:
    """The prompt text of ``problem``: the problem and :data:`PROMPT_SUFFIX`, unless the problem already ends with
    the instruction (from a hunt: a source that carried it was prepared with it twice)."""
    return problem if problem.rstrip().endswith(PROMPT_SUFFIX.strip()) else problem + PROMPT_SUFFIX


PROMPT_FORMAT = "a list of {role, content} messages"  # what a verl row's prompt is


def verl_file_lacks(path: Path, prompt_key: str = "prompt", data_source: bool = False) -> list[str] | None:
    """What a verl dataset file (parquet: its schema; json/jsonl: its first row) lacks of what arctl's run reads:
    ``prompt_key`` as a list of ``{role, content}`` messages, ``reward_model.ground_truth`` (without it every
    reward is 0) and, with ``data_source``, the column that names its metrics; [] where it has all, None where it
    cannot be read here (the job's own loader says why). Nothing but the schema (or the first row) is read."""
    path = Path(path).expanduser()
    suffix = path.suffix.lower()
    try:
        if suffix == ".parquet":
            import pyarrow as pa
            import pyarrow.parquet as pq

            with open(path, "rb") as fh:  # a handle: pyarrow refuses a path that is not UTF-8
                schema = pq.ParquetFile(fh).schema_arrow

            def field(name: str) -> Any:
                return schema.field(name).type if name in schema.names else None

            prompt, reward = field(prompt_key), field("reward_model")
            chat = (prompt is not None and (pa.types.is_list(prompt) or pa.types.is_large_list(prompt))
                    and pa.types.is_struct(prompt.value_type)
                    and {"role", "content"} <= {f.name for f in prompt.value_type})
            has_truth = reward is not None and pa.types.is_struct(reward) and reward.get_field_index("ground_truth") >= 0
            has_source = "data_source" in schema.names
        elif suffix in (".json", ".jsonl"):
            try:
                rows = _json_lines(path, first=True) if suffix == ".jsonl" else read_records(path)
            except DataError:
                return None
            row = rows[0] if rows and isinstance(rows[0], dict) else None
            if row is None:
                return None
            chat = _chat(row.get(prompt_key))
            has_truth = isinstance(row.get("reward_model"), dict) and "ground_truth" in row["reward_model"]
            has_source = "data_source" in row
        else:
            return None
    except Exception:  # noqa: BLE001 - not a file this can read: the job's own loader says why
        return None
    lacks = [] if chat else [f"{prompt_key} ({PROMPT_FORMAT})"]
    lacks += [] if has_truth else ["reward_model.ground_truth (the answer each reward is checked against)"]
    return lacks + ([] if has_source or not data_source else ["data_source (the name its metrics are written under)"])


def data_sources_of(path: Path) -> set[str] | None:
    """The ``data_source`` values of a verl dataset file (parquet: that column alone is read), or None where it
    cannot be read here or has none."""
    path = Path(path).expanduser()
    suffix = path.suffix.lower()
    try:
        if suffix == ".parquet":
            import pyarrow.parquet as pq

            with open(path, "rb") as fh:
                return {str(v) for v in pq.read_table(fh, columns=["data_source"]).column(0).to_pylist()}
        if suffix in (".json", ".jsonl"):
            rows = read_records(path)
            return {str(r.get("data_source")) for r in rows if isinstance(r, dict)} or None
    except Exception:  # noqa: BLE001 - not readable here, or no such column
        return None
    return None


def _datasets_offline() -> bool | None:
    """Whether ``datasets`` works offline (``HF_HUB_OFFLINE``, ``TRANSFORMERS_OFFLINE``, or its own
    ``HF_DATASETS_OFFLINE``, which overrides them); None without ``datasets``."""
    try:
        from datasets import config
    except ImportError:
        return None
    return bool(config.HF_HUB_OFFLINE)


def hub_unreachable() -> str | None:
    """Why the Hugging Face hub cannot be reached from here, or None when it answers (any HTTP status),
    when ``datasets`` works offline (it then reads its cache) or is not installed (load_from_hub says
    so). One HEAD with the hub's own client (its proxies, certificates and timeout,
    ``HF_HUB_ETAG_TIMEOUT``): ``datasets`` retries an unreachable hub five times with back-off, ~25 s
    of warnings, before it falls back to its cache."""
    if _datasets_offline() in (None, True):
        return None
    from huggingface_hub import constants
    from huggingface_hub.utils import get_session

    if constants.HF_HUB_OFFLINE:  # HF_DATASETS_OFFLINE=0 beside it: the hub's client refuses at once, no retry
        return None
    try:
        get_session().head(constants.ENDPOINT, timeout=constants.HF_HUB_ETAG_TIMEOUT)
    except Exception as err:  # noqa: BLE001 - whatever stops this request stops datasets' too
        return f"{constants.ENDPOINT}: {' '.join(str(err).split())[:120] or type(err).__name__}"
    return None


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """``datasets``' warnings off within the block ("Using the latest cached version ...": the summary's
    source says where the rows came from; an error is one line)."""
    from datasets.utils import logging

    verbosity = logging.get_verbosity()
    logging.set_verbosity_error()
    try:
        yield
    finally:
        logging.set_verbosity(verbosity)


@contextlib.contextmanager
def _offline() -> Iterator[None]:
    """``datasets`` and the hub's client offline within the block, as ``HF_HUB_OFFLINE=1`` makes them at
    import (both read the module attributes set here on each call)."""
    from datasets import config
    from huggingface_hub import constants

    saved = config.HF_HUB_OFFLINE, config.HF_DATASETS_OFFLINE, constants.HF_HUB_OFFLINE
    config.HF_HUB_OFFLINE = config.HF_DATASETS_OFFLINE = constants.HF_HUB_OFFLINE = True
    try:
        with _quiet():
            yield
    finally:
        config.HF_HUB_OFFLINE, config.HF_DATASETS_OFFLINE, constants.HF_HUB_OFFLINE = saved


def load_from_hub(spec: DatasetSpec, unreachable: str | None = None) -> list[dict[str, Any]]:
    """Rows of ``spec`` from the Hugging Face hub, or from the copy in the Hugging Face cache when
    ``datasets`` works offline or the hub is ``unreachable`` (why, from :func:`hub_unreachable`);
    DataError with one line when neither has it."""
    try:
        import datasets
    except ImportError:
        raise DataError(f"no local file for {spec.name} and the `datasets` package is not installed") from None
    offline = _datasets_offline()
    try:
        with _offline() if unreachable else _quiet() if offline else contextlib.nullcontext():
            ds = datasets.load_dataset(spec.hf_id, spec.hf_config, split=spec.hf_split)
    except Exception as err:
        first = " ".join(str(err).split())[:160]
        flag = f"pass a local file with --source {spec.name}=PATH"
        if unreachable:
            raise CacheMiss(spec.name, "" if "OfflineModeIsEnabled" in first else first) from None
        if offline:
            raise OfflineMiss(spec, first) from None
        raise DataError(f"cannot download {spec.name} ({spec.hf_id}) from the Hugging Face hub ({first}); {flag}") from None
    return [dict(r) for r in ds]


class OfflineMiss(DataError):
    """A dataset ``datasets`` would download, with it offline (an environment switch) and no usable copy in the
    cache: ``why``, what ``datasets`` said. :func:`prepare` names every such dataset in one line."""

    def __init__(self, spec: DatasetSpec, why: str):
        super().__init__(offline_line([(spec, why)]))
        self.spec, self.why = spec, why


def offline_line(missed: list[tuple[DatasetSpec, str]]) -> str:
    """The one line for datasets that ``datasets``, offline, has no usable copy of (from an audit: a list of
    several named only the first, so each rerun found the next)."""
    named = ", ".join(f"{spec.name} ({spec.hf_id})" for spec, _ in missed)
    flags = " ".join(f"--source {spec.name}=PATH" for spec, _ in missed)
    return (f"{named}: no usable copy in your Hugging Face cache, and datasets is offline (HF_HUB_OFFLINE, "
            f"HF_DATASETS_OFFLINE or TRANSFORMERS_OFFLINE) ({missed[0][1]}); pass "
            f"{'a local file' if len(missed) == 1 else 'local files'} with {flags}")


class CacheMiss(DataError):
    """A dataset the hub would have given, with the hub unreachable and no usable copy in the cache:
    ``why`` is empty where the cache has none, else why its copy could not be read."""

    def __init__(self, name: str, why: str):
        super().__init__(f"{name}: {why or 'not in the cache'}")
        self.name, self.why = name, why


def parquet_table(rows: list[dict[str, Any]], where: str = "") -> Any:
    """``rows`` as the pyarrow table :func:`write_parquet` writes: built before anything is written, so that a
    row that cannot be converted is one line (naming ``where`` the rows came from), not a half-written folder."""
    import pandas as pd
    import pyarrow as pa

    try:
        return pa.Table.from_pandas(pd.DataFrame(rows), preserve_index=False)
    except Exception as err:  # noqa: BLE001 - any row pyarrow cannot convert
        raise DataError(f"{where or 'rows'}: cannot be converted to parquet: {' '.join(str(err).split())[:200]}") from None


def write_parquet(rows: list[dict[str, Any]] | Any, path: Path) -> None:
    """Write ``rows`` (or the table :func:`parquet_table` built of them) to ``path``, replacing it whole."""
    import pyarrow.parquet as pq

    table = parquet_table(rows) if isinstance(rows, list) else rows
    path.parent.mkdir(parents=True, exist_ok=True)
    with replacing(path) as tmp, open(tmp, "wb") as fh:  # a handle: pyarrow refuses a path that is not UTF-8
        pq.write_table(table, fh)


def prepare(
    out: Path,
    names: Iterable[str] | None = None,
    sources: dict[str, Path] | None = None,
    use_hub: bool = True,
) -> list[dict[str, Any]]:
    """Write ``out/<name>/<split>.parquet`` for each dataset; return a summary row per dataset."""
    names = list(dict.fromkeys(names)) if names is not None else list(DATASETS)  # a name given twice: once
    sources = dict(sources or {})
    unknown = [n for n in list(names) + list(sources) if n not in DATASETS]
    if unknown:
        raise DataError(f"unknown dataset {unknown[0]!r}; known: {', '.join(DATASETS)}")
    for name in names:  # check every source before writing anything
        if name not in sources and not use_hub:
            raise DataError(f"no source for {name}: pass --source {name}=PATH (json/jsonl/parquet) or allow the hub")
    for name in names:  # every target checked before a source is read (a download can take minutes), and again
        if problem := _target_problem(_target(out, name)):  # before any is written
            raise DataError(problem)
    # the hub is asked once; unreachable, each dataset it would give comes from the Hugging Face cache
    unreachable = hub_unreachable() if any(name not in sources for name in names) else None
    prepared, missing, offline = [], [], []  # every dataset is read and converted before any file is written
    for name in names:
        spec = DATASETS[name]
        if name in sources:
            records, origin = read_records(Path(sources[name]), spec.split, spec.hf_split), str(sources[name])
        else:
            try:
                records = load_from_hub(spec, unreachable)
            except CacheMiss as err:
                missing.append((name, err.why))
                continue
            except OfflineMiss as err:
                offline.append((err.spec, err.why))
                continue
            origin = f"hf:{spec.hf_id}" + (" (cached copy: hub unreachable)" if unreachable else "")
        rows = to_verl_rows(records, name, spec.split, origin)
        table = parquet_table(rows, origin)  # built before anything is written (a hunt: a bad row after a written file)
        prepared.append((name, spec, origin, table, _target(out, name)))
    if offline:
        raise DataError(offline_line(offline))
    if missing:
        named = ", ".join(f"{name} ({why})" if why else name for name, why in missing)
        flags = " ".join(f"--source {name}=PATH" for name, _ in missing)
        raise DataError(f"cannot reach the Hugging Face hub ({unreachable}) and your Hugging Face cache has no "
                        f"usable copy of {named}: pass local files with {flags}")
    for *_, path in prepared:  # every target checked before any is written (from a review: the second's failure
        if problem := _target_problem(path):  # left the first written)
            raise DataError(problem)
    summary = []
    for name, spec, origin, table, path in prepared:
        replaced = path.is_file()
        write_parquet(table, path)
        summary.append(
            {"dataset": name, "split": spec.split, "rows": table.num_rows, "expected": spec.expected_size,
             "source": origin, "path": str(path), "replaced": replaced}
        )
    return summary


def dataset_path(root: Path | str, name: str, split: str) -> Path:
    """The parquet file of dataset ``name``'s ``split`` under the data folder ``root``: ``root/<name>/<split>.parquet``,
    where ``arctl data prepare`` writes it and a run reads it (:func:`arctl.backends.verl.overrides.dataset_file`)."""
    return Path(root).expanduser() / name / f"{split}.parquet"


def _target(out: Path, name: str) -> Path:
    """Where ``arctl data prepare --out OUT`` writes dataset ``name``: its split's file (:func:`dataset_path`)."""
    return dataset_path(out, name, DATASETS[name].split)


def _target_problem(path: Path) -> str | None:
    """Why ``path`` cannot be written (a folder there, a file where a folder must be, a read-only file system, no
    permission), or None."""
    if path.is_dir():
        return f"{path} is a folder, not a parquet file — move it out of the way or choose another --out"
    folder = path.parent
    while not folder.exists():
        folder = folder.parent
    if not folder.is_dir():
        return f"{folder} is a file, where {path} needs a folder — choose another --out"
    if not os.access(folder, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        why = "a read-only file system" if on_read_only_mount(folder) else "permission denied"  # (os.access says neither)
        return f"{path} cannot be written here ({why}) — choose another --out"
    return None
