"""The report's building blocks: power-law fits (float64, against closed forms and scipy),
plot helpers, evidence formatting, the plain-text claim table and the HTML report."""

import math
import re
import warnings

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from robustlab.report import html as rh
from robustlab.report.plots import (
    fit_power_law,
    label_panels,
    log_axes,
    loglog_fit,
    mean_band,
    plt,
    save,
    subplots,
    theory_line,
)

# ----------------------------------------------------------------------------------------
# power-law fits


def test_fit_power_law_exact_power_law_float64():
    x = np.array([4.0, 9.0, 16.0, 64.0, 256.0, 784.0])
    y = 3.0 * x ** -0.5
    fit = fit_power_law(x, y)
    assert fit.slope == pytest.approx(-0.5, abs=1e-12)
    assert math.exp(fit.intercept) == pytest.approx(3.0, rel=1e-12)
    assert fit.r2 == pytest.approx(1.0, abs=1e-12)
    lo, hi = fit.slope_ci
    assert hi - lo < 1e-9 and fit.contains(-0.5)
    np.testing.assert_allclose(fit.predict(x), y, rtol=1e-12)


def test_fit_power_law_interval_matches_scipy_linregress():
    rng = np.random.default_rng(0)
    x = np.repeat([5.0, 10.0, 20.0, 40.0, 80.0], 4)
    y = 2.0 * x ** 1.5 * np.exp(0.2 * rng.standard_normal(x.size))
    fit = fit_power_law(x, y, level=0.9)
    ref = stats.linregress(np.log(x), np.log(y))
    t = stats.t.ppf(0.95, x.size - 2)
    assert fit.slope == pytest.approx(ref.slope, rel=1e-12)
    assert fit.intercept == pytest.approx(ref.intercept, rel=1e-12)
    assert fit.slope_ci[0] == pytest.approx(ref.slope - t * ref.stderr, rel=1e-10)
    assert fit.slope_ci[1] == pytest.approx(ref.slope + t * ref.stderr, rel=1e-10)
    assert fit.r2 == pytest.approx(ref.rvalue ** 2, rel=1e-10)
    # the band of the line is narrowest at the mean of log x and contains the fitted line
    xs = np.geomspace(5, 80, 9)
    lo, hi = fit.band(xs)
    mid = fit.predict(xs)
    assert np.all(lo < mid) and np.all(mid < hi)
    width = np.log(hi) - np.log(lo)
    assert np.argmin(width) == np.argmin(np.abs(np.log(xs) - np.log(x).mean()))


def test_fit_power_law_interval_has_its_nominal_coverage():
    """Over 400 noisy data sets, the 95 % interval covers the true slope about 95 % of the time."""
    rng = np.random.default_rng(1)
    x = np.array([4.0, 8.0, 16.0, 32.0, 64.0, 128.0])
    hits = 0
    for _ in range(400):
        y = 0.7 * x ** -1.0 * np.exp(0.3 * rng.standard_normal(x.size))
        hits += fit_power_law(x, y).contains(-1.0)
    assert 0.91 <= hits / 400 <= 0.98  # binomial sd ~ 0.011 around 0.95


