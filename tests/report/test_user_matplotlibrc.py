"""A user's matplotlib settings do not reach a report's figures (from a hunt of determinism: a paper repo's
``matplotlibrc`` with ``font.family: serif`` changed every figure's bytes, ``svg.fonttype: none`` wrote SVG text
elements, and ``text.usetex: True`` stopped every figure and ``--claims`` with a traceback). matplotlib reads its rc
files when it is imported: each setting is a fresh process."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

# a figure through `arctl report`'s path (a builder, save_figure) and a claims.html figure (curves_figure, its PNG)
SCRIPT = textwrap.dedent("""
    import base64, sys
    from pathlib import Path
    import matplotlib
    print("usetex", matplotlib.rcParams["text.usetex"])
    from arctl.report.claims_render import _png, curves_figure
    from arctl.report.render import render_figure
    out = Path(sys.argv[1])
    render_figure("tree_mask", out_dir=out, progress=False)
    fig = curves_figure({"grpo": {"budget": {0: {8: 0.2, 16: 0.3}}, "train": {0: {0: 0.1, 10: 0.2}}}})
    (out / "curves.png").write_bytes(base64.b64decode(_png(fig)))
""")
USER_RC = "font.family: serif\nsvg.fonttype: none\ntext.usetex: True\nsavefig.dpi: 50\nfigure.dpi: 60\n"


def _draw(folder: Path, out: Path, env: dict) -> str:
    folder.mkdir(parents=True, exist_ok=True)
    res = subprocess.run([sys.executable, "-c", SCRIPT, str(out)], cwd=folder, env=env, capture_output=True,
                         text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    return res.stdout


def test_a_users_matplotlibrc_changes_no_figure_byte(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("MATPLOTLIBRC", "MPLBACKEND")}
    env["MPLCONFIGDIR"] = str(tmp_path / "mplconfig")  # no ~/.config/matplotlib of whoever runs the tests
    said = _draw(tmp_path / "plain", tmp_path / "plain-out", env)
    assert "usetex False" in said
    paper = tmp_path / "paper"  # a paper repo's own matplotlibrc, and the user's $MATPLOTLIBRC
    paper.mkdir()
    (paper / "matplotlibrc").write_text(USER_RC)
    (tmp_path / "user.rc").write_text(USER_RC)
    said = _draw(paper, tmp_path / "paper-out", {**env, "MATPLOTLIBRC": str(tmp_path / "user.rc")})
    assert "usetex True" in said  # the settings were read: a figure drawn with them would differ or fail
    names = sorted(p.name for p in (tmp_path / "plain-out").iterdir())
    assert {"tree_mask.png", "tree_mask.pdf", "tree_mask.svg", "curves.png"} <= set(names)
    assert sorted(p.name for p in (tmp_path / "paper-out").iterdir()) == names
    for name in names:
        assert (tmp_path / "paper-out" / name).read_bytes() == (tmp_path / "plain-out" / name).read_bytes(), name
    assert "<text" not in (tmp_path / "paper-out" / "tree_mask.svg").read_text()  # its text drawn as paths
