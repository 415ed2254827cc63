"""``claims.html`` as a reader sees it: rendered by a real headless Chromium (Debian's ``chromium``), every
figure decoded and shown, nothing wider than the window (#31). Chromium is installed from Debian's
packages where it is missing (``chromium-headless-shell``, ~15 s, as the SLURM tests install SLURM); the
tests skip, with the reason, only where that cannot be done (not root, no apt-get, no package)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import debian  # tests/support/debian.py
import pytest
from typer.testing import CliRunner

from arctl.cli.main import app

BROWSERS = ("chromium-headless-shell", "chromium", "chromium-browser", "google-chrome")
PACKAGE = "chromium-headless-shell"  # Debian's headless-only build: 64 MB, no X server needed
# slow: outside tests/test_fresh_machine.py's namespace, where an install would land in a throw-away
# overlay of /usr/bin (as SLURM's tests, which install SLURM); one worker: the page is rendered once
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("claims-browser")]


def _which() -> str | None:
    return next((shutil.which(b) for b in BROWSERS if shutil.which(b)), None)


@pytest.fixture(scope="module")
def chromium() -> str:
    """A headless Chromium's path, installed from Debian's packages if none is here."""
    found = _which()
    if found is None:
        reason = debian.install([PACKAGE])
        found = _which()
        if found is None:
            pytest.skip(f"no Chromium here and {PACKAGE} cannot be installed: {reason or 'no binary after install'}")
    return found


# appended to a copy of the page: once everything has loaded, what the reader would see, as JSON
PROBE = """<script>
window.addEventListener("load", () => {
  const doc = document.documentElement;
  const images = [...document.images].map(i => ({alt: i.alt, shown: i.complete && i.naturalWidth > 0,
                                                 width: i.getBoundingClientRect().width}));
  const wide = [...document.querySelectorAll("body *")]
    .filter(e => e.getBoundingClientRect().right > doc.clientWidth + 1)
    .map(e => e.tagName + (e.id ? "#" + e.id : ""));
  const out = document.createElement("pre");
  out.id = "arctl-probe";
  out.textContent = JSON.stringify({images, wide, scrollWidth: doc.scrollWidth, clientWidth: doc.clientWidth});
  document.body.appendChild(out);
});
</script>"""


def _render(chromium: str, page: Path, width: int) -> dict:
    """What Chromium shows of ``page`` in a ``width``-pixel window (the probe's JSON)."""
    probed = page.with_name(page.stem + "-probed.html")
    probed.write_text(page.read_text(encoding="utf-8").replace("</body>", PROBE + "</body>"), encoding="utf-8")
    proc = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", f"--window-size={width},900",
                           "--virtual-time-budget=5000", "--dump-dom", probed.as_uri()],
                          capture_output=True, text=True, timeout=120)
    found = re.search(r'<pre id="arctl-probe">(.*?)</pre>', proc.stdout, re.S)
    assert found, proc.stdout[-2000:] + proc.stderr[-2000:]
    return json.loads(found.group(1).replace("&quot;", '"').replace("&amp;", "&").replace("&lt;", "<")
                      .replace("&gt;", ">"))


@pytest.fixture(scope="module")
def claims_html(workspace, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("claims-browser")
    res = CliRunner().invoke(app, ["report", "--claims", "priors", "ablations", "--scale", "tiny", "--workdir",
                                   str(workspace), "--out", str(out)])
    assert res.exit_code == 0, res.output
    return out / "claims.html"


EVIDENCE = Path(__file__).resolve().parents[2] / "docs" / "evidence" / "tiny-8seeds"  # committed runs (export.json)


@pytest.fixture(scope="module")
def evidence_html(tmp_path_factory) -> Path:
    """The page of the committed evidence (8 seeds, every arm: long run ids, 8-line seed tables), built
    from its runs with today's code."""
    out = tmp_path_factory.mktemp("evidence-browser")
    res = CliRunner().invoke(app, ["report", "--claims", "paper", "--scale", "tiny", "--workdir", str(EVIDENCE),
                                   "--out", str(out)])
    assert res.exit_code == 0, res.output
    return out / "claims.html"


@pytest.mark.parametrize("width", [800, 1280])
@pytest.mark.parametrize("page", ["claims_html", "evidence_html"])
def test_every_figure_is_shown_and_nothing_overflows(chromium, page, width, request):
    page = request.getfixturevalue(page)
    seen = _render(chromium, page, width)
    figures = page.read_text(encoding="utf-8").count("<img ")
    assert len(seen["images"]) == figures >= 2  # the claims' figures and the curves
    assert all(i["shown"] and 0 < i["width"] <= seen["clientWidth"] for i in seen["images"]), seen["images"]
    assert seen["wide"] == [] and seen["scrollWidth"] <= seen["clientWidth"], seen


def test_the_check_sees_a_broken_figure_and_an_overflow(chromium, claims_html, tmp_path):
    """The probe can fail: a figure whose data does not decode, and a table wider than the window."""
    page = claims_html.read_text(encoding="utf-8")
    broken = tmp_path / "claims.html"
    first_png = re.search(r'src="data:image/png;base64,[^"]+"', page).group(0)
    broken.write_text(page.replace(first_png, 'src="data:image/png;base64,AAAA"', 1)
                      .replace("</body>", '<table id="too-wide" style="width:3000px"><tr><td>x</td></tr></table></body>'),
                      encoding="utf-8")
    seen = _render(chromium, broken, 1280)
    assert [i["shown"] for i in seen["images"]].count(False) == 1
    assert "TABLE#too-wide" in seen["wide"] and seen["scrollWidth"] > seen["clientWidth"]
