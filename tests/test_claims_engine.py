"""The claims engine (robustlab.claims): kinds, controls, premises per point, knobs."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest

from robustlab import claims as cl
from robustlab import stats
from robustlab.config import Config, UserError
from robustlab.studies.base import Claim, Preset, Study


def _rep(effect=1.0) -> stats.Verdict:
    return stats.decide(stats.mean_estimate([effect, effect + 0.1, effect - 0.1]), threshold=0.0)


def _contra() -> stats.Verdict:
    return stats.decide(stats.mean_estimate([-1.0, -1.1, -0.9]), threshold=0.0)


def _ruled(v: stats.Verdict, setting: str = "c") -> cl.Control:
    """A control as :func:`cl.judge` makes it (decided by the claim's rule)."""
    return cl.Control(setting, v, why="...", rule="planted.rule")


def test_a_claim_whose_control_passes_too_is_inconclusive():
    ctl = _ruled(_rep(), "C0 = 1000")
    c = Claim("x", "s", _rep(), {}, kind=cl.CLAIM, control=ctl)
    assert c.decision.verdict == stats.INCONCLUSIVE
    assert cl.NOT_DISCRIMINATING in c.decision.reason
    d = c.to_dict()
    assert d["verdict_before_control"] == stats.REPRODUCED
    assert d["control"]["verdict"] == stats.REPRODUCED and d["control"]["setting"] == "C0 = 1000"


def test_a_claim_whose_control_fails_keeps_its_verdict():
    ctl = _ruled(_contra(), "C0 = 1000")
    c = Claim("x", "s", _rep(), {}, control=ctl)
    assert c.decision.verdict == stats.REPRODUCED
    assert c.to_dict()["control"]["verdict"] == stats.CONTRADICTED
    assert "fail_check" not in c.to_dict()


def test_a_claim_without_control_is_marked_and_a_self_check_is_not_downgraded():
    c = Claim("x", "s", _rep(), {})
    assert c.to_dict()["fail_check"] == cl.NO_CONTROL
    assert c.decision.verdict == stats.INCONCLUSIVE and c.decision.reason.startswith("no working control: none")
    # a self-check's "control" does not apply the discrimination rule (it is an invariant)
    s = Claim("y", "s", _rep(), {}, kind=cl.SELF_CHECK, control=cl.Control("c", _rep()))
    assert s.decision.verdict == stats.REPRODUCED
    # an exploratory reading with a control obeys the rule as a claim does
    e = Claim("e", "s", _rep(), {}, kind=cl.EXPLORATORY, control=_ruled(_rep()))
    assert e.decision.verdict == stats.INCONCLUSIVE and e.verdict_before_control == stats.REPRODUCED
    f = Claim("f", "s", _rep(), {}, kind=cl.EXPLORATORY)  # an exploratory reading needs no control
    assert "fail_check" not in f.to_dict() and f.decision.verdict == stats.REPRODUCED
    with pytest.raises(ValueError, match="kind"):
        Claim("z", "s", _rep(), {}, kind="theorem")


def test_an_under_trained_point_is_excluded_not_turning_the_claim_na():
    rng = np.random.default_rng(0)
    df = pd.DataFrame({"point": [f"p{i}" for i in range(10)], "clean_acc": [0.97] * 9 + [0.55],
                       "effect": rng.normal(1.0, 0.1, 10)})
    df.loc[9, "effect"] = -50.0  # the untrained point would drag the mean below zero
    trained = cl.premise_at_least("trained", "clean_acc", 0.9, "clean test accuracy")
    kept, exc = cl.apply_premises(df, [trained])
    assert len(kept) == 9 and exc[0].to_dict() == {"premise": "trained", "excluded": 1, "of": 10,
                                                   "detail": "clean test accuracy >= 0.9"}
    assert cl.too_few(kept, 5, exc) is None
    v = stats.decide(stats.mean_estimate(kept["effect"]), threshold=0.0)
    assert v.verdict == stats.REPRODUCED
    # with every point included the same rule would not reproduce
    assert stats.decide(stats.mean_estimate(df["effect"]), threshold=0.0).verdict != stats.REPRODUCED
    na = cl.too_few(kept, 10, exc)
    assert na is not None and na.verdict == stats.NOT_APPLICABLE and "trained: 1 of 10" in na.reason
    # need=None: no part of the test could be formed from what is left; it says how many are left
    none = cl.too_few(kept, None, exc, what="networks")
    assert none.verdict == stats.NOT_APPLICABLE
    assert none.reason.startswith("only 9 networks meet the premises, too few to form any part of the test")


def test_premises_count_units_and_drop_whole_units():
    df = pd.DataFrame({"d": [25, 25, 49, 49], "seed": [0, 0, 0, 1], "acc": [0.95, 0.5, 0.99, 0.98]})
    kept, exc = cl.apply_premises(df, [cl.premise_at_least("trained", "acc", 0.9)], unit=("d", "seed"))
    assert exc[0].excluded == 1 and exc[0].of == 3
    assert list(kept["d"]) == [49, 49]
    # a missing column fails every row
    kept, exc = cl.apply_premises(df, [cl.premise_at_most("lazy", "kappa", 0.1)])
    assert kept.empty and exc[0].excluded == 4


def test_across_agreement_and_a_contradicted_value_contradicts_a_universal_claim():
    v, rec = cl.across("C0", {10: _rep(), 20: _rep(2.0), 40: stats.not_applicable("x")})
    assert v.verdict == stats.REPRODUCED and rec == {"C0": {"10": "reproduced", "20": "reproduced",
                                                             "40": "not applicable"}}
    assert v.effect == pytest.approx(_rep().effect)  # the value that clears its threshold least
    contra = stats.decide(stats.mean_estimate([-0.3, -0.35, -0.25]), threshold=0.0)
    v, rec = cl.across("C0", {5: _rep(), 20: _contra(), 40: contra})
    assert v.verdict == stats.CONTRADICTED and rec["C0"]["20"] == "contradicted"
    # the effect, interval and reason printed are those of the value that decided (C0 = 20 here:
    # the clearest contradiction), never the first value's
    assert v.effect == pytest.approx(_contra().effect) and v.interval == _contra().interval
    assert v.reason.startswith("contradicted at C0 = 20") and v.seeds_needed is None
    # one undecided value and no contradiction: inconclusive, with that value's numbers
    wide = stats.decide(stats.mean_estimate([1.0, -1.0, 0.5]), threshold=0.0)
    v, _ = cl.across("C0", {5: _rep(), 10: wide})
    assert v.verdict == stats.INCONCLUSIVE and v.reason.startswith("undecided at C0 = 10")
    assert v.effect == pytest.approx(wide.effect)


def test_across_excludes_values_outside_the_regime_and_names_them():
    v, rec = cl.across("C0", {5: _rep(), 20: _contra(), 40: _contra()},
                       outside={20: "lazy: gradient gain <= 1.5 fails for 7 of 10 networks",
                                40: "lazy: 10 of 10 fail"})
    assert v.verdict == stats.REPRODUCED  # only C0 = 5 is in the theorem's regime
    assert rec["C0"]["20"].startswith("excluded: lazy") and rec["C0"]["40"] == "excluded: lazy: 10 of 10 fail"
    assert "20 → excluded" in v.reason
    v, rec = cl.across("C0", {20: _rep()}, outside={20: "not lazy"})
    assert v.verdict == stats.NOT_APPLICABLE and "C0 = 20: not lazy" in v.reason
    with pytest.raises(ValueError, match="quantifier"):
        cl.across("C0", {5: _rep()}, quantifier="most")


def test_across_with_an_existential_quantifier():
    v, _ = cl.across("width", {8: _contra(), 16: _rep(), 32: _contra()}, quantifier=cl.SOME)
    assert v.verdict == stats.REPRODUCED and v.reason.startswith("reproduced at width = 16")
    v, _ = cl.across("width", {8: _contra(), 16: _contra()}, quantifier=cl.SOME)
    assert v.verdict == stats.CONTRADICTED


def _planted(effect: float, n: int = 8, seed: int = 0, sd: float = 0.1) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"seed": np.arange(n), "gain": effect + rng.normal(0, sd, n)})


