"""What Study A's claims share: thresholds, row selection, the premises each point must meet, and
the one helper that applies a claim's premises and its decision rule to a set of points.

Thresholds are fixed from the paper's statements (and, where it gives none, from the scale of
the dynamics) before the runs they judge, and are never moved to turn a verdict.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd

from ... import claims as cl
from ... import stats
from ...papers import FEATURE_LEARNING
from ..base import Claim

SOURCE = FEATURE_LEARNING.short


def cite(where: str) -> str:
    return FEATURE_LEARNING.cite(where)


CLAIM_RATIO = 2.0  # A1: B > c·A with c = 2 (the same "≫" factor as Assumption 2.3's report)
CLEAN_MIN = 0.95  # A1: clean accuracy of standard training
CHANCE_SLACK = 0.1  # A1, A2 (iii): accuracy <= chance + 0.1 reads "at chance"
ROBUST_MIN = 0.9  # A2: robust accuracy that reads "robust"
# A2 (i), (ii): "learns the robust feature" read as a majority: more than half of every class's
# neurons correlate more with u_i than with v_i, and the robust patch carries more than half of
# the true-class logit. The paper's Thm 4.4 says the network's weights move to u (not one neuron
# of m); a majority is the weakest reading of that, fixed before the per-neuron numbers were made.
MAJORITY = 0.5
# A point is *trained* when its clean test accuracy reaches this (the bar the other studies use):
# the feature claims are statements about networks that fit the data (Thm 4.3, 4.4: clean
# accuracy ≈ 1); a network that did not train is excluded and counted, never judged.
TRAINED_MIN = 0.9
SLOPE_TOL = 0.25  # A3b: |slope − (−1)| <= 0.25 (see dynamics.SLOPE_BAND)

# A3: a run's one-step attack is *active* when it reaches ε along v_y on at least ACTIVE_MIN of the
# non-robust patches at some probe (below that the attack never erases the non-robust feature and
# the run is standard training in all but name). A run has *diverged* when final max(A, B) exceeds
# DIVERGED (in units of ρ/α, where σ̃ turns linear on the robust patch): more than twice where
# standard training settles (B ≈ 2), the weights left the small-weight regime the analysis lives in.
ACTIVE_MIN = 0.05
SATURATED = 0.5  # the perturbation saturates when more than half its v_y coordinates are clipped
DIVERGED = 5.0
# The phase-2 premise (issue 52, its thresholds): the theorem's second phase is the one-step
# perturbation saturating at ε while the loss is still Θ(1). A run is in it when, at some probe, more
# than SATURATED of its v_y coordinates are clipped while the adversarial training loss is still
# >= PHASE2_LOSS_START·log k, and its final adversarial loss is <= PHASE2_LOSS_END·log k.
PHASE2_LOSS_START = 0.5
PHASE2_LOSS_END = 0.1
PHASE2 = "phase-2"


def _assumption_holds(df: pd.DataFrame) -> pd.Series:
    if "assume_violations" not in df.columns:
        return pd.Series(False, index=df.index)
    return df["assume_violations"].fillna("").astype(str) == ""


def _not_diverged(df: pd.DataFrame) -> pd.Series:
    big = np.maximum(pd.to_numeric(df.get("A"), errors="coerce"), pd.to_numeric(df.get("B"), errors="coerce"))
    return pd.Series(big <= DIVERGED, index=df.index)


def _crossed(df: pd.DataFrame) -> pd.Series:
    return df["cross_step"].notna() if "cross_step" in df.columns else pd.Series(False, index=df.index)


def _phase2(df: pd.DataFrame) -> pd.Series:
    if not {"phase2_step", "loss_adv", "k"} <= set(df.columns):
        return pd.Series(False, index=df.index)
    end = pd.to_numeric(df["loss_adv"], errors="coerce") <= PHASE2_LOSS_END * np.log(df["k"].astype(float))
    return pd.to_numeric(df["phase2_step"], errors="coerce").notna() & end


PREMISES: dict[str, cl.Premise] = {
    "assumption-2.3": cl.Premise(
        "assumption-2.3", "Assumption 2.3 holds as the generator reports it (robust stronger, non-robust denser, "
        "β <= ε << α)", _assumption_holds),
    "trained": cl.premise_at_least("trained", "clean_acc", TRAINED_MIN, "final clean test accuracy"),
    "active": cl.premise_at_least("active", "clip_frac_v_max", ACTIVE_MIN,
                                  "largest clipped fraction of the one-step perturbation's v_y coordinates"),
    "small-weights": cl.Premise("small-weights", f"final max(A, B) <= {DIVERGED:g} (the small-weight regime)",
                                _not_diverged),
    "two-phases": cl.Premise("two-phases", "a real phase 1 and a sustained crossing (crossing_step)", _crossed),
    "saturated": cl.premise_at_least("saturated", "clip_frac_v_before_cross", SATURATED,
                                     "clipped fraction of the v_y coordinates at some probe before the crossing"),
    PHASE2: cl.Premise(
        PHASE2, f"the one-step run reaches its phase 2: at some probe more than {SATURATED:g} of the perturbation's "
        f"v_y coordinates are clipped at ε while the adversarial loss is still >= {PHASE2_LOSS_START:g}·log k, and the "
        f"final adversarial loss is <= {PHASE2_LOSS_END:g}·log k", _phase2),
}


def phase2_count(fin: pd.DataFrame) -> dict:
    """How many of these runs meet the phase-2 premise, and how close the others came (evidence)."""
    if fin.empty:
        return {"runs": 0, "met": 0}
    met = PREMISES[PHASE2].mask(fin)
    out = {"runs": int(len(fin)), "met": int(met.sum())}
    for col in ("clip_frac_v_max", "loss_at_clip_max", "loss_adv"):
        if col in fin.columns:
            vals = pd.to_numeric(fin[col], errors="coerce").dropna()
            if len(vals):
                out[f"{col}_range"] = [f(vals.min()), f(vals.max())]
    return out


def rows(df: pd.DataFrame, kind: str, **match) -> pd.DataFrame:
    """The rows of one ``kind`` whose columns equal (or are in) the given values."""
    if "kind" not in df.columns:
        return df.iloc[0:0]
    sel = df["kind"] == kind
    for col, val in match.items():
        if col not in df.columns:
            return df.iloc[0:0]
        sel &= df[col].isin(val) if isinstance(val, list | tuple | set) else df[col] == val
    return df[sel]


def missing(cid: str, statement: str, what: str, kind: str = cl.CLAIM) -> Claim:
    """A claim this run does not measure (a paper-<experiment> slice, or a grid without the
    experiment): not applicable — no evidence either way, and not a call for more seeds."""
    return Claim(cid, statement, stats.not_applicable(f"not measured in this run: needs {what}"),
                 {"missing": what}, SOURCE, kind=kind)


def f(x) -> float | None:
    if x is None:
        return None
    x = float(x)
    return None if math.isnan(x) else round(x, 6)


def est(e: stats.Estimate | None) -> dict | None:
    return None if e is None else e.to_dict()


def power(v: stats.Verdict) -> dict:
    return {"seeds": v.seeds, "seeds_needed": v.seeds_needed}


def judge(points: pd.DataFrame, premises: Sequence[str], rule: Callable[[pd.DataFrame], stats.Verdict], *,
          need: int = 2) -> tuple[stats.Verdict, list[cl.Exclusion], pd.DataFrame]:
    """Apply the named premises point by point, then ``rule`` to the points that meet them all.

    Not applicable (with the exclusion counts) when fewer than ``need`` points remain."""
    kept, exc = cl.apply_premises(points, [PREMISES[p] for p in premises])
    na = cl.too_few(kept, need, exc)
    return (na if na is not None else rule(kept)), exc, kept


# ----------------------------------------------------------------------------------------
# the claims engine's decision (issue 51): the claim's rule on its rows and on its control's rows

def _guarded(rule: Callable[[pd.DataFrame], stats.Verdict], need: int) -> Callable[[pd.DataFrame], stats.Verdict]:
    """``rule``, not applicable on fewer than ``need`` points (the same guard on claim and control)."""
    def guarded(pts: pd.DataFrame) -> stats.Verdict:
        return cl.too_few(pts, need) or rule(pts)
    guarded.__name__ = getattr(rule, "__name__", "rule")
    guarded.__qualname__ = getattr(rule, "__qualname__", guarded.__name__)
    return guarded


def judge_pair(spec: cl.ClaimSpec, rule: Callable[[pd.DataFrame], stats.Verdict], pts: pd.DataFrame,
               ctrl_pts: pd.DataFrame | None, *, control_premises: Sequence[str] | None = None
               ) -> tuple[stats.Verdict, cl.Control | None, list[cl.Exclusion], pd.DataFrame]:
    """The claim decided by ``rule`` on ``pts`` after the spec's premises, and its control: the same
    rule on ``ctrl_pts`` after ``control_premises`` (default: the spec's), in one call of the engine's
    ``judge``; the claim is not applicable, naming the premises' exclusions, when fewer than
    ``spec.min_points`` points remain."""
    kept, exc = cl.apply_premises(pts, [PREMISES[p] for p in spec.premises])
    ckept = None
    if ctrl_pts is not None and len(ctrl_pts):
        ckept = cl.apply_premises(ctrl_pts, [PREMISES[p] for p in (spec.premises if control_premises is None
                                                                   else control_premises)])[0]
    v, ctrl = cl.judge(spec, _guarded(rule, spec.min_points), kept, ckept)
    na = cl.too_few(kept, spec.min_points, exc)
    return (na if na is not None else v), ctrl, exc, kept


def across_values(knob: str, verdicts: dict, *, quantifier: str = cl.ALL, outside: dict | None = None
                  ) -> tuple[stats.Verdict, dict]:
    """The engine's ``across`` (issue 51): the claim's quantifier, values outside its regime named."""
    return cl.across(knob, verdicts, quantifier=quantifier, outside=dict(outside or {}))
