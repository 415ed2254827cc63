"""The wheel ships the paper's specs: the repository's top-level ``experiments/``, ``sweeps/`` and
``reports/`` (their one source) are copied into the package as ``arctl/specs/`` at build time, where
``arctl.compose.paths`` finds them from any working directory. Everything else is in pyproject.toml."""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

SPEC_FOLDERS = ("experiments", "sweeps", "reports")


class BuildWithSpecs(build_py):
    def run(self):
        super().run()
        here = Path(__file__).resolve().parent
        target = Path(self.build_lib) / "arctl" / "specs"
        for folder in SPEC_FOLDERS:
            src = here / folder
            if src.is_dir():
                shutil.copytree(src, target / folder, dirs_exist_ok=True,
                                ignore=shutil.ignore_patterns("__pycache__", "*.pyc", ".*"))


setup(cmdclass={"build_py": BuildWithSpecs})