def _rule(df: pd.DataFrame) -> stats.Verdict:
    """A planted claim: the mean gain is above 0."""
    return stats.decide(stats.mean_estimate(df["gain"]), threshold=0.0)


def test_judge_runs_the_claims_rule_on_the_controls_rows():
    spec = cl.ClaimSpec("c", control=cl.ControlSpec({"C0": 1000.0}, "no gain without the mechanism"))
    # the effect in the claim's runs, absent in the control's: reproduced with a working control
    v, ctl = cl.judge(spec, _rule, _planted(1.0), _planted(-1.0, seed=1))
    assert ctl.rule.endswith("_rule") and ctl.working
    assert Claim("c", "s", v, {}, control=ctl).decision.verdict == stats.REPRODUCED
    # the control's setting with the effect planted: the control can pass (so it can fail the claim)
    v, ctl = cl.judge(spec, _rule, _planted(1.0), _planted(1.0, seed=1))
    assert ctl.verdict.verdict == stats.REPRODUCED
    assert Claim("c", "s", v, {}, control=ctl).decision.verdict == stats.INCONCLUSIVE
    # without the effect in the claim's runs: not reproduced, whatever the control says
    v, ctl = cl.judge(spec, _rule, _planted(-1.0), _planted(-1.0, seed=1))
    assert Claim("c", "s", v, {}, control=ctl).decision.verdict == stats.CONTRADICTED
    # the claim's own rows are no control
    rows = _planted(1.0)
    v, ctl = cl.judge(spec, _rule, rows, rows.copy())
    assert ctl.verdict.verdict == stats.NOT_APPLICABLE and ctl.verdict.reason == cl.OWN_RUNS
    # no control rows: the control is not applicable
    _, ctl = cl.judge(spec, _rule, rows, None)
    assert ctl.verdict.verdict == stats.NOT_APPLICABLE


