"""Patch-structured data with sparse strong (robust) and dense weak (non-robust) features.

Feature learning, ICLR 2025 (Def. 2.2, Assumption 2.3). A sample of class ``y ∈ [k]`` is ``X = (x_1, …, x_P)``,
``x_p ∈ R^d``. A small random set ``J_R`` of ``n_robust`` patches carries the robust feature
``u_y``; every other patch (``J_NR``, dense) carries the non-robust feature ``v_y``::

    p ∈ J_R :  x_p = α_p u_y + ξ_p            (overlap: α_p u_y + β_p v_y + ξ_p)
    p ∈ J_NR:  x_p = β_p v_y + ξ_p
    ξ_p ~ N(0, σ_n² I_d),  σ_n = 1/√d by default,
    optional feature noise  Σ_{f ∉ {u_y, v_y}} γ_{p,f} f,  γ_{p,f} ~ U[0, c·σ_n/√d].

The ``2k`` features ``u_1..u_k, v_1..v_k`` are orthonormal: one-hot (``u_j = e_j``,
``v_j = e_{k+j}``, so ``d ≥ 2k``) or a random orthonormal basis (``basis="rotated"``, a
reviewer's question: the ℓ∞ geometry of the theory leans on one-hot features).

Assumption 2.3 reads ``α ≫ β`` (robust is stronger), ``Σ_p α_p^q ≪ Σ_p β_p^q`` (non-robust is
denser) and ``β ≤ ε ≪ α`` (the ℓ∞ budget sits between). :func:`assumption_report` turns the
three into numbers with explicit factors and :func:`check_assumptions` warns on violations.

Everything random comes from an explicit ``torch.Generator``; an ensemble of ``E`` seeds is
a leading dimension (:func:`sample_ensemble`).
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from collections.abc import Sequence

import torch

from ..config import ConfigError

__all__ = [
    "PatchSpec",
    "Features",
    "PatchData",
    "AssumptionWarning",
    "sample_features",
    "sample_patches",
    "sample_ensemble",
    "assumption_report",
    "check_assumptions",
    "MUCH",
]

# "a ≫ b" is read as a ≥ MUCH·b in the reports (a proxy: the theory's constants are not given).
MUCH = 2.0


class AssumptionWarning(UserWarning):
    """The chosen scales violate (a numeric reading of) Assumption 2.3 of the feature-learning paper (ICLR 2025)."""


@dataclasses.dataclass(frozen=True)
class PatchSpec:
    """The distribution's parameters (validated at construction; bad values raise ConfigError).

    ``alpha_max`` / ``beta_max``: when given, ``α_p ~ U[alpha, alpha_max]`` (resp. β) is drawn
    per patch and sample; otherwise the value is fixed. ``sigma_n=None`` means ``1/√d``.
    ``overlap``: robust patches carry ``β_p v_y`` as well (the authors' generalisation).
    """

    k: int = 2
    P: int = 128
    d: int = 16
    n_robust: int = 1
    alpha: float = 1.0
    beta: float = 0.3
    alpha_max: float | None = None
    beta_max: float | None = None
    sigma_n: float | None = None
    feature_noise: float = 0.0
    basis: str = "onehot"
    overlap: bool = False

    def __post_init__(self) -> None:
        if self.k < 2:
            raise ConfigError("k", self.k, "at least 2 classes")
        if self.n_robust < 1:
            raise ConfigError("n_robust", self.n_robust, "at least one robust patch (>= 1)")
        if self.P < self.n_robust:
            raise ConfigError("P", self.P, f">= n_robust={self.n_robust} (the robust patches must fit)")
        if self.d < 1:
            raise ConfigError("d", self.d, ">= 1")
        if self.basis not in ("onehot", "rotated"):
            raise ConfigError("basis", self.basis, "one of onehot, rotated")
        if self.d < 2 * self.k:
            # 2k orthonormal features need 2k dimensions, one-hot or rotated alike
            raise ConfigError("d", self.d, f">= 2k = {2 * self.k} ({self.basis} features u_1..u_k, v_1..v_k)")
        for name in ("alpha", "beta"):
            lo, hi = getattr(self, name), getattr(self, name + "_max")
            if not (lo >= 0 and math.isfinite(lo)):
                raise ConfigError(name, lo, "a finite value >= 0")
            if hi is not None and not (hi >= lo and math.isfinite(hi)):
                raise ConfigError(name + "_max", hi, f"none or a finite value >= {name}={lo}")
        if self.sigma_n is not None and not (self.sigma_n >= 0 and math.isfinite(self.sigma_n)):
            raise ConfigError("sigma_n", self.sigma_n, "none (1/sqrt(d)) or a finite value >= 0")
        if not (self.feature_noise >= 0 and math.isfinite(self.feature_noise)):
            raise ConfigError("feature_noise", self.feature_noise, "a finite value >= 0")

    @property
    def noise_std(self) -> float:
        return 1.0 / math.sqrt(self.d) if self.sigma_n is None else self.sigma_n

    @property
    def n_nonrobust(self) -> int:
        return self.P - self.n_robust


@dataclasses.dataclass(frozen=True)
class Features:
    """Orthonormal features: ``u`` (robust) and ``v`` (non-robust), each (..., k, d)."""

    u: torch.Tensor
    v: torch.Tensor

    @property
    def all(self) -> torch.Tensor:
        """(..., 2k, d): u_1..u_k then v_1..v_k."""
        return torch.cat([self.u, self.v], dim=-2)

    def to(self, device) -> Features:
        return Features(self.u.to(device), self.v.to(device))


@dataclasses.dataclass(frozen=True)
class PatchData:
    """Samples with their patch roles. Shapes with an optional leading ensemble dim ``E``.

    x: (..., N, P, d);  y: (..., N) int64;  robust: (..., N, P) bool (True on ``J_R``);
    alpha, beta: (..., N, P) the coefficients actually drawn (α is 0 off ``J_R``; β is 0 on
    ``J_R`` unless ``overlap``).
    """

    x: torch.Tensor
    y: torch.Tensor
    robust: torch.Tensor
    alpha: torch.Tensor
    beta: torch.Tensor

    @property
    def nonrobust(self) -> torch.Tensor:
        return ~self.robust

    def to(self, device) -> PatchData:
        return PatchData(*(getattr(self, f.name).to(device) for f in dataclasses.fields(self)))

    def __len__(self) -> int:
        return self.y.shape[-1]


def sample_features(spec: PatchSpec, generator: torch.Generator, *, dtype=torch.float32) -> Features:
    """The 2k orthonormal features: one-hot, or the first 2k columns of a Haar-random rotation."""
    k, d = spec.k, spec.d
    if spec.basis == "onehot":
        basis = torch.eye(d, dtype=torch.float64)[: 2 * k]
    else:
        g = torch.randn(d, 2 * k, generator=generator, dtype=torch.float64)
        q, r = torch.linalg.qr(g)
        # sign fix makes the draw Haar-distributed (QR alone is not)
        basis = (q * torch.sign(torch.diagonal(r)).unsqueeze(0)).T.contiguous()
    basis = basis.to(dtype)
    return Features(basis[:k].clone(), basis[k:].clone())


def _coeff(lo: float, hi: float | None, shape, generator, dtype) -> torch.Tensor:
    if hi is None or hi == lo:
        return torch.full(shape, lo, dtype=dtype)
    return lo + (hi - lo) * torch.rand(shape, generator=generator, dtype=dtype)


def sample_patches(spec: PatchSpec, features: Features, n: int, generator: torch.Generator,
                   *, dtype=torch.float32) -> PatchData:
    """Draw ``n`` samples, (n, P, d), with balanced-in-expectation uniform labels."""
    k, P, d = spec.k, spec.P, spec.d
    y = torch.randint(0, k, (n,), generator=generator)
    # J_R: n_robust distinct positions per sample, uniformly at random
    order = torch.rand(n, P, generator=generator).argsort(dim=1)
    robust = torch.zeros(n, P, dtype=torch.bool)
    robust.scatter_(1, order[:, : spec.n_robust], True)
    alpha = _coeff(spec.alpha, spec.alpha_max, (n, P), generator, dtype) * robust
    beta_full = _coeff(spec.beta, spec.beta_max, (n, P), generator, dtype)
    beta = beta_full if spec.overlap else beta_full * ~robust
    u, v = features.u.to(dtype), features.v.to(dtype)  # (k, d)
    x = alpha.unsqueeze(-1) * u[y].unsqueeze(1) + beta.unsqueeze(-1) * v[y].unsqueeze(1)  # (n, P, d)
    x = x + spec.noise_std * torch.randn(n, P, d, generator=generator, dtype=dtype)
    if spec.feature_noise > 0:
        # every feature except the sample's own u_y, v_y, with a small non-negative weight
        scale = spec.feature_noise * spec.noise_std / math.sqrt(d)
        gamma = scale * torch.rand(n, P, 2 * k, generator=generator, dtype=dtype)
        own = torch.zeros(n, 2 * k, dtype=torch.bool)
        own[torch.arange(n), y] = True
        own[torch.arange(n), k + y] = True
        gamma = gamma.masked_fill(own.unsqueeze(1), 0.0)
        x = x + gamma @ features.all.to(dtype)
    return PatchData(x, y, robust, alpha, beta)


def sample_ensemble(spec: PatchSpec, seeds: Sequence[int], n_train: int, n_test: int,
                    make_gen, *, dtype=torch.float32) -> tuple[Features, PatchData, PatchData]:
    """Per-seed features, training and test sets stacked on a leading ensemble dim E.

    ``make_gen(seed, salt)`` returns a generator (e.g. :func:`robustlab.utils.make_generator`);
    the features, training and test data of one seed do not depend on the other seeds.
    Returns Features (E, k, d) and PatchData with x (E, N, P, d).
    """
    feats, trains, tests = [], [], []
    for s in seeds:  # data generation only (cheap, once per run); training is batched over E
        f = sample_features(spec, make_gen(s, "patch-features"), dtype=dtype)
        feats.append(f)
        trains.append(sample_patches(spec, f, n_train, make_gen(s, "patch-train"), dtype=dtype))
        tests.append(sample_patches(spec, f, n_test, make_gen(s, "patch-test"), dtype=dtype))

    def stack(items: list[PatchData]) -> PatchData:
        return PatchData(*(torch.stack([getattr(it, f.name) for it in items])
                           for f in dataclasses.fields(PatchData)))

    return (Features(torch.stack([f.u for f in feats]), torch.stack([f.v for f in feats])),
            stack(trains), stack(tests))


def assumption_report(spec: PatchSpec, *, q: float, eps: float, gamma: float | None = None) -> dict:
    """Assumption 2.3 of the feature-learning paper (ICLR 2025) as numbers (per sample, in expectation over the draws).

    ``alpha_over_beta`` = min α / max β (robust stronger: want ≥ MUCH);
    ``sum_alpha_q`` = E Σ_p α_p^γ over robust patches, ``sum_beta_q`` = E Σ_p β_p^γ
    (non-robust denser: want sum_beta_q ≥ MUCH · sum_alpha_q), with γ the assumption's density
    exponent: the rebuttal writes it as its own constant γ; ``gamma=None`` takes γ = q, robustlab's
    reading (the keys keep their ``_q`` names; ``gamma`` records the exponent used); ``eps_over_beta`` = ε / max β
    (want ≥ 1: the attack can erase the non-robust signal) and ``eps_over_alpha`` = ε / min α
    (want ≤ 1/MUCH: the robust signal survives, and an ℓ∞ attack that also adds ε·u_j of a
    wrong class j cannot outweigh it). ``violations`` lists the ones that fail.
    """

    def moment(lo: float, hi: float | None, p: float) -> float:
        if hi is None or hi == lo:
            return lo ** p
        return (hi ** (p + 1) - lo ** (p + 1)) / ((p + 1) * (hi - lo))

    a_min, b_max = spec.alpha, spec.beta if spec.beta_max is None else spec.beta_max
    n_beta = spec.P if spec.overlap else spec.n_nonrobust
    g = q if gamma is None else gamma
    sum_a = spec.n_robust * moment(spec.alpha, spec.alpha_max, g)
    sum_b = n_beta * moment(spec.beta, spec.beta_max, g)
    rep = {
        "q": q,
        "gamma": g,
        "eps": eps,
        "alpha_over_beta": a_min / b_max if b_max > 0 else math.inf,
        "sum_alpha_q": sum_a,
        "sum_beta_q": sum_b,
        "beta_q_over_alpha_q": sum_b / sum_a if sum_a > 0 else math.inf,
        "eps_over_beta": eps / b_max if b_max > 0 else math.inf,
        "eps_over_alpha": eps / a_min if a_min > 0 else math.inf,
        "noise_std": spec.noise_std,
        "alpha_over_noise": a_min / spec.noise_std if spec.noise_std > 0 else math.inf,
    }
    violations = []
    if rep["alpha_over_beta"] < MUCH:
        violations.append(f"robust not stronger: min alpha / max beta = {rep['alpha_over_beta']:.3g} < {MUCH:g}")
    if rep["beta_q_over_alpha_q"] < MUCH:
        violations.append(f"non-robust not denser: sum beta^gamma / sum alpha^gamma = {rep['beta_q_over_alpha_q']:.3g} "
                          f"< {MUCH:g} (gamma = {g:g})")
    if eps > 0 and rep["eps_over_beta"] < 1:
        violations.append(f"eps below beta: eps / max beta = {rep['eps_over_beta']:.3g} < 1")
    if rep["eps_over_alpha"] > 1 / MUCH:
        violations.append(f"eps not much below alpha: eps / min alpha = {rep['eps_over_alpha']:.3g} > {1 / MUCH:g}")
    rep["violations"] = violations
    rep["holds"] = not violations
    return rep


def check_assumptions(spec: PatchSpec, *, q: float, eps: float, warn: bool = True, gamma: float | None = None) -> dict:
    """:func:`assumption_report`, warning (AssumptionWarning) once per violation."""
    rep = assumption_report(spec, q=q, eps=eps, gamma=gamma)
    if warn:
        for msg in rep["violations"]:
            warnings.warn(f"Assumption 2.3 (feature learning, ICLR 2025): {msg}", AssumptionWarning, stacklevel=2)
    return rep
