"""The README's Quickstart is exactly two commands, and CI runs the second one verbatim."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def quickstart_commands() -> list[str]:
    text = (ROOT / "README.md").read_text()
    section = text.split("## Quickstart", 1)[1]
    block = re.search(r"```bash\n(.*?)```", section, re.S).group(1)
    return [line for line in block.splitlines() if line.strip()]


def test_quickstart_has_exactly_two_commands():
    commands = quickstart_commands()
    assert len(commands) == 2
    assert "arctl run" in commands[0] and "constraints-cpu.txt" in commands[0]
    assert "pytest" in commands[1] and "constraints-cpu.txt" in commands[1]


def test_ci_runs_the_readme_test_command():
    ci_lines = [line.strip() for line in (ROOT / ".ci/run").read_text().splitlines()]
    assert quickstart_commands()[1].strip() in ci_lines


def test_constraints_pin_the_cpu_torch():
    assert "torch==2.13.0" in (ROOT / "constraints-cpu.txt").read_text()
    assert '"torch>=2.6"' in (ROOT / "pyproject.toml").read_text()
