"""The one-way layering of arctl, as import-linter contracts in pyproject.toml (``[tool.importlinter]``):
``lint-imports`` passes on the package, and the same contracts catch an upward import, a backend
imported above the registry, and the two backends importing each other."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib

ROOT = Path(__file__).resolve().parents[1]
LINT = [sys.executable, "-c", "import sys; from importlinter.cli import lint_imports_command as c; sys.exit(c())"]


def lint(cwd: Path, config: Path, pythonpath: Path | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    if pythonpath is not None:
        env["PYTHONPATH"] = str(pythonpath)
    return subprocess.run([*LINT, "--config", str(config), "--no-cache", "--no-logo"], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


def test_the_package_keeps_every_contract():
    done = lint(ROOT, ROOT / "pyproject.toml")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 broken" in done.stdout and "KEPT" in done.stdout


def _fake_arctl(tmp_path: Path, files: dict[str, str]) -> Path:
    """A package named arctl with the real layout's packages (empty) plus ``files``, and the real
    contracts as its config."""
    pkg = tmp_path / "src" / "arctl"
    for sub in ("", "algo", "config", "track", "backends", "backends/tiny", "backends/verl", "compose", "launch", "report", "cli"):
        (pkg / sub).mkdir(parents=True, exist_ok=True)
        (pkg / sub / "__init__.py").write_text("")
    (pkg / "backends" / "base.py").write_text("")
    for rel, text in files.items():
        (pkg / rel).write_text(text)
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    lines = ["[importlinter]", f"root_package = {contracts['root_package']}", "include_external_packages = True"]
    names = []
    for i, contract in enumerate(contracts["contracts"]):
        names.append(f"c{i}")
        lines += ["", f"[importlinter:contract:c{i}]"]
        for key, value in contract.items():
            if key == "ignore_imports":  # they name modules of the real package
                continue
            lines.append(f"{key} = " + ("\n    " + "\n    ".join(value) if isinstance(value, list) else str(value)))
    config = tmp_path / ".importlinter"
    config.write_text("\n".join(lines) + "\n")
    return config


@pytest.mark.parametrize("files, broken", [
    ({"algo/bad.py": "def f():\n    from arctl.cli import main\n"}, "layers"),  # inside a function too
    ({"track/bad.py": "import arctl.launch\n"}, "layers"),
    ({"config/bad.py": "from arctl.compose import resolve\n"}, "layers"),  # the schema sits below composition
    ({"launch/bad.py": "from arctl.backends.tiny import trainer\n"}, "registry"),
    ({"backends/tiny/bad.py": "import arctl.backends.verl\n"}, "independent"),
    ({"algo/bad.py": "import wandb\n"}, "pure maths"),
])
def test_the_contracts_catch_a_violation(tmp_path, files, broken):
    config = _fake_arctl(tmp_path, files)
    done = lint(tmp_path, config, pythonpath=tmp_path / "src")
    assert done.returncode != 0, done.stdout
    names = [c["name"] for c in tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]]
    (name,) = [n for n in names if broken in n]
    text = " ".join(done.stdout.split())  # the report wraps long contract names
    assert f"{name} BROKEN" in text, done.stdout
    assert text.count("BROKEN") == 1, done.stdout  # only the contract the file breaks


def test_a_clean_fake_package_passes(tmp_path):
    config = _fake_arctl(tmp_path, {"cli/ok.py": "import arctl.algo\nimport arctl.backends.base\n"})
    done = lint(tmp_path, config, pythonpath=tmp_path / "src")
    assert done.returncode == 0, done.stdout + done.stderr
