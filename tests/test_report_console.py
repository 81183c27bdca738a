"""The end-of-run console summary (robustlab.report.console), on claim dicts of every kind as
the claims engine writes them: a header per study, a line per claim not reproduced, its
control beside it, the self-check line, a final tally; everything with verbose."""

from robustlab.report.console import console_text, study_header, tally_line
from robustlab.report.html import StudySection


def _claim(cid, verdict, kind="claim", **extra):
    c = {"id": cid, "kind": kind, "statement": f"statement of {cid}", "verdict": verdict, "effect": 0.5,
         "interval": [0.4, 0.6], "threshold": 0.0, "side": "above", "reason": "", "evidence": {"slope": 0.5},
         "excluded": [], "source": "lazy training, NeurIPS 2022, Thm 3.1"}
    c.update(extra)
    return c


CONTROL_FAILS = {"setting": "C0 = 1000", "verdict": "contradicted", "effect": -0.1, "interval": [-0.2, 0.0],
                 "why": "a non-lazy network has no such bound"}
CLAIMS = [
    _claim("rep", "reproduced", control=CONTROL_FAILS,
           excluded=[{"premise": "trained", "excluded": 2, "of": 20}]),
    _claim("con", "contradicted", effect=-0.3, interval=[-0.4, -0.2], control=CONTROL_FAILS),
    _claim("inc", "inconclusive", reason="the test does not discriminate: its control passes too",
           control={**CONTROL_FAILS, "verdict": "reproduced"}),
    _claim("na", "not applicable", effect=None, interval=None, reason="too few points remain (2 of 20; needs 3)",
           control=CONTROL_FAILS, excluded=[{"premise": "lazy", "excluded": 18, "of": 20}]),
    _claim("knob", "inconclusive", control=CONTROL_FAILS, reason="the verdict depends on C0",
           across={"C0": {"10": "reproduced", "20": "contradicted"}}),
    _claim("ball", "reproduced", kind="self-check"),
    _claim("mc", "reproduced", kind="self-check"),
    _claim("spectrum", "inconclusive", kind="exploratory", reason="an open question"),
    _claim("plugin", "reproduced"),  # a plugin's claim without a control
]


def _section(name="lazy-attack", claims=CLAIMS, **kw):
    return StudySection(name, "t", "lazy training, NeurIPS 2022", "", {"n_points": 20}, claims, [], kw.pop("failures", []),
                        kw.pop("problems", []), 0)


def test_header_counts_only_paper_claims_with_self_checks_and_controls_apart():
    line = study_header(_section(), 10.94)
    assert line.startswith("lazy-attack  2/6 reproduced  10.9 s")
    assert "self-checks: 2/2 hold" in line and "controls 4/5 fail" in line
    assert study_header(_section(claims=[_claim("a", "reproduced", control=CONTROL_FAILS)]), 3.0) == \
        "lazy-attack  1/1 reproduced  3.0 s  ·  controls 1/1 fail"


def test_one_line_per_claim_not_reproduced_with_a_short_reason():
    text = console_text([_section()], seconds={"lazy-attack": 10.9})
    lines = text.splitlines()
    assert not any(" rep " in f"{line} " and "✓" in line for line in lines)  # reproduced claims stay quiet
    flagged = [line for line in lines if line.startswith("  ")]
    assert len(flagged) == 4  # con, inc, na, knob: one line each (the exploratory reading is counted)
    con = next(line for line in lines if "✗ con" in line)
    assert "CONTRADICTED  -0.3 [-0.4, -0.2] > 0  —  control: C0 = 1000 → contradicted ✓" in con  # no reason: the control
    inc = next(line for line in lines if "? inc" in line)
    assert "INCONCLUSIVE  0.5 [0.4, 0.6] > 0  —  the test does not discriminate" in inc
    na = next(line for line in lines if "- na" in line)
    assert "NOT APPLICABLE  —  too few points remain" in na
    assert "excluded: lazy 18/20" not in text and "across C0" not in text  # behind -v
    assert "spectrum" not in text and "exploratory 0/1" in lines[0]  # counted in the header; -v shows it
    assert "? [exploratory] spectrum  INCONCLUSIVE" in console_text([_section()], verbose=True)
    assert lines[-1] == tally_line([_section()])
    assert lines[-1].startswith("6 claims: 2 reproduced, 1 contradicted, 2 inconclusive, 1 not applicable")
    assert "self-checks 2/2 hold" in lines[-1] and "1 exploratory" in lines[-1]
    assert all(len(line) <= 110 for line in lines)
    assert "Warning" not in text and "{" not in text  # no class names, no raw dictionaries
    verbose = console_text([_section()], verbose=True)
    assert "excluded: lazy 18/20" in verbose and "across C0: 10 reproduced, 20 contradicted" in verbose
    assert "control: C0 = 1000 → reproduced ✗" in verbose


def test_a_long_reason_is_clipped_to_one_line_and_seeds_needed_is_short():
    long = _claim("long", "contradicted", reason="word " * 80)
    (line,) = console_text([_section(claims=[long])]).splitlines()[1:2]
    assert len(line) == 110 and line.endswith("…")
    need = _claim("need", "inconclusive", seeds=3, seeds_needed=12, more_seeds=9, reason="straddles")
    assert "—  about 12 seeds (9 more) would decide it" in console_text([_section(claims=[need])])


def test_verbose_shows_every_claim_its_statement_and_evidence():
    text = console_text([_section()], verbose=True)
    assert "✓ rep  reproduced" in text and "excluded: trained 2/20" in text
    assert "» statement of rep" in text and "slope = 0.5" in text
    assert "no control: cannot fail-check" in text  # the plugin claim without a control


def test_a_broken_self_check_and_failed_points_show():
    sec = _section(claims=[_claim("ball", "contradicted", kind="self-check")], failures=[{"key": "x"}],
                   problems=["the study crashed: boom\ntraceback"])
    text = console_text([sec])
    assert "self-checks: 0/1 hold (not holding: ball)" in text and "1 points failed" in text
    assert "  ! the study crashed: boom" in text and "traceback" not in text
    assert "✗ [self-check] ball  CONTRADICTED" in text


def test_a_control_that_is_not_applicable_is_not_counted_as_failing():
    """A control that could not be decided shows '?', not '✓': the test's power to fail is unshown."""
    na_ctl = {**CONTROL_FAILS, "verdict": "not applicable", "effect": None, "interval": None}
    sec = _section(claims=[_claim("a", "inconclusive", control=na_ctl), _claim("b", "reproduced", control=CONTROL_FAILS)])
    assert "controls 1/2 fail (1 not applicable)" in study_header(sec)
    assert "control: C0 = 1000 → not applicable ?" in console_text([sec], verbose=True)


def test_the_across_line_is_shown_with_verbose_only():
    spelled = _claim("knob", "inconclusive", control=CONTROL_FAILS,
                     reason="the verdict depends on C0, which the paper does not fix: 10 → reproduced, 20 → contradicted",
                     across={"C0": {"10": "reproduced", "20": "contradicted"}})
    text = console_text([_section(claims=[spelled])])
    assert "the verdict depends on C0" in text and "across C0" not in text
    assert "across C0: 10 reproduced, 20 contradicted" in console_text([_section(claims=[spelled])], verbose=True)
