"""The `arctl` command line: thin Typer commands; heavy imports only inside commands."""
