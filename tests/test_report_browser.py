"""The report as a reader sees it: opened in headless Chromium (Debian's ``chromium``).

The check runs on a copy of the report, beside it (its figures are files linked by relative
paths), with a probe script added (the report itself carries no script): after the page's
load event the probe records, for every image, whether it decoded (``complete`` and
``naturalWidth > 0``), the verdict table's rows and where the table starts; Chromium's
``--dump-dom`` hands that back. Two screenshots are saved in the run directory: the first
screen as a reader opens it (``report-first-screen.png``, 1280×800: the verdict table) and the
full page (``report-screenshot.png``); when ``ROBUSTLAB_ARTIFACTS`` names a directory, both are
copied there with the report, for CI to keep.

Without chromium the tests skip, except under CI (``CI=true``), where they fail.
"""

import dataclasses
import html as htmllib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import types
from pathlib import Path

import pytest

from robustlab import records
from robustlab.studies import REGISTRY, REPRODUCE_ORDER
from robustlab.studies.base import Claim
from robustlab.studies.reproduce import reproduce
from robustlab.studies.smoke import STUDY as SMOKE
from robustlab.sweep.runner import SweepOptions

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-extensions",
         "--hide-scrollbars", "--mute-audio"]
WIDTH = 1280
MAX_HEIGHT = 16000  # software compositing stays reliable below this

PROBE = """<script id="robustlab-test-probe">
window.addEventListener('load', function () {
  var imgs = Array.prototype.slice.call(document.images);
  var rows = Array.prototype.slice.call(document.querySelectorAll('#claims tbody tr.claim'));
  var table = document.getElementById('claims');
  var result = {
    images: imgs.map(function (i) { return {alt: i.alt, complete: i.complete, w: i.naturalWidth, h: i.naturalHeight}; }),
    claims_table: !!table,
    table_top: table ? Math.round(table.getBoundingClientRect().top) : null,
    claim_rows: rows.map(function (r) { return r.querySelector('.badge').textContent; }),
    height: Math.ceil(document.documentElement.scrollHeight)
  };
  var pre = document.createElement('pre');
  pre.id = 'robustlab-probe-result';
  pre.textContent = JSON.stringify(result);
  document.body.appendChild(pre);
});
</script>"""


def _in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


def chromium_exe() -> str:
    for name in (os.environ.get("CHROMIUM"), "chromium", "chromium-browser", "google-chrome"):
        if name and shutil.which(name):
            return shutil.which(name)
    if _in_ci():
        pytest.fail("chromium is not installed, and CI must run the report's browser test "
                    "(apt-get install chromium)")
    pytest.skip("chromium is not installed (apt-get install chromium); CI runs this test")


def _chromium(exe: str, *args: str) -> subprocess.CompletedProcess:
    with tempfile.TemporaryDirectory(prefix="robustlab-chromium-") as profile:
        return subprocess.run([exe, *FLAGS, f"--user-data-dir={profile}", *args],
                              capture_output=True, text=True, timeout=180)


def probe(exe: str, report: Path, work: Path) -> dict:
    """Load a probed copy of ``report`` and return what the probe saw."""
    text = report.read_text(encoding="utf-8")
    assert "<script" not in text, "the report itself must not carry scripts"
    copy = report.parent / f"{report.stem}-probe.html"  # beside it: figures are relative links
    copy.write_text(text.replace("</body>", PROBE + "</body>", 1), encoding="utf-8")
    try:
        r = _chromium(exe, "--virtual-time-budget=15000", "--dump-dom", copy.as_uri())
    finally:
        copy.unlink(missing_ok=True)
    m = re.search(r'<pre id="robustlab-probe-result">(.*?)</pre>', r.stdout, re.S)
    assert m, f"chromium returned no probe result (rc={r.returncode}): {r.stderr[-3000:]}"
    return json.loads(htmllib.unescape(m.group(1)))


FIRST_SCREEN = 800  # the height of a laptop's browser window


def screenshot(exe: str, report: Path, height: int, name: str = "report-screenshot.png") -> Path:
    png = report.parent / name
    png.unlink(missing_ok=True)
    h = max(600, min(height, MAX_HEIGHT))
    r = _chromium(exe, f"--window-size={WIDTH},{h}", f"--screenshot={png}", report.as_uri())
    assert png.is_file(), f"no screenshot (rc={r.returncode}): {r.stderr[-3000:]}"
    artifacts = os.environ.get("ROBUSTLAB_ARTIFACTS")
    if artifacts:
        dest = Path(artifacts) / report.parent.name
        dest.mkdir(parents=True, exist_ok=True)
        shutil.copy2(png, dest / png.name)
        shutil.copy2(report, dest / report.name)
    return png


