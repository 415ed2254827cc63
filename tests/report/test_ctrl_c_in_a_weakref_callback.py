"""A Ctrl-C while a figure is saved is never swallowed (seen once in CI: `arctl report --figure` went on after a Ctrl-C
to its process group). CPython drops an exception raised inside a weakref callback ("Exception ignored in ..."), and
matplotlib runs such callbacks while it saves; a Ctrl-C whose handler raised there was lost. The save holds it and
raises it when the save returns (arctl.report.style.saving). Deterministic: the stand-in save sends itself SIGINT
from inside a weakref callback."""

from __future__ import annotations

import gc
import io
import os
import signal
import threading
import weakref

import pytest

from arctl.report import style


@pytest.fixture
def sigint_raises():
    """Ctrl-C raises KeyboardInterrupt here, as in a terminal (a shell starts background jobs with it ignored)."""
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, before)


class _Object:
    pass


def _ctrl_c_in_a_weakref_callback() -> list[str]:
    """SIGINT raised (and its handler run) inside a weakref callback; returns what the save did after it."""
    after: list[str] = []
    obj = _Object()
    ref = weakref.ref(obj, lambda _ref: signal.raise_signal(signal.SIGINT))
    del obj  # the callback runs here; CPython drops what it raises
    gc.collect()
    assert ref() is None
    after.append("went on")
    return after


def _interrupting_savefig(fig) -> None:
    """``fig.savefig`` sends itself a Ctrl-C inside a weakref callback, then saves as matplotlib does."""
    real = fig.savefig

    def savefig(*args, **kwargs):
        _ctrl_c_in_a_weakref_callback()
        return real(*args, **kwargs)

    fig.savefig = savefig


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")  # the dropped KeyboardInterrupt
def test_the_stand_in_loses_a_ctrl_c_where_nothing_holds_it(sigint_raises):
    """What the fix is against: the KeyboardInterrupt raised in the callback does not come out of it."""
    assert _ctrl_c_in_a_weakref_callback() == ["went on"]


def test_a_ctrl_c_inside_a_weakref_callback_of_the_save_comes_out_when_it_returns(sigint_raises):
    saved = []

    def save(*args, **kwargs):
        saved.append(_ctrl_c_in_a_weakref_callback())

    with pytest.raises(KeyboardInterrupt):
        style.saving(save)
    assert saved == [["went on"]]  # held until the save returned, then raised
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # the previous handler is back


def test_a_figure_saved_with_such_a_save_is_interrupted_and_leaves_the_previous_files(sigint_raises, tmp_path,
                                                                                     monkeypatch):
    """Through the one place figures are saved (style._savefig), serially: the KeyboardInterrupt comes out of
    save_figure, and the folder holds the previous files (none of the new ones is put in place)."""
    monkeypatch.setenv("ARCTL_SERIAL_SAVE", "1")
    out = tmp_path / "out"
    out.mkdir()
    before = {f"fig.{fmt}": f"previous {fmt}\n".encode() for fmt in style.FORMATS}
    for name, data in before.items():
        (out / name).write_bytes(data)
    fig, axes = style.new_figure(1, 1)
    axes[0][0].plot([0, 1], [0, 1])
    _interrupting_savefig(fig)
    with pytest.raises(KeyboardInterrupt):
        style.save_figure(fig, out, "fig")
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_the_claims_pages_figures_hold_it_too(sigint_raises):
    from arctl.report import claims_render

    fig, axes = style.new_figure(1, 1)
    _interrupting_savefig(fig)
    with pytest.raises(KeyboardInterrupt):
        claims_render._png(fig)


def test_a_save_without_a_ctrl_c_returns_its_value_and_leaves_the_handler(sigint_raises):
    buf = io.BytesIO()
    assert style.saving(lambda b: b.write(b"x") and "done", buf) == "done" and buf.getvalue() == b"x"
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_outside_the_main_thread_the_save_sets_no_handler(sigint_raises):
    """Handlers can only be set in the main thread: elsewhere the save runs as it is."""
    seen: list = []

    def save():
        seen.append(signal.getsignal(signal.SIGINT))
        return os.getpid()

    worker = threading.Thread(target=lambda: seen.append(style.saving(save)))
    worker.start()
    worker.join()
    assert seen == [signal.default_int_handler, os.getpid()]
