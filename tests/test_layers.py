"""The one-way layering of arctl: a module never imports a layer above its own."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "arctl"
ORDER = ["algo", "track", "backends", "spec", "launch", "report", "cli"]


def layer_of(module: str) -> int | None:
    parts = module.split(".")
    if parts[0] != "arctl" or len(parts) < 2:
        return None
    return ORDER.index(parts[1]) if parts[1] in ORDER else None


def imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append(node.module)
    return found


def test_layers_only_import_downwards():
    violations = []
    for path in ROOT.rglob("*.py"):
        rel = path.relative_to(ROOT.parent).with_suffix("")
        own = layer_of(".".join(rel.parts))
        if own is None:
            continue
        for name in imports(path):
            other = layer_of(name)
            if other is not None and other > own:
                violations.append(f"{rel}: imports {name}")
    assert not violations, "\n".join(violations)


def test_algo_does_no_io():
    banned = {"wandb", "pandas", "submitit", "hydra", "omegaconf", "requests", "sqlite3", "subprocess"}
    for path in (ROOT / "algo").rglob("*.py"):
        mods = {m.split(".")[0] for m in imports(path)}
        assert not mods & banned, f"{path}: {mods & banned}"


def test_layer_checker_catches_an_upward_import(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("from arctl.cli.common import fail\n")
    assert layer_of(imports(bad)[0]) > layer_of("arctl.algo.priors")