def check_report_in_browser(report: Path, work: Path, *, n_claims: int) -> dict:
    """Every image loads, the claim table has ``n_claims`` rows; saves and checks a screenshot."""
    exe = chromium_exe()
    seen = probe(exe, report, work)
    assert seen["claims_table"], "no claim table"
    assert len(seen["claim_rows"]) == n_claims and set(seen["claim_rows"]) <= {"REPRODUCED", "CONTRADICTED", "INCONCLUSIVE", "NOT APPLICABLE"}
    assert seen["images"], "no images in the report"
    broken = [i["alt"] for i in seen["images"] if not (i["complete"] and i["w"] > 0 and i["h"] > 0)]
    assert not broken, f"images that did not load: {broken}"
    assert seen["table_top"] is not None and seen["table_top"] < 200, "the verdict table is not on the first screen"
    first = screenshot(exe, report, FIRST_SCREEN, "report-first-screen.png")
    png = screenshot(exe, report, seen["height"])
    from PIL import Image

    with Image.open(first) as im:
        assert im.size == (WIDTH, FIRST_SCREEN)
    with Image.open(png) as im:
        assert im.size[0] == WIDTH and im.size[1] >= min(seen["height"], MAX_HEIGHT) - 2
        gray = im.convert("L")
        lo, hi = gray.getextrema()
        assert hi - lo > 100, "the screenshot is blank"
    return seen


def _register(monkeypatch, study):
    mod = types.ModuleType(f"robustlab_browser_study_{study.name.replace('-', '_')}")
    mod.STUDY = study
    monkeypatch.setitem(sys.modules, mod.__name__, mod)
    monkeypatch.setitem(REGISTRY, study.name, mod.__name__)


def test_report_opens_in_chromium_images_load_claims_present_screenshot(tmp_path, monkeypatch):
    def failing(df, ctx):
        return [Claim("impossible", "test accuracy is exactly 1", False, {"test_acc_mean": 0.9}, "test")]

    _register(monkeypatch, dataclasses.replace(SMOKE, name="smoke-failing", title="Smoke with a failing claim",
                                               claims=failing))
    run = tmp_path / "run"
    reproduce(run, preset="quick", options=SweepOptions(quiet=True), studies=["smoke", "smoke-failing"])
    report = run / "report.html"
    seen = check_report_in_browser(report, tmp_path, n_claims=3)
    assert seen["claim_rows"] == ["REPRODUCED", "REPRODUCED", "CONTRADICTED"]
    assert len(seen["images"]) == 2
    assert (run / "report-screenshot.png").is_file() and (run / "report-first-screen.png").is_file()
    assert "base64" not in report.read_text()  # figures are stored once, as files

    # the check can fail: a copy whose one figure file is corrupted is caught
    bad = tmp_path / "bad"
    shutil.copytree(run, bad)
    fig = next((bad / "smoke-failing" / "figures").glob("*.png"))
    fig.write_bytes(b"\0" * 64)
    seen_bad = probe(chromium_exe(), bad / "report.html", tmp_path)
    assert [i["w"] for i in seen_bad["images"]].count(0) == 1


@pytest.mark.slow
def test_reproduce_quick_end_to_end(tmp_path):
    """The main job as a user runs it: every study, the quick preset, on 2 CPU cores."""
    out = tmp_path / "quick"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "robustlab.cli", "reproduce", "--preset", "quick", "--out", str(out)],
                       capture_output=True, text=True, timeout=1800, env=env)
    wall = time.perf_counter() - t0
    assert r.returncode == 0, r.stdout[-5000:] + r.stderr[-5000:]
    assert f"report: {(out / 'report.html').resolve()}" in r.stdout
    claims = {name: records.read_json(out / name / "claims.json") for name in REPRODUCE_ORDER}
    # at least the claims named in the study issues (6 for A, 6 over B's two commands, 4 for C)
    assert len(claims["feature-learning"]) >= 6
    assert len(claims["lazy-attack"]) + len(claims["lazy-adversarial"]) >= 6
    assert len(claims["width-depth-init"]) >= 4
    assert not any(c["id"] in ("study-crashed", "claims-error", "no-results") for cs in claims.values() for c in cs)
    n_claims = sum(map(len, claims.values()))
    for name in REPRODUCE_ORDER:
        assert list((out / name / "figures").glob("*.png")), f"{name} drew no figure"
    # the report can be rebuilt from the saved results with the same claim table
    table = r.stdout[: r.stdout.index("report: ")]
    rb = subprocess.run([sys.executable, "-m", "robustlab.cli", "report", str(out)], capture_output=True, text=True,
                        timeout=600, env=env)
    assert rb.returncode == 0, rb.stderr[-3000:]
    assert rb.stdout[: rb.stdout.index("report rebuilt:")] == table
    check_report_in_browser(out / "report.html", tmp_path, n_claims=n_claims)
    # Its speed is shown by benchmarks/bench_reproduce.py, not asserted here (a timed test flakes).
    print(f"reproduce --preset quick: {wall:.0f} s wall, {n_claims} claims")
