"""save_figure: PNG + PDF + SVG, the PDF written by a forked copy of the process."""

from __future__ import annotations

import os
import sys
import time

import pytest

from arctl.report import style

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="forked saving is Linux-only")


def _figure():
    fig, axes = style.new_figure(1, 2)
    for i, ax in enumerate(axes[0]):
        ax.plot([0, 1, 2], [i, i + 1, i * 2], label=f"arm {i}")
        ax.set_xlabel("step")
        ax.set_ylabel("accuracy (%)")
    style.add_legend(fig, *axes[0][0].get_legend_handles_labels())
    style.add_footnote(fig, "Runs: test ×1 (unit)")
    return fig


def test_three_formats_written_and_equal_to_a_serial_save(tmp_path, monkeypatch):
    """The forked PDF and the serial one, and two saves a second apart, are the same bytes in every format: no
    date in the PDF or the SVG, SVG ids from the file's name (from a hunt: every PDF and SVG differed on every
    rerun, so a committed figure always showed a diff)."""
    forked = style.save_figure(_figure(), tmp_path / "forked", "fig")
    time.sleep(1.1)  # a PDF's CreationDate has seconds
    monkeypatch.setenv("ARCTL_SERIAL_SAVE", "1")
    serial = style.save_figure(_figure(), tmp_path / "serial", "fig")
    assert [p.suffix for p in forked] == [".png", ".pdf", ".svg"]
    heads = {".png": b"\x89PNG", ".pdf": b"%PDF", ".svg": b"<?xml"}
    for p in forked:
        assert p.read_bytes().startswith(heads[p.suffix]) and p.stat().st_size > 5000, p
    for a, b in zip(forked, serial):
        assert a.read_bytes() == b.read_bytes(), a.suffix
    assert b"CreationDate" not in forked[1].read_bytes() and "<dc:date>" not in forked[2].read_text()


def test_a_failing_child_is_replaced_by_saving_here(tmp_path, monkeypatch):
    parent = os.getpid()
    real = style._savefig
    calls = []

    def flaky(fig, path):
        if os.getpid() != parent:
            raise RuntimeError("child failure")
        calls.append(path.suffix)
        real(fig, path)

    monkeypatch.setattr(style, "_savefig", flaky)
    paths = style.save_figure(_figure(), tmp_path, "fig")
    assert sorted(calls) == [".pdf", ".png", ".svg"]  # the child failed; its PDF written here
    assert all(p.stat().st_size > 5000 for p in paths)


def test_layout_engine_is_restored(tmp_path):
    fig = _figure()
    engine = fig.get_layout_engine()
    style.save_figure(fig, tmp_path, "fig")
    assert fig.get_layout_engine() is engine
