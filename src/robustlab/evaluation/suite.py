"""What :func:`robustlab.evaluate` runs: attacks by name, the AutoAttack-standard suite, any
callable ``(model, x, y) -> x_adv`` and, where robustlab has no attack of its own, an adapter to
torchattacks.

Every entry becomes an :class:`~robustlab.attacks.Attack`, so the ball and the box are enforced
the same way whatever produced the points (the base class projects and clamps). A callable's
points that had to be projected are counted (``n_projected`` in the table): an attack that
returns points outside its budget is a bug in the attack, and a number that hides it is wrong.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch
from torch import nn

from ..attacks import APGD, APGDT, FGSM, L2, PGD, Attack, Linf, Square
from ..attacks.base import Bounds
from ..attacks.threat import per_sample_norm
from ..config import UserError

__all__ = ["ATTACKS", "SUITES", "Entry", "CallableAttack", "TorchattacksAttack", "resolve_attacks"]

ATTACKS = ("fgsm", "pgd", "apgd-ce", "apgd-dlr", "apgd-t", "fab-t", "square")
# AutoAttack's "standard" version (Croce & Hein 2020): each attack with one restart, APGD 100
# steps, APGD-T and FAB-T over the 9 highest-scoring other classes, Square 5,000 queries
SUITES = {"autoattack": ("apgd-ce", "apgd-t", "fab-t", "square")}
# the attacks robustlab does not implement itself yet: run through torchattacks when installed
ADAPTED = {"fab-t": "FAB"}


@dataclasses.dataclass(frozen=True)
class Entry:
    """One attack of an evaluation: its name in the table, what runs it (``implementation``),
    and ``build(eps, n_classes) -> Attack``."""

    name: str
    implementation: str
    build: Callable[[float, int], Attack]
    min_classes: int = 0  # the DLR losses' denominators need 3 (untargeted) or 4 (targeted) logits


# ----------------------------------------------------------------------------------------
# any callable (model, x, y) -> x_adv


def _outside(x: torch.Tensor, x_adv: torch.Tensor, threat: Linf | L2, bounds: Bounds) -> torch.Tensor:
    """Rows ``(N,)`` of ``x_adv`` outside the ball around ``x`` or the box (float32 rounding
    allowed), or holding NaN / inf."""
    tol = 1e-5 * max(1.0, threat.eps)
    bad = per_sample_norm(x_adv - x, threat.p) > threat.eps + tol
    if bounds is not None:
        flat = x_adv.reshape(x_adv.shape[0], -1)
        bad |= (flat < bounds[0] - tol).any(1) | (flat > bounds[1] + tol).any(1)
    return bad | ~torch.isfinite(x_adv.reshape(x_adv.shape[0], -1)).all(1)


@dataclasses.dataclass(frozen=True)
class CallableAttack(Attack):
    """Any function ``fn(model, x, y) -> x_adv`` as an :class:`~robustlab.attacks.Attack`: the
    base class projects its output onto the ball and clamps it to the box. Keyword parameters of
    ``fn`` named ``eps``, ``bounds`` or ``generator`` receive the budget, the input box and a
    seeded ``torch.Generator``; rows it returns non-finite are replaced by ``x`` (counted as
    projected). ``report`` (a dict, optional) gets ``"projected"``: how many rows had to be moved."""

    fn: Callable[..., Any] = dataclasses.field(default=None, compare=False)
    name: str = "callable"

    def run(self, model: nn.Module, x: torch.Tensor, y: torch.Tensor, *, bounds: Bounds,
            generator: torch.Generator | None = None, report: dict | None = None, **kw) -> torch.Tensor:
        given = {"eps": self.eps, "bounds": bounds, "generator": generator}
        out = self.fn(model, x, y, **{k: v for k, v in given.items() if _accepts(self.fn, k)})
        if not isinstance(out, torch.Tensor) or tuple(out.shape) != tuple(x.shape):
            what = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
            raise UserError(f"attack {self.name!r} is not allowed: it returned {what}, expected a tensor of "
                            f"shape {tuple(x.shape)} (a callable attack is fn(model, x, y) -> x_adv)")
        out = out.detach().to(device=x.device, dtype=x.dtype)
        bad = _outside(x, out, self.threat, bounds)
        if report is not None:
            report["projected"] = report.get("projected", 0) + int(bad.sum())
        finite = torch.isfinite(out.reshape(out.shape[0], -1)).all(1)
        return torch.where(finite.view(-1, *[1] * (x.ndim - 1)), out, x)


def _accepts(fn: Callable, name: str) -> bool:
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False
    return name in params or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())


def _callable_name(fn: Any, i: int) -> str:
    name = getattr(fn, "__name__", None) or type(fn).__name__
    return f"callable-{i}" if name == "<lambda>" else name


# ----------------------------------------------------------------------------------------
# torchattacks, for what robustlab does not implement


class _Rescaled(nn.Module):
    """``model(lo + (hi − lo) u)`` for ``u`` in [0, 1]: torchattacks assumes that box."""

    def __init__(self, model: nn.Module, lo: float, hi: float):
        super().__init__()
        self.model, self.lo, self.span = model, lo, hi - lo

    def forward(self, u: torch.Tensor) -> torch.Tensor:
        return self.model(self.lo + self.span * u)


def torchattacks_version() -> str | None:
    try:
        import torchattacks
    except ImportError:
        return None
    return getattr(torchattacks, "__version__", "?")


@dataclasses.dataclass(frozen=True)
class TorchattacksAttack(Attack):
    """torchattacks' attack ``cls`` (e.g. ``"FAB"``) at this budget, with ``options`` (pairs of
    keyword arguments). torchattacks attacks the box [0, 1]: other ``bounds`` are mapped onto it
    (ε scaled with them); its seed is drawn from ``generator`` and the global torch generator it
    reseeds is restored afterwards."""

    cls: str = "FAB"
    options: tuple[tuple[str, Any], ...] = ()

    def run(self, model: nn.Module, x: torch.Tensor, y: torch.Tensor, *, bounds: Bounds,
            generator: torch.Generator | None = None, **kw) -> torch.Tensor:
        import torchattacks

        if bounds is None:
            raise UserError(f"attack {self.cls} (torchattacks) is not allowed with bounds=None: it needs a box")
        lo, hi = bounds
        span = hi - lo
        seed = int(torch.randint(2**31 - 1, (1,), generator=generator)) if generator is not None else 0
        norm = "Linf" if isinstance(self.threat, Linf) else "L2"
        devices = [x.device] if x.device.type == "cuda" else []
        with torch.random.fork_rng(devices=devices):
            atk = getattr(torchattacks, self.cls)(_Rescaled(model, lo, hi), norm=norm, eps=self.eps / span,
                                                  seed=seed, **dict(self.options))
            u = atk((x - lo) / span, y)
        return lo + span * u.to(x)


# ----------------------------------------------------------------------------------------
# names -> entries


def _named(name: str, threat: str, steps: int | None, restarts: int) -> Entry:
    entry = _build_named(name, threat, steps, restarts)
    return dataclasses.replace(entry, min_classes={"apgd-dlr": 3, "apgd-t": 4, "fab-t": 3}.get(name, 0))


def _build_named(name: str, threat: str, steps: int | None, restarts: int) -> Entry:
    ball = Linf if threat == "linf" else L2
    if name == "fgsm":
        # saturation_safe: on a float32-saturated softmax the cross-entropy gradient is exactly
        # zero, and a plain FGSM / PGD would report such points robust
        return Entry(name, "robustlab FGSM", lambda e, k: FGSM(ball(e), saturation_safe=True))
    if name == "pgd":
        n = steps or 40
        return Entry(name, f"robustlab PGD, {n} steps", lambda e, k: PGD(
            ball(e), steps=n, step_size=2.5 * e / n, random_start=True, restarts=restarts, saturation_safe=True))
    if name in ("apgd-ce", "apgd-dlr"):
        n = steps or 100
        return Entry(name, f"robustlab APGD, {n} steps",
                     lambda e, k: APGD(ball(e), steps=n, restarts=restarts, loss=name.split("-")[1]))
    if name == "apgd-t":
        n = steps or 100
        return Entry(name, f"robustlab APGD-T, {n} steps x up to 9 targets",
                     lambda e, k: APGDT(ball(e), steps=n, restarts=restarts, targets=min(9, k - 1)))
    if name == "square":
        if threat != "linf":
            raise UserError("attack='square' is not allowed with threat='l2': robustlab's Square is the ℓ∞ attack")
        return Entry(name, "robustlab Square, 5000 queries", lambda e, k: Square(ball(e), queries=5000,
                                                                                   restarts=restarts))
    # fab-t: an adapter
    version = torchattacks_version()
    if version is None:
        raise UserError(f"attack={name!r} is not allowed: robustlab has no implementation of its own yet and "
                        "torchattacks is not installed (pip install 'robustlab[autoattack]')")
    n = steps or 100
    return Entry(name, f"torchattacks {version} {ADAPTED[name]} (adapter), {n} steps x every other class as target",
                 lambda e, k: TorchattacksAttack(ball(e), cls=ADAPTED[name], options=(
                     ("steps", n), ("n_restarts", restarts), ("multi_targeted", True), ("n_classes", k))))


def resolve_attacks(attacks: Any, threat: str, steps: int | None, restarts: int) -> list[Entry]:
    """``attacks`` — a name, a suite name, a callable, a list of those, or a mapping from the
    name to show to one — as entries, in order, duplicates dropped."""
    if isinstance(attacks, str) or callable(attacks) or isinstance(attacks, Attack):
        attacks = [attacks]
    if isinstance(attacks, Mapping):
        items = [(str(k), v) for k, v in attacks.items()]
    elif isinstance(attacks, Sequence):
        items = [(None, a) for a in attacks]
    else:
        raise UserError(f"attacks={attacks!r} is not allowed: a name, a callable, or a list or dict of them")
    if not items:
        raise UserError("attacks=[] is not allowed: name at least one of " + ", ".join(ATTACKS))
    ball = Linf if threat == "linf" else L2
    out: dict[str, Entry] = {}
    for i, (label, a) in enumerate(items):
        if isinstance(a, str) and a in SUITES:
            entries = [_named(n, threat, steps, restarts) for n in SUITES[a]]
        elif isinstance(a, str):
            if a not in ATTACKS:
                raise UserError(f"attack={a!r} is not allowed: one of {', '.join(ATTACKS)}, a suite "
                                f"({', '.join(SUITES)}) or a callable (model, x, y) -> x_adv")
            entries = [_named(a, threat, steps, restarts)]
        elif isinstance(a, Attack):
            if not isinstance(a.threat, ball):
                raise UserError(f"attack {a!r} is not allowed with threat={threat!r}: its threat is "
                                f"{type(a.threat).__name__}")
            entries = [Entry(type(a).__name__, f"robustlab {type(a).__name__} (given)",
                             lambda e, k, a=a: a.with_eps(e))]
        elif _is_torchattacks(a):
            raise UserError(f"attack {type(a).__name__} (a torchattacks attack) is not allowed as it is: it "
                            "is bound to one model and one eps; pass lambda model, x, y, eps: "
                            f"torchattacks.{type(a).__name__}(model, eps=eps)(x, y)")
        elif callable(a):
            name = _callable_name(a, i)
            entries = [Entry(name, "callable, projected onto the ball and box",
                             lambda e, k, a=a, name=name: CallableAttack(ball(e), fn=a, name=name))]
        else:
            raise UserError(f"attack={a!r} is not allowed: a name ({', '.join(ATTACKS)}), a suite "
                            f"({', '.join(SUITES)}) or a callable (model, x, y) -> x_adv")
        for entry in entries:
            if label is not None and len(entries) == 1:
                entry = dataclasses.replace(entry, name=label)
            out.setdefault(entry.name, entry)
    if {"clean", "worst case"} & set(out):
        raise UserError("attack names 'clean' and 'worst case' are not allowed: the table uses them")
    return list(out.values())


def _is_torchattacks(a: Any) -> bool:
    mod = type(a).__module__ or ""
    return mod.startswith("torchattacks.") and hasattr(a, "model") and hasattr(a, "forward")