def test_fit_power_law_rejects_what_a_log_fit_would_silently_drop():
    x = np.array([1.0, 2.0, 4.0])
    for bad in ([1.0, 0.0, 2.0], [1.0, -1.0, 2.0], [1.0, np.nan, 2.0], [1.0, np.inf, 2.0]):
        with pytest.raises(ValueError, match="finite positive"):
            fit_power_law(x, bad)
    with pytest.raises(ValueError, match="two distinct"):
        fit_power_law([3.0, 3.0, 3.0], [1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="length"):
        fit_power_law([1.0, 2.0], [1.0])
    two = fit_power_law([1.0, 10.0], [1.0, 100.0])  # two points: exact slope, no interval
    assert two.slope == pytest.approx(2.0) and all(math.isnan(v) for v in two.slope_ci)
    assert not two.contains(2.0)


def test_fit_evidence_is_rendered_as_slope_with_interval():
    fit = fit_power_law([1.0, 2.0, 4.0, 8.0], [1.0, 0.71, 0.5, 0.36])
    ev = fit.evidence("grad_slope")
    assert set(ev) == {"grad_slope", "grad_slope_ci", "grad_slope_r2", "grad_slope_n"}
    pairs = dict(rh.format_evidence(ev))
    lo, hi = fit.slope_ci
    assert pairs["grad_slope"] == f"{fit.slope:.4g} [{lo:.4g}, {hi:.4g}]"
    assert "grad_slope_ci" not in pairs and pairs["grad_slope_n"] == "4"


# ----------------------------------------------------------------------------------------
# plot helpers


def _band_bounds(ax):
    verts = ax.collections[-1].get_paths()[0].vertices
    return verts[:, 1].min(), verts[:, 1].max()


@pytest.mark.parametrize("band,half", [("std", 1.0), ("sem", 1.0 / math.sqrt(3)),
                                       ("ci95", stats.t.ppf(0.975, 2) / math.sqrt(3)), ("minmax", 1.0)])
def test_mean_band_draws_mean_and_the_requested_band(band, half):
    df = pd.DataFrame({"x": [1, 1, 1, 2, 2, 2], "y": [1.0, 2.0, 3.0, 5.0, 6.0, 7.0]})
    fig, ax = plt.subplots()
    line = mean_band(ax, df, "x", "y", band=band, label="m")
    np.testing.assert_allclose(line.get_ydata(), [2.0, 6.0])
    lo, hi = _band_bounds(ax)
    assert lo == pytest.approx(2.0 - half) and hi == pytest.approx(6.0 + half)
    plt.close(fig)


def test_mean_band_ignores_missing_values_and_single_seed_has_no_band():
    df = pd.DataFrame({"x": [1, 1, 2], "y": [1.0, None, 4.0]})
    fig, ax = plt.subplots()
    line = mean_band(ax, df, "x", "y")
    np.testing.assert_allclose(line.get_ydata(), [1.0, 4.0])
    assert _band_bounds(ax) == (1.0, 4.0)
    plt.close(fig)


def test_theory_line_is_the_power_law_through_its_anchor_and_styles_override():
    fig, ax = plt.subplots()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a colour given twice would warn
        line = theory_line(ax, [16, 4, 64], -0.5, 16.0, 2.0, "theory", color="C1", ls=":")
    np.testing.assert_allclose(line.get_xdata(), [4, 16, 64])
    np.testing.assert_allclose(line.get_ydata(), [4.0, 2.0, 1.0])
    assert line.get_linestyle() == ":" and line.get_label() == "theory"
    plt.close(fig)


def test_loglog_fit_draws_fit_and_band_on_log_axes():
    fig, axes = subplots(1, 2)
    x = np.array([4, 16, 64, 256], dtype=float)
    fit = loglog_fit(axes[0], x, 0.5 * x ** 0.5 * np.array([1.02, 0.97, 1.01, 0.99]), label="grad")
    assert axes[0].get_xscale() == "log" and axes[0].get_yscale() == "log"
    assert "slope 0.50" in axes[0].get_lines()[-1].get_label()
    assert len(axes[0].collections) == 1  # the confidence band
    assert 0.45 < fit.slope < 0.55
    log_axes(axes[1], x=False)
    assert axes[1].get_xscale() == "linear" and axes[1].get_yscale() == "log"
    label_panels(axes)
    assert [t.get_text() for ax in axes for t in ax.texts] == ["(a)", "(b)"]
    plt.close(fig)


def test_save_is_atomic_and_byte_reproducible(tmp_path):
    def draw():
        fig, ax = subplots()
        ax.plot([1, 2, 3], [1, 4, 9], label="y")
        ax.set_xlabel("x (units)")
        ax.legend()
        return fig

    a, b = tmp_path / "figs" / "a.png", tmp_path / "figs" / "b.png"
    save(draw(), a)
    save(draw(), b)
    assert a.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert a.read_bytes() == b.read_bytes()
    assert sorted(p.name for p in a.parent.iterdir()) == ["a.png", "b.png"]  # no temp left
    assert plt.get_fignums() == []  # closed


# ----------------------------------------------------------------------------------------
# evidence, claim table, HTML


def test_format_evidence_numbers_lists_and_numpy_scalars():
    ev = {"acc": np.float64(0.912345), "n": np.int64(12), "ok": np.bool_(True), "nan": float("nan"),
          "eps_half": [0.1, 0.05, 0.025], "long": list(range(20)), "note": "text",
          "traceback": "Traceback (most recent call last): ..."}
    pairs = dict(rh.format_evidence(ev))
    assert pairs["acc"] == "0.9123" and pairs["n"] == "12" and pairs["ok"] == "yes"
    assert pairs["nan"] == "n/a" and pairs["eps_half"] == "[0.1, 0.05, 0.025]"
    assert pairs["long"] == "[0, 1, 2, …, 18, 19] (n=20)" and pairs["note"] == "text"
    assert "traceback" not in pairs  # shown folded under the study instead
    assert [k for k, _ in rh.format_evidence(ev)] == ["acc", "n", "ok", "nan", "eps_half", "long", "note"]


def _png(tmp_path, name="figures/f.png"):
    fig, ax = subplots()
    ax.plot([1, 2], [3, 4])
    save(fig, tmp_path / name)
    return name


def _section(tmp_path, *, failing=False, failures=(), problems=(), figures=None, name="alpha"):
    claims = [{"id": "a-ok", "statement": "x grows like d^{1/2}", "passed": True,
               "evidence": {"slope": 0.51, "slope_ci": [0.45, 0.57]}, "source": "lazy training, NeurIPS 2022, Thm 3.1"}]
    if failing:
        claims.append({"id": "a-bad", "statement": "<script>alert(1)</script> must hold", "passed": False,
                       "evidence": {"value": 0.2, "threshold": 0.9}, "source": ""})
    figs = figures if figures is not None else [{"file": _png(tmp_path), "title": "A figure",
                                                 "caption": "The line should rise."}]
    manifest = {"preset": "quick", "seeds": [0, 1, 2], "grid": [{"d": [4, 16], "seed": [0, 1, 2]}],
                "n_points": 6, "base_config": {"d": 4, "lr": 0.1, "seed": 0},
                "versions": {"python": "3.11", "torch": "2.13.0"},
                "code": {"git_commit": "0123456789abcdef", "dirty": True},
                "started": "t0", "finished": "t1", "device": "cpu", "backend": "local", "workers": 1,
                "sweep": {"seconds": 1.5}}
    return rh.StudySection(name=name, title=f"Study {name}", source="lazy training, NeurIPS 2022", summary="What it tests.",
                           manifest=manifest, claims=claims, figures=figs, failures=list(failures),
                           problems=list(problems), n_rows=10)


def _claim_rows(text):
    table = re.search(r"<table id='claims'>(.*?)</table>", text, re.S).group(1)
    return re.findall(r"<tr class='claim (pass|fail|inc|na)'>", table)


def test_report_all_pass_has_green_verdict_claim_table_and_figures_linked_once(tmp_path):
    """Figures are the PNG files beside the report, linked by a relative path (stored once:
    a combined report links into each study's figures/), never embedded."""
    sec = _section(tmp_path)
    text = rh.render_report([sec], root=tmp_path, title="T")
    assert "class='banner ok'" in text and "id='attention'" not in text
    assert _claim_rows(text) == ["pass"]
    assert "slope</span> = 0.51 [0.45, 0.57]" in text
    assert "lazy training, NeurIPS 2022, Thm 3.1" in text and "Figure 1.1. A figure." in text
    assert "base64" not in text
    srcs = re.findall(r'<img [^>]*src="([^"]+)"', text)
    assert srcs == ["figures/f.png"]
    img = plt.imread(tmp_path / srcs[0], format="png")
    assert img.shape[0] > 100 and img.shape[1] > 100
    sec.subdir = "alpha"  # seen from a reproduce directory: the study's own file, not a copy
    (tmp_path / "alpha" / "figures").mkdir(parents=True)
    (tmp_path / "figures" / "f.png").rename(tmp_path / "alpha" / "figures" / "f.png")
    assert re.findall(r'<img [^>]*src="([^"]+)"', rh.render_report([sec], root=tmp_path, title="T")) == \
        ["alpha/figures/f.png"]
    # self-contained: nothing fetched from elsewhere
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", text) and "<link" not in text
    # configuration, seeds, versions are in the report
    for s in ("0–2 (3 seeds)", "d ∈ {4, 16}", "0123456789ab + local changes", "torch 2.13.0"):
        assert s in text


def test_report_shows_failures_prominently_and_escapes_text(tmp_path):
    failure = {"params": {"d": 16, "lr": 0.1, "seed": 2}, "reason": "NumericalError: loss diverged",
               "traceback": "Traceback ...\nNumericalError"}
    sec = _section(tmp_path, failing=True, failures=[failure], problems=["figures could not be drawn: KeyError('x')"])
    text = rh.render_report([sec, _section(tmp_path, name="beta")], root=tmp_path, title="T")
    assert "class='banner bad'" in text and "1 CONTRADICTED" in text and "1 failed points" in text
    attention = re.search(r"<div class='attention' id='attention'>(.*?)</div>", text, re.S).group(1)
    assert "a-bad" in attention and "1 of 6 points" in attention and "figures could not be drawn" in attention
    assert _claim_rows(text) == ["pass", "fail", "pass"]
    assert "<script>alert(1)</script>" not in text and "&lt;script&gt;" in text
    assert "Failed points (1 of 6)" in text and "d=16, seed=2" in text and "loss diverged" in text
    assert "href='#study-alpha'" in text and "id='study-beta'" in text


def test_report_names_a_missing_figure_instead_of_skipping_it(tmp_path):
    sec = _section(tmp_path, figures=[{"file": "figures/nope.png", "title": "Lost", "caption": "c"}])
    text = rh.render_report([sec], root=tmp_path, title="T")
    assert "figures/nope.png is missing" in text and "<img" not in text


def test_write_report_is_atomic(tmp_path):
    path = tmp_path / "report.html"
    rh.write_report(path, [_section(tmp_path)], root=tmp_path, title="T", meta={"preset": "quick", "seconds": 3.0})
    text = path.read_text()
    assert text.startswith("<!doctype html>") and text.rstrip().endswith("</html>")
    assert "preset <b>quick</b>" in text and "wall time 3 s" in text
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_claim_table_text_lists_every_claim_with_result_evidence_and_statement(tmp_path):
    secs = [_section(tmp_path, failing=True, failures=[{"params": {}, "reason": "r"}]), _section(tmp_path, name="b")]
    text = rh.claim_table_text(secs)
    lines = text.splitlines()
    assert lines[0].split()[:3] == ["study", "claim", "verdict"]
    rows = [ln for ln in lines if re.match(r"^\S+\s+\S+\s+(REPRODUCED|CONTRADICTED)\s", ln)]
    assert [r.split()[:3] for r in rows] == [["alpha", "a-ok", "REPRODUCED"], ["alpha", "a-bad", "CONTRADICTED"],
                                             ["b", "a-ok", "REPRODUCED"]]
    assert "slope = 0.51 [0.45, 0.57]" in rows[0]
    assert "» x grows like d^{1/2}  [lazy training, NeurIPS 2022, Thm 3.1]" in text
    assert lines[-1] == "claims: 2 reproduced, 1 contradicted (of 3); failed points: 1"
    assert all(len(ln) <= 110 for ln in lines)


def test_nested_fits_keep_their_intervals_and_long_lists_fold_with_a_summary():
    fits = [{"m": 64, "slope": -0.39, "ci": [-0.47, -0.31], "r2": 0.88, "d_range": [25, 784]},
            {"m": 256, "slope": -0.45, "ci": [-0.52, -0.38], "r2": 0.9, "d_range": [25, 784]},
            {"m": 1024, "slope": -0.5, "ci": [-0.55, -0.45], "r2": 0.95, "d_range": [25, 784]}]
    ev = {"band": [-0.7, -0.3], "fits": fits}
    pairs = dict(rh.format_evidence(ev, limit=None))
    assert pairs["fits"].startswith("[{m=64, slope=-0.39 [-0.47, -0.31], r2=0.88, d_range=[25, 784]}, "
                                    "{m=256, slope=-0.45 [-0.52, -0.38], r2=0.9, d_range=[25, 784]}, ")
    short = dict(rh.format_evidence(ev, limit=60))["fits"]
    assert len(short) <= 60 and short.endswith("(3 items)")
    cell = rh._evidence_html(ev)
    assert "<span class='item'><span class='k'>band</span> = [-0.7, -0.3]</span>" in cell
    assert ("<summary><span class='k'>fits</span> (3 items): slope -0.39 [-0.47, -0.31], "
            "-0.45 [-0.52, -0.38], -0.5 [-0.55, -0.45]</summary>") in cell
    assert cell.count("<li>") == 3


def test_save_thins_crowded_minor_log_labels_but_keeps_explicit_formatters(tmp_path):
    from matplotlib import ticker

    fig, (a, b) = subplots(1, 2)
    for ax in (a, b):
        ax.plot([25, 784], [1, 2])
        ax.set_xscale("log")
    mine = ticker.NullFormatter()
    b.xaxis.set_minor_formatter(mine)
    save(fig, tmp_path / "f.png")
    fmt = a.xaxis.get_minor_formatter()
    fmt.set_locs()
    assert fmt(200.0) and fmt(500.0) and fmt(300.0) == "" and fmt(400.0) == ""
    assert b.xaxis.get_minor_formatter() is mine


def _verdict_claim(cid, verdict, **kw):
    return {"id": cid, "statement": f"{cid} holds", "verdict": verdict, "passed": verdict == "reproduced",
            "evidence": {}, "source": "", **kw}


FOUR = [
    _verdict_claim("c-rep", "reproduced", effect=0.41, interval=[0.33, 0.49], threshold=[0.3, 0.7], side="inside",
                   seeds=13),
    _verdict_claim("c-con", "contradicted", effect=-0.2, interval=[-0.3, -0.1], threshold=0.0, side="above",
                   seeds=5),
    _verdict_claim("c-inc", "inconclusive", effect=0.05, interval=[-0.02, 0.12], threshold=0.0, side="above",
                   seeds=3, seeds_needed=9, more_seeds=6),
    _verdict_claim("c-na", "not applicable", effect=0.5, interval=[0.4, 0.6], threshold=0.0, side="above",
                   seeds=3, conditions=[{"name": "lazy regime reached", "met": False, "detail": "max offset 1.3"},
                                        {"name": "networks trained", "met": True, "detail": ""}]),
]


def test_report_shows_the_four_verdict_states_distinctly(tmp_path):
    sec = _section(tmp_path)
    sec.claims = [dict(c) for c in FOUR]
    text = rh.render_report([sec], root=tmp_path, title="T")
    assert _claim_rows(text) == ["pass", "fail", "inc", "na"]
    for word, cls in (("REPRODUCED", "pass"), ("CONTRADICTED", "fail"), ("INCONCLUSIVE", "inc"),
                      ("NOT APPLICABLE", "na")):
        assert f"<span class='badge {cls}'>{word}</span>" in text
        assert f"<span class='badge {cls}'>1 {word}</span>" in text  # the banner counts each state
    assert "0.41 [0.33, 0.49] in [0.3, 0.7]" in text and "-0.2 [-0.3, -0.1] &gt; 0" in text
    attention = re.search(r"<div class='attention' id='attention'>(.*?)</div>", text, re.S).group(1)
    assert "c-rep" not in attention
    assert "about 9 seeds (6 more) would decide it" in attention and "this run has 3" in attention
    assert "condition &#x27;lazy regime reached&#x27; not met (max offset 1.3)" in attention
    assert "networks trained" not in attention
    # only inconclusive / not applicable: a warning banner, not a failure
    sec.claims = [dict(c) for c in FOUR if c["verdict"] != "contradicted"]
    assert "class='banner warn'" in rh.render_report([sec], root=tmp_path, title="T")


def test_claim_table_text_shows_verdict_effect_interval_and_what_is_missing(tmp_path):
    sec = _section(tmp_path)
    sec.claims = [dict(c) for c in FOUR]
    text = rh.claim_table_text([sec])
    rows = {ln.split()[1]: ln for ln in text.splitlines() if ln.startswith("alpha ")}
    assert re.search(r"c-rep\s+REPRODUCED\s+effect = 0\.41 \[0\.33, 0\.49\] in \[0\.3, 0\.7\]", rows["c-rep"])
    assert re.search(r"c-con\s+CONTRADICTED\s+effect = -0\.2 \[-0\.3, -0\.1\] > 0", rows["c-con"])
    flat = " ".join(text.split())  # across wrapped lines
    assert "INCONCLUSIVE" in rows["c-inc"] and "about 9 seeds (6 more)" in flat
    assert "NOT APPLICABLE" in rows["c-na"] and "condition 'lazy regime reached' not met" in flat
    assert text.splitlines()[-1] == ("claims: 1 reproduced, 1 contradicted, 1 inconclusive, 1 not applicable "
                                     "(of 4)")
    assert [c["id"] for c in rh.strict_failures(FOUR)] == ["c-con", "c-inc", "c-na"]  # all but reproduced


def test_old_claims_without_verdict_read_from_passed(tmp_path):
    """A claims.json written before verdicts existed holds only "passed"."""
    assert rh.verdict_of({"passed": True}) == "reproduced"
    assert rh.verdict_of({"passed": False}) == "contradicted"
    sec = _section(tmp_path, failing=True)  # claim dicts without "verdict"
    text = rh.render_report([sec], root=tmp_path, title="T")
    assert _claim_rows(text) == ["pass", "fail"] and "<span class='badge fail'>CONTRADICTED</span>" in text
    assert rh.claim_table_text([sec]).splitlines()[-1] == "claims: 1 reproduced, 1 contradicted (of 2)"
