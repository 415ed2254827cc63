"""``arctl data prepare``: the datasets the backends declare (verl: DeepScaleR + the paper's eval sets
as parquet files), each written by the backend that declares it (``Backend.datasets``/``prepare_data``)."""

from __future__ import annotations

import os
from pathlib import Path

import typer

from arctl.cli.common import (
    console,
    err_console,
    esc,
    fail,
    nonempty_option,
    print_json,
    printable,
    user_errors,
)


def _dataset_backends() -> dict[str, str]:
    """dataset name -> the registered backend that declares it (the first one, by backend name)."""
    from arctl.backends.base import BackendError, available_backends, get_backend

    table: dict[str, str] = {}
    for name in sorted(available_backends()):
        try:
            declared = get_backend(name).datasets()
        except BackendError:
            continue
        for dataset in declared:
            table.setdefault(dataset, name)
    return table


def _dataset_names() -> tuple[str, ...]:
    return tuple(_dataset_backends())


DATA_ENV = "ARCTL_DATA_DIR"
DEFAULT_DATA_DIR = "~/data/arctl"


def _default_out() -> Path:
    return Path(os.environ.get(DATA_ENV) or DEFAULT_DATA_DIR).expanduser()


def _default_out_named() -> tuple[str, str]:
    """(the output folder as an error names it, what the user does) where --out was not given: the folder
    came from $ARCTL_DATA_DIR or is the default, and an error names that, not --out."""
    if os.environ.get(DATA_ENV):
        return f"{DATA_ENV}={_default_out()}", f"point {DATA_ENV} at another folder (or give --out DIR)"
    return (f"the default data folder {DEFAULT_DATA_DIR} ({_default_out()})",
            f"move it aside, or give --out DIR (or set {DATA_ENV})")


def _parse_sources(items: list[str]) -> dict[str, Path]:
    sources: dict[str, Path] = {}
    for item in items:
        name, sep, path = item.partition("=")
        if not sep or not name.strip() or not path.strip():
            fail(f"--source {item!r} is not NAME=PATH — write e.g. --source aime24=/data/aime24.jsonl")
        if name.strip() not in _dataset_names():
            fail(f"--source {item!r}: unknown dataset {name.strip()!r}; known: {', '.join(_dataset_names())}")
        if name.strip() in sources:
            fail(f"--source {name.strip()} is given twice ({sources[name.strip()]} and {path.strip()}) — give it once")
        sources[name.strip()] = Path(path.strip()).expanduser()
    return sources


def register(app: typer.Typer) -> None:
    data_app = typer.Typer(name="data", help="Prepare the datasets of the backends (verl's).", no_args_is_help=True)

    @data_app.command("prepare")
    def prepare(
        out: str | None = nonempty_option("--out", "-o", help="Output directory (default: $ARCTL_DATA_DIR or ~/data/arctl)."),
        datasets: str = typer.Option(
            "all", "--datasets", "-d", help="Comma-separated datasets to prepare, or all.", metavar="NAMES"
        ),
        source: list[str] = typer.Option(
            [], "--source", "-s", help="NAME=PATH: read a dataset from a local .json/.jsonl/.parquet file (repeatable)."
        ),
        hub: bool = typer.Option(True, "--hub/--no-hub", help="Download datasets without --source from the HF hub."),
        as_json: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
    ) -> None:
        """Write verl parquet (data_source, prompt, ability, reward_model, extra_info) per dataset:
        OUT/deepscaler/train.parquet and OUT/<eval set>/test.parquet."""
        known = _dataset_names()
        names = list(known) if datasets.strip() == "all" else [n.strip() for n in datasets.split(",") if n.strip()]
        names = list(dict.fromkeys(names))  # a name given twice is prepared once (a hunt: "replaced" its own file)
        unknown = [n for n in names if n not in known]
        if not names:
            fail(f"--datasets {datasets!r} names no dataset — give 'all' or some of {', '.join(known)}")
        if unknown:
            fail(f"--datasets {datasets!r}: unknown dataset {unknown[0]!r}; known: {', '.join(known)}")
        sources = _parse_sources(source)
        for stray in [n for n in sources if n not in names]:  # ignored without a word before (from a review)
            err_console.print(esc(printable(f"note: --source {stray}={sources[stray]} is not read: {stray} is not "
                                            f"among --datasets ({', '.join(names)})")))
        target = Path(out).expanduser() if out is not None else _default_out()
        if out is None:  # a folder the user did not name on the command line: the error says where it came from
            from arctl.config.files import folder_problem

            named, remedy = _default_out_named()
            if problem := folder_problem(target):
                fail(f"{named}: {problem} — {remedy}")
        with user_errors():
            from arctl.backends.base import BackendUserError, get_backend

            owners = _dataset_backends()
            summary = []
            for backend in dict.fromkeys(owners[n] for n in names):  # each backend once, in the order asked
                mine = [n for n in names if owners[n] == backend]
                try:
                    summary += get_backend(backend).prepare_data(
                        target, mine, {k: v for k, v in sources.items() if k in mine}, hub) or []
                except BackendUserError as err:  # a file under the folder (a folder where a parquet goes)
                    fail(str(err) if out is not None else str(err).replace("choose another --out", remedy))
        if as_json:
            print_json(summary)
            return
        for row in summary:
            note = ""
            if row["expected"] and row["rows"] != row["expected"]:
                note = f" [yellow](paper: {row['expected']})[/]"
            console.print(esc(f"{row['dataset']:>14} {row['split']:<5} {row['rows']:>6} rows") + note
                          + esc(printable(f"  -> {row['path']}" + (f"  (from {row['source']})" if row.get("source") else "")))
                          + (" [yellow](replaced the file there)[/]" if row.get("replaced") else ""))

    app.add_typer(data_app, name="data")