def test_a_control_that_is_not_applicable_undecided_or_hand_made_caps_the_claim():
    spec = cl.ClaimSpec("c", control=cl.ControlSpec({"C0": 1000.0}, "..."))
    for control_rows, says in ((None, "no runs in the control's setting"),
                               (_planted(0.0, n=3, sd=1.0, seed=3), "reads inconclusive")):
        v, ctl = cl.judge(spec, _rule, _planted(1.0), control_rows)
        c = Claim("c", "s", v, {}, control=ctl)
        assert c.decision.verdict == stats.INCONCLUSIVE and c.verdict_before_control == stats.REPRODUCED
        assert c.decision.reason.startswith(cl.NO_WORKING_CONTROL) and says in c.decision.reason
        assert c.decision.seeds_needed is None  # more seeds would not give it a control
    # a control whose verdict the study computed by itself (not the claim's rule) does not count
    hand = cl.control_from(spec.control, _contra())
    c = Claim("c", "s", _rep(), {}, control=hand)
    assert c.decision.verdict == stats.INCONCLUSIVE and "not decided by the claim's own rule" in c.decision.reason
    assert c.to_dict()["control"]["working"] is False


def test_a_falling_quantity_never_reads_as_a_growing_exponent():
    rng = np.random.default_rng(1)
    d = np.repeat([64.0, 128, 256, 512, 784], 8)
    # one noise draw (seed 0's draw happens to fail the exact model's lack-of-fit test at
    # p = 0.002, a rare draw; the rate over many draws is checked below)
    noise = np.exp(rng.normal(0, 0.02, d.size))
    # the theorem's own shape (0.5·d + 4): the exponent 1 is found, and the lack-of-fit test
    # rejects the true model at about its 1 % level (over 60 noise draws)
    draws = [stats.power_exponent(d, (0.5 * d + 4) * np.exp(np.random.default_rng(s).normal(0, 0.02, d.size)))
             for s in range(60)]
    assert abs(np.median([e.value for e in draws]) - 1.0) < 0.02
    assert sum(e.misfit is not None for e in draws) <= 3
    assert np.mean([e.low <= 1.0 <= e.high for e in draws]) >= 0.85
    falling = stats.power_exponent(d, (500 - 0.5 * d) * noise)
    assert falling.value < 0 and falling.high < 0  # the planted case read +0.56 before
    band = stats.decide(stats.power_exponent(d, (500 - 0.5 * d) * noise), threshold=(0.35, 0.65), side="inside")
    assert band.verdict == stats.CONTRADICTED
    # the rich control's falling gradient (2.14 -> 1.24 over d = 64 ... 784) reads negative
    q = np.interp(d, [64, 784], [2.14 ** 2, 1.24 ** 2]) * noise
    assert stats.power_exponent(d, q).value < 0
    # a flat quantity has no exponent to read: the interval spans both signs
    flat = stats.power_exponent(d, 3.0 * noise)
    assert flat.low < 0 < flat.high
    # a curved quantity the model cannot describe: lack of fit, and decide refuses to decide
    curved = stats.power_exponent(d, np.where(d < 300, 0.5 * d, 300.0 - 0.2 * d) * noise)
    assert curved.misfit is not None and "lack of fit" in curved.misfit
    v = stats.decide(curved, threshold=(0.7, 1.3), side="inside")
    assert v.verdict == stats.INCONCLUSIVE and v.seeds_needed is None and "does not describe" in v.reason


