"""Entry point of the ``arctl`` console script.

Commands live in ``arctl/cli/cmd_<name>.py`` modules, each with ``register(app)``; they are found
by name, so adding a command is adding a module. Module imports must stay light (typer, rich):
``arctl --help`` imports no torch, verl, wandb, pandas, hydra.
"""

from __future__ import annotations

import importlib
import pkgutil

import typer

import arctl

app = typer.Typer(
    name="arctl",
    help="Experiment orchestration for AnytimeReasoner: specs -> jobs -> W&B runs -> the paper's figures.",
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
    rich_markup_mode="rich",
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"arctl {arctl.__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version and exit."),
) -> None:
    """arctl: declarative specs -> submitit jobs (local or SLURM) -> W&B -> figures and tables."""


def _register_commands() -> None:
    package = importlib.import_module("arctl.cli")
    for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda i: i.name):
        if info.name.startswith("cmd_"):
            importlib.import_module(f"arctl.cli.{info.name}").register(app)


_register_commands()


def main() -> None:
    app()


if __name__ == "__main__":
    main()
