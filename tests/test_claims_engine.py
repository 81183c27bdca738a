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


def test_a_claim_whose_control_passes_too_is_inconclusive():
    ctl = cl.Control("C0 = 1000", _rep(), why="a non-lazy network is not flipped by a small step")
    c = Claim("x", "s", _rep(), {}, kind=cl.CLAIM, control=ctl)
    assert c.decision.verdict == stats.INCONCLUSIVE
    assert cl.NOT_DISCRIMINATING in c.decision.reason
    d = c.to_dict()
    assert d["verdict_before_control"] == stats.REPRODUCED
    assert d["control"]["verdict"] == stats.REPRODUCED and d["control"]["setting"] == "C0 = 1000"


def test_a_claim_whose_control_fails_keeps_its_verdict():
    ctl = cl.Control("C0 = 1000", _contra(), why="...")
    c = Claim("x", "s", _rep(), {}, control=ctl)
    assert c.decision.verdict == stats.REPRODUCED
    assert c.to_dict()["control"]["verdict"] == stats.CONTRADICTED
    assert "fail_check" not in c.to_dict()


def test_a_claim_without_control_is_marked_and_a_self_check_is_not_downgraded():
    c = Claim("x", "s", _rep(), {})
    assert c.to_dict()["fail_check"] == cl.NO_CONTROL
    # a self-check's "control" does not apply the discrimination rule (it is an invariant)
    s = Claim("y", "s", _rep(), {}, kind=cl.SELF_CHECK, control=cl.Control("c", _rep()))
    assert s.decision.verdict == stats.REPRODUCED
    # an exploratory reading with a control obeys the rule as a claim does
    e = Claim("e", "s", _rep(), {}, kind=cl.EXPLORATORY, control=cl.Control("c", _rep()))
    assert e.decision.verdict == stats.INCONCLUSIVE and e.verdict_before_control == stats.REPRODUCED
    assert "fail_check" not in Claim("f", "s", _rep(), {}, kind=cl.EXPLORATORY).to_dict()
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


def test_across_agreement_and_disagreement():
    v, rec = cl.across("C0", {10: _rep(), 20: _rep(2.0), 40: stats.not_applicable("x")})
    assert v.verdict == stats.REPRODUCED and rec == {"C0": {"10": "reproduced", "20": "reproduced",
                                                             "40": "not applicable"}}
    v, rec = cl.across("C0", {10: _rep(), 20: _contra()})
    assert v.verdict == stats.INCONCLUSIVE and "depends on C0" in v.reason
    assert rec["C0"]["20"] == "contradicted"


@dataclasses.dataclass(frozen=True)
class _Cfg(Config):
    C0: float = 10.0
    seed: int = 0


def _study(specs, premises=None):
    return Study(name="planted", title="t", source="s", summary="", config=_Cfg,
                 presets={"quick": Preset(grid=({"C0": [10.0, 1000.0]},))},
                 run_points=lambda cfgs, dev: [], claims=lambda df, ctx: [], figures=lambda df, ctx: [],
                 claim_specs=specs, premises=premises or {})


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

    claims = [Claim("a", "s", _rep(), {}, control=cl.Control("c", _contra())).to_dict(),
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
    c = Claim("c", "s", _rep(), {}, control=cl.Control("c", _rep()))  # a passing control downgrades it
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