def test_a_peak_whose_premises_remove_one_side_is_not_applicable_with_the_premise_named():
    widths = [1, 2, 4, 8, 16, 32, 64]
    df = pd.DataFrame({"width": np.repeat(widths, 3), "seed": np.tile([0, 1, 2], len(widths))})
    df["classes_ok"] = df["width"] >= 10
    df["trained"] = True
    prem = [cl.premise_true("width>=classes", "classes_ok"), cl.premise_true("trained", "trained")]
    v = cl.coverage(df, prem, "width", shape="peak")
    assert v.verdict == stats.NOT_APPLICABLE
    assert v.reason.startswith("undecidable as designed: premise 'width>=classes' removes width < 16")
    assert cl.coverage(df, prem[1:], "width", shape="peak") is None
    # a slope needs 3 distinct values spanning the declared factor
    v = cl.coverage(df[df["width"] >= 32], prem[1:], "width", shape="slope", min_distinct=3)
    assert v.verdict == stats.NOT_APPLICABLE and "2 distinct width values remain" in v.reason
    v = cl.coverage(df[df["width"] <= 4], prem[1:], "width", shape="slope", min_span=8.0)
    assert v.verdict == stats.NOT_APPLICABLE and "span a factor 4" in v.reason


@dataclasses.dataclass(frozen=True)
class _Cfg(Config):
    C0: float = 10.0
    seed: int = 0


def _study(specs, premises=None):
    return Study(name="planted", title="t", source="s", summary="", config=_Cfg,
                 presets={"quick": Preset(grid=({"C0": [10.0, 1000.0]},))},
                 run_points=lambda cfgs, dev: [], claims=lambda df, ctx: [], figures=lambda df, ctx: [],
                 claim_specs=specs, premises=premises or {})


def test_a_complement_control_is_refused_at_load():
    with pytest.raises(UserError, match=r"control 'bands swapped' names no population of runs"):
        _study([cl.ClaimSpec("c", control=cl.ControlSpec("bands swapped", "each judged by the other's rule"))])
    ok = Study(name="planted", title="t", source="s", summary="", config=_Cfg,
               presets={"quick": Preset(grid=({"C0": [10.0, 1000.0]},))},
               run_points=lambda cfgs, dev: [], claims=lambda df, ctx: [], figures=lambda df, ctx: [],
               claim_specs=[cl.ClaimSpec("c", control=cl.ControlSpec("at-init", "no training has acted"))],
               populations={"at-init": "the same networks before any training step"})
    assert ok.spec("c").control.label() == "at-init"


def test_bad_declarations_fail_when_the_study_is_loaded():
    ok = _study([cl.ClaimSpec("c", premises=("trained",), control=cl.ControlSpec({"C0": 1000}, "non-lazy"))],
                {"trained": cl.premise_at_least("trained", "acc", 0.9)})
    assert ok.spec("c").control.label() == "C0 = 1000"
    with pytest.raises(UserError, match=r"study 'planted', claim 'c': premise 'traned' is unknown"):
        _study([cl.ClaimSpec("c", premises=("traned",))], {"trained": cl.premise_at_least("trained", "a", 1)})
    with pytest.raises(UserError, match=r"claim 'c': control setting C0=5 is in no preset's grid"):
        _study([cl.ClaimSpec("c", control=cl.ControlSpec({"C0": 5}, "x"))])
    with pytest.raises(UserError, match=r"control setting width=5: no such field"):
        _study([cl.ClaimSpec("c", control=cl.ControlSpec({"width": 5}, "x"))])
    with pytest.raises(UserError, match="kind="):
        _study([cl.ClaimSpec("c", kind="lemma")])


def test_only_paper_claims_count_and_a_broken_self_check_fails():
    from robustlab.report import html

    claims = [Claim("a", "s", _rep(), {}, control=_ruled(_contra())).to_dict(),
              Claim("b", "s", _rep(), {}, kind=cl.SELF_CHECK).to_dict(),
              Claim("c", "s", _contra(), {}, kind=cl.SELF_CHECK).to_dict(),
              Claim("d", "s", _contra(), {}, kind=cl.EXPLORATORY).to_dict()]
    assert [c["id"] for c in html.paper_claims(claims)] == ["a"]
    assert [c["id"] for c in html.self_check_failures(claims)] == ["c"]
    assert html.self_check_line(claims) == "self-checks: 1/2 hold (not holding: c)"
    undecided = Claim("e", "s", _rep(), {}, kind=cl.SELF_CHECK).to_dict() | {"verdict": "inconclusive"}
    assert html.self_check_line(claims + [undecided]) == "self-checks: 1/3 hold (not holding: c; undecided: e)"
    assert html.control_text(claims[0]) == "control: c → contradicted ✓"


def test_a_study_file_with_a_bad_declaration_is_refused_before_anything_runs(tmp_path, capsys):
    from robustlab.cli import main

    src = '''
from robustlab.claims import ClaimSpec, ControlSpec, premise_at_least
from robustlab.studies import Study, Preset
from robustlab.studies.smoke import SmokeConfig, run_points, claims, figures
STUDY = Study(name="bad-study", title="t", source="s", summary="", config=SmokeConfig,
              presets={"quick": Preset({}, ({"lr": [0.5]},), n_seeds=2)},
              run_points=run_points, claims=claims, figures=figures, ensemble=True,
              claim_specs=(ClaimSpec("smoke-accuracy", SPEC),),
              premises={"trained": premise_at_least("trained", "test_acc", 0.9)})
'''
    cases = {'premises=("traind",)': "premise 'traind' is unknown (known: trained)",
             'control=ControlSpec({"lr": 7.0}, "x")': "control setting lr=7.0 is in no preset's grid"}
    for i, (spec, says) in enumerate(cases.items()):
        f = tmp_path / f"s{i}.py"
        f.write_text(src.replace("SPEC", spec))
        assert main(["run", str(f), "--out", str(tmp_path / f"out{i}")]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "claim 'smoke-accuracy'" in err[0] and says in err[0], err
        assert not (tmp_path / f"out{i}").exists()


def test_a_control_decided_on_a_band_renders_in_the_console_and_report():
    from robustlab.report import text

    band = stats.decide(stats.mean_estimate([0.5, 0.52, 0.48]), threshold=(-0.1, 0.1), side="inside")
    d = Claim("x", "s", _rep(), {}, control=cl.Control("C0 = 1000", band)).to_dict()
    assert d["control"]["side"] == "inside"
    assert text.decision_text(d["control"]).endswith("in [-0.1, 0.1]")
    del d["control"]["side"]  # a claims.json written before controls carried their side
    assert text.decision_text(d["control"]).endswith("in [-0.1, 0.1]")


def test_a_claim_re_kinded_by_its_declaration_starts_from_the_study_s_own_verdict():
    from robustlab.studies.base import _declared

    study = _study([cl.ClaimSpec("c", kind=cl.SELF_CHECK)])
    c = Claim("c", "s", _rep(), {}, control=_ruled(_rep()))  # a passing control downgrades it
    assert c.decision.verdict == stats.INCONCLUSIVE
    d = _declared(study, c)  # as a self-check the control rule does not apply
    assert d.kind == cl.SELF_CHECK and d.decision.verdict == stats.REPRODUCED


def test_a_run_whose_self_check_fails_exits_1_and_keeps_its_results(tmp_path, capsys):
    """A self-check that does not hold means robustlab's own code is wrong: the run exits 1 (no
    --strict needed), says which check failed in one line, and still writes its claims and
    report."""
    import json

    from robustlab.cli import main

    f = tmp_path / "broken_smoke.py"
    f.write_text('''
import dataclasses
from robustlab import stats
from robustlab.studies.base import Claim
from robustlab.studies.smoke import STUDY as SMOKE, claims as smoke_claims

def claims(df, ctx):
    accuracy, _ = smoke_claims(df, ctx)
    falls = stats.decide(stats.mean_estimate([-1.0, -1.1, -0.9]), threshold=0.0, side="above")
    return [accuracy, Claim("smoke-loss-falls", "the training loss falls", falls, {}, "robustlab")]

STUDY = dataclasses.replace(SMOKE, name="broken-smoke", claims=claims)
''')
    out = tmp_path / "run"
    assert main(["run", str(f), "--out", str(out), "--quiet"]) == 1
    err = capsys.readouterr().err
    assert "self-check failed: smoke-loss-falls" in err and "Traceback" not in err
    written = {c["id"]: c for c in json.loads((out / "claims.json").read_text())}
    assert written["smoke-loss-falls"]["kind"] == cl.SELF_CHECK
    assert written["smoke-loss-falls"]["verdict"] == "contradicted"
    assert (out / "report.html").is_file()
    assert main(["run", "smoke", "--out", str(tmp_path / "ok"), "--quiet"]) == 0


def test_a_preset_can_declare_a_claim_undecided_at_its_scale():
    from robustlab.studies.base import _capped

    study = Study(name="planted", title="t", source="s", summary="", config=_Cfg,
                  presets={"quick": Preset(grid=({"C0": [10.0, 1000.0]},),
                                           undecided={"c": "the verdict changes with the base seed here"}),
                           "paper": Preset(grid=({"C0": [10.0, 1000.0]},))},
                  run_points=lambda cfgs, dev: [], claims=lambda df, ctx: [], figures=lambda df, ctx: [],
                  claim_specs=[cl.ClaimSpec("c", kind=cl.EXPLORATORY)])
    c = Claim("c", "s", _contra(), {"x": 1}, kind=cl.EXPLORATORY)
    capped = _capped(study, "quick", c)
    assert capped.decision.verdict == stats.INCONCLUSIVE and capped.decision.seeds_needed is None
    assert "not decided at preset 'quick'" in capped.decision.reason and "it read contradicted" in capped.decision.reason
    assert capped.evidence["uncapped"]["verdict"] == stats.CONTRADICTED and capped.evidence["x"] == 1
    assert _capped(study, "paper", c).decision.verdict == stats.CONTRADICTED  # only at the preset that says so
    with pytest.raises(UserError, match="undecided claim 'nope' is not declared"):
        Study(name="planted", title="t", source="s", summary="", config=_Cfg,
              presets={"quick": Preset(grid=({"C0": [10.0]},), undecided={"nope": "x"})},
              run_points=lambda cfgs, dev: [], claims=lambda df, ctx: [], figures=lambda df, ctx: [],
              claim_specs=[cl.ClaimSpec("c", kind=cl.EXPLORATORY)])


def test_coverage_counts_an_end_kept_only_with_enough_rows():
    """A peak's end kept by a single row is lost when the statistic needs two per value (min_per_value):
    the narrow end here keeps 1 of 3 networks at width 1 and none at 2, so with min_per_value=2 the
    narrow side is gone and coverage names the premise; with the default 1 it is covered."""
    df = pd.DataFrame({"width": [1, 1, 1, 2, 2, 2, 4, 4, 4, 8, 8, 8],
                       "ok": [1, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1]})
    p = [cl.premise_at_least("ok", "ok", 1)]
    assert cl.coverage(df, p, "width", shape="peak") is None
    v = cl.coverage(df, p, "width", shape="peak", min_per_value=2)
    assert v is not None and v.verdict == stats.NOT_APPLICABLE and "removes width < 4" in v.reason
