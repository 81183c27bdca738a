"""``robustlab.evaluate``: robust accuracy of a trained model, per ε and attack, and the
per-sample worst case over attacks (what RobustBench's ``benchmark`` and AutoAttack report).

>>> ev = robustlab.evaluate(model, x, y, threat="linf", eps=[2/255, 4/255, 8/255],
...                         attacks=["apgd-ce", "apgd-dlr"])          # doctest: +SKIP
>>> ev.table            # one row per (ε, attack), plus "worst case" and "clean"
>>> ev.per_sample       # one row per (ε, sample): clean, each attack, worst case
>>> ev.figure("robust.png")

The model maps inputs in the declared box ``bounds`` (default ``(0, 1)``: pixels) to logits
``(N, k)`` (or binary scores ``(N,)`` with labels ±1). ε is measured in those input units. A
model trained on normalised inputs is evaluated through :class:`Normalized`, which puts the
normalisation inside the model so that the attack and its budget stay in pixel space.

A sample counts as robust at ε when it is classified correctly clean *and* after every attack
(the worst case per sample: an attack that fails where another succeeds does not help).
Attacks, with their defaults (``steps`` overrides the iterative ones):

* ``fgsm``: one step of size ε;
* ``pgd``: 40 steps of size 2.5·ε/40 from a random start (Madry et al. 2018's rule);
* ``apgd-ce``, ``apgd-dlr``: Auto-PGD (Croce & Hein 2020) with 100 steps, cross-entropy and
  DLR loss (:class:`~robustlab.attacks.APGD`). Together they are AutoAttack's "APGD" half, not
  the full standard AutoAttack (which adds targeted APGD, FAB-T and Square).

Every random start comes from a generator seeded from ``seed``, the attack and ε, so the same
call gives the same numbers (on CPU), and adding an attack does not move the others'.
Bad input — not an ``nn.Module``, inputs outside ``bounds``, a negative or non-finite ε, an
unknown attack or threat — raises :class:`robustlab.UserError` before any attack runs.
"""

from __future__ import annotations

import dataclasses
import html
import math
import sys
import types
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
from torch import nn

from .config import UserError

__all__ = ["evaluate", "Evaluation", "Normalized", "ATTACKS", "THREATS", "load_model", "load_data"]

ATTACKS = ("fgsm", "pgd", "apgd-ce", "apgd-dlr")
THREATS = ("linf", "l2")
WORST = "worst case"


class Normalized(nn.Module):
    """``model((x − mean) / std)``: a model trained on normalised inputs, presented to attacks
    in pixel space. ``mean`` and ``std`` are per channel (dimension 1 of the input), e.g.
    ``Normalized(net, mean=(0.4914, 0.4822, 0.4465), std=(0.247, 0.243, 0.261))`` for CIFAR-10."""

    def __init__(self, model: nn.Module, mean: Sequence[float] | torch.Tensor, std: Sequence[float] | torch.Tensor):
        super().__init__()
        mean_t = torch.as_tensor(mean, dtype=torch.float32).flatten()
        std_t = torch.as_tensor(std, dtype=torch.float32).flatten()
        if mean_t.shape != std_t.shape or not bool(torch.isfinite(mean_t).all()) or not bool((std_t > 0).all()):
            raise UserError(f"Normalized(mean={mean!r}, std={std!r}) is not allowed: one finite mean and "
                            "one std > 0 per channel")
        self.model = model
        self.register_buffer("mean", mean_t)
        self.register_buffer("std", std_t)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shape = (1, -1, *[1] * (x.ndim - 2))  # (1, C, 1, ...): per channel
        return self.model((x - self.mean.to(x).view(shape)) / self.std.to(x).view(shape))


def make_attack(name: str, threat: str, eps: float, steps: int | None = None, restarts: int = 1):
    """The attack ``name`` at budget ``eps`` with its documented defaults."""
    from .attacks import APGD, FGSM, L2, PGD, Linf

    ball = (Linf if threat == "linf" else L2)(eps)
    # saturation_safe: a model that classifies a point with a float32-saturated softmax has an
    # exactly zero cross-entropy gradient there, and a plain FGSM / PGD would report it robust
    if name == "fgsm":
        return FGSM(ball, saturation_safe=True)
    if name == "pgd":
        n = steps or 40
        return PGD(ball, steps=n, step_size=2.5 * eps / n, random_start=True, restarts=restarts,
                   saturation_safe=True)
    return APGD(ball, steps=steps or 100, restarts=restarts, loss=name.split("-")[1])


@dataclasses.dataclass
class Evaluation:
    """What :func:`evaluate` measured: ``table`` (one row per ε and attack, with ``"worst
    case"`` and ``"clean"`` rows: ``accuracy``, ``n_correct``, ``n``) and ``per_sample`` (one
    row per ε and sample: ``label``, ``clean`` and one boolean column per attack and the worst
    case, True where the sample is still classified correctly)."""

    table: pd.DataFrame
    per_sample: pd.DataFrame
    threat: str
    attacks: list[str]

    def figure(self, path: str | Path | None = None):
        """Robust accuracy against ε, one line per attack, the worst case in black and clean
        accuracy dashed; saved as PNG to ``path`` when given. Returns the matplotlib Figure."""
        from matplotlib.figure import Figure

        fig = Figure(figsize=(5.5, 3.6))
        ax = fig.add_subplot()
        t = self.table
        for name in self.attacks:
            sub = t[t["attack"] == name].sort_values("eps")
            ax.plot(sub["eps"], sub["accuracy"], marker="o", ms=3, lw=1.2, label=name)
        sub = t[t["attack"] == WORST].sort_values("eps")
        ax.plot(sub["eps"], sub["accuracy"], "k-", marker="o", ms=4, lw=2.2, label="worst case per sample")
        clean = float(t.loc[t["attack"] == "clean", "accuracy"].iloc[0])
        ax.axhline(clean, color="0.5", ls="--", lw=1, label=f"clean ({clean:.3f})")
        ax.set_xlabel(f"ε ({self.threat})")
        ax.set_ylabel("robust accuracy")
        ax.set_ylim(-0.02, 1.02)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        fig.tight_layout()
        if path is not None:
            fig.savefig(path, dpi=150, metadata={"Software": None})
        return fig

    def _repr_html_(self) -> str:
        return f"<p>{html.escape(f'robustlab.evaluate ({self.threat})')}</p>" + self.table.to_html(index=False,
                                                                                                    escape=True)


def _check_eps(eps: Any) -> list[float]:
    values = [eps] if isinstance(eps, (int, float)) else eps
    try:
        values = list(values)
    except TypeError:
        raise UserError(f"eps={eps!r} is not allowed: a number or a list of numbers >= 0") from None
    if not values:
        raise UserError("eps=[] is not allowed: give at least one budget")
    for v in values:
        if isinstance(v, bool) or not isinstance(v, (int, float, np.floating, np.integer)) \
                or not math.isfinite(float(v)) or float(v) < 0:
            raise UserError(f"eps={v!r} is not allowed: every ε must be a finite number >= 0")
    return sorted(dict.fromkeys(float(v) for v in values))


def _check_attacks(attacks: Any) -> list[str]:
    try:
        names = [attacks] if isinstance(attacks, str) else list(attacks)
    except TypeError:
        raise UserError(f"attacks={attacks!r} is not allowed: a name or a list of names, of "
                        f"{', '.join(ATTACKS)}") from None
    if not names:
        raise UserError("attacks=[] is not allowed: name at least one of " + ", ".join(ATTACKS))
    for a in names:
        if a not in ATTACKS:
            raise UserError(f"attack={a!r} is not allowed: one of {', '.join(ATTACKS)}")
    return list(dict.fromkeys(names))


def _check_data(model: Any, x: Any, y: Any, bounds) -> tuple[torch.Tensor, torch.Tensor]:
    if not isinstance(model, nn.Module):
        raise UserError(f"model={type(model).__name__} is not allowed: expected a torch.nn.Module "
                        "(a TorchScript module is one; wrap a plain function in a Module)")
    try:
        x, y = torch.as_tensor(x), torch.as_tensor(y)
    except (TypeError, ValueError, RuntimeError) as exc:
        raise UserError(f"x, y are not allowed: not tensors or arrays ({exc})") from None
    if not x.is_floating_point():
        raise UserError(f"x is not allowed: a floating-point tensor, got dtype {x.dtype}")
    if y.ndim != 1 or y.shape[0] != x.shape[0] or y.is_floating_point() or y.dtype == torch.bool:
        raise UserError(f"y is not allowed: integer labels of shape ({x.shape[0]},), got dtype {y.dtype} "
                        f"shape {tuple(y.shape)}")
    if x.shape[0] == 0:
        raise UserError("x is not allowed: no samples")
    if not bool(torch.isfinite(x).all()):
        raise UserError("x is not allowed: it holds NaN or inf")
    if bounds is not None:
        lo, hi = bounds
        if float(x.min()) < lo or float(x.max()) > hi:
            raise UserError(f"x is not allowed: inputs lie outside the declared range bounds=({lo:g}, {hi:g}) "
                            f"(min {float(x.min()):.4g}, max {float(x.max()):.4g}); pass pixel values and wrap a "
                            "normalising model in robustlab.Normalized, or declare bounds")
    return x, y


def _model_device(model: nn.Module) -> torch.device:
    for t in [*model.parameters(), *model.buffers()]:
        return t.device
    return torch.device("cpu")


def _clean_correct(model: nn.Module, x: torch.Tensor, y: torch.Tensor, batch: int) -> torch.Tensor:
    """Correctness ``(N,)`` of clean predictions, in eval mode; labels checked against the outputs."""
    from .attacks import checks
    from .attacks.losses import correct

    out = []
    with checks.eval_mode(model), torch.no_grad():
        for i in range(0, x.shape[0], batch):
            z = model(x[i:i + batch])
            if isinstance(z, torch.Tensor) and z.is_floating_point() and not bool(torch.isfinite(z).all()):
                bad = int((~torch.isfinite(z.reshape(z.shape[0], -1))).any(1).sum()) if z.dim() else 1
                raise UserError(f"model is not allowed: its outputs are not finite (NaN or inf) on {bad} of the "
                                f"{z.shape[0] if z.dim() else 1} inputs from {i}; an accuracy of such outputs "
                                "would mean nothing: check the model and its inputs")
            if i == 0:
                try:
                    checks.check_labels(z, y[:batch])
                except ValueError as exc:
                    raise UserError(f"y is not allowed: {exc}") from None
            out.append(correct(z, y[i:i + batch]).cpu())
    return torch.cat(out)


def evaluate(model: nn.Module, x: Any, y: Any, *, threat: str = "linf", eps: float | Sequence[float] = (8 / 255,),
             attacks: str | Sequence[str] = ("apgd-ce", "apgd-dlr"), bounds: tuple[float, float] | None = (0.0, 1.0),
             steps: int | None = None, restarts: int = 1, batch_size: int = 500, seed: int = 0) -> Evaluation:
    """Clean and robust accuracy of ``model`` on ``(x, y)`` for every ε in ``eps`` and every
    attack, and the per-sample worst case over the attacks (see the module docstring).

    ``x``: inputs ``(N, ...)`` inside ``bounds``, on any device (moved to the model's);
    ``y``: integer labels ``(N,)``. ``threat``: ``"linf"`` or ``"l2"``. ``steps`` and
    ``restarts`` override the iterative attacks' defaults. Returns an :class:`Evaluation`.
    """
    from .utils import make_generator

    if threat not in THREATS:
        raise UserError(f"threat={threat!r} is not allowed: one of {', '.join(THREATS)}")
    eps_list, names = _check_eps(eps), _check_attacks(attacks)
    for key, v, lo in (("steps", steps, 1), ("restarts", restarts, 1), ("batch_size", batch_size, 1), ("seed", seed, 0)):
        if (v is not None or key != "steps") and (isinstance(v, bool) or not isinstance(v, int) or v < lo):
            raise UserError(f"{key}={v!r} is not allowed: an integer >= {lo}")
    if bounds is not None:
        try:
            lo, hi = (float(b) for b in bounds)
        except (TypeError, ValueError):
            raise UserError(f"bounds={bounds!r} is not allowed: (lo, hi) numbers with lo < hi, or None") from None
        if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
            raise UserError(f"bounds={bounds!r} is not allowed: (lo, hi) finite numbers with lo < hi, or None")
        bounds = (lo, hi)
    x, y = _check_data(model, x, y, bounds)
    device = _model_device(model)
    x, y = x.to(device), y.to(device)
    clean = _clean_correct(model, x, y, batch_size)
    if "apgd-dlr" in names:
        with torch.no_grad():
            k = model(x[:1]).reshape(1, -1).shape[1]
        if k < 3:
            raise UserError(f"attack='apgd-dlr' is not allowed: the DLR loss needs at least 3 classes (the model has {k})")
    frames, rows = [], [{"threat": threat, "eps": 0.0, "attack": "clean", "accuracy": float(clean.float().mean()),
                         "n_correct": int(clean.sum()), "n": len(clean)}]
    for e in eps_list:
        per = {"eps": e, "sample": np.arange(len(clean)), "label": y.cpu().numpy(), "clean": clean.numpy()}
        worst = clean.clone()
        for name in names:
            attack = make_attack(name, threat, e, steps, restarts)
            gen = make_generator(seed, "evaluate", name, repr(e), device=device)
            ok = torch.cat([_robust(model, attack, x[i:i + batch_size], y[i:i + batch_size], bounds, gen)
                            for i in range(0, x.shape[0], batch_size)]) & clean
            worst &= ok
            per[name] = ok.numpy()
            rows.append({"threat": threat, "eps": e, "attack": name, "accuracy": float(ok.float().mean()),
                         "n_correct": int(ok.sum()), "n": len(ok)})
        per[WORST] = worst.numpy()
        rows.append({"threat": threat, "eps": e, "attack": WORST, "accuracy": float(worst.float().mean()),
                     "n_correct": int(worst.sum()), "n": len(worst)})
        frames.append(pd.DataFrame(per))
    return Evaluation(pd.DataFrame(rows), pd.concat(frames, ignore_index=True), threat, names)


def _robust(model, attack, x, y, bounds, gen) -> torch.Tensor:
    from .attacks import checks
    from .attacks.losses import correct

    x_adv = attack(model, x, y, bounds=bounds, generator=gen)
    with checks.eval_mode(model), torch.no_grad():
        return correct(model(x_adv), y).cpu()


# ----------------------------------------------------------------------------------------
# `robustlab evaluate`: a saved model and data set from files

def load_model(path: str | Path, module: str | None = None) -> nn.Module:
    """A model from ``path``: a TorchScript file (``torch.jit.save``), or, with ``module``
    (``pkg.mod:Factory`` or ``path/to/file.py:Factory``, a class or function called with no
    arguments), a state dict (``torch.save(model.state_dict(), path)``) loaded into it strictly."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"model={str(path)!r} is not allowed: no such file")
    if module is None:
        try:
            return torch.jit.load(str(path), map_location="cpu")
        except (RuntimeError, ValueError) as exc:
            first = (str(exc).strip().splitlines() or [""])[0][:160]
            raise UserError(f"model={str(path)!r} is not allowed: not a TorchScript file ({first}); for a "
                            "state dict give --module pkg.mod:Factory") from None
    model = _factory(module)()
    if not isinstance(model, nn.Module):
        raise UserError(f"--module {module!r} is not allowed: it returned {type(model).__name__}, not an nn.Module")
    try:
        state = torch.load(str(path), map_location="cpu", weights_only=True)
        model.load_state_dict(state)
    except Exception as exc:  # noqa: BLE001 - any failure to read or fit the file is the user's input
        first = (str(exc).strip().splitlines() or [""])[0][:200]
        raise UserError(f"model={str(path)!r} is not allowed: not a state dict of {module} "
                        f"({type(exc).__name__}: {first})") from None
    return model.eval()


def _factory(spec: str):
    import importlib
    import importlib.util

    if ":" not in spec:
        raise UserError(f"--module {spec!r} is not allowed: expected pkg.mod:Factory or file.py:Factory")
    where, name = spec.rsplit(":", 1)
    try:
        if where.endswith(".py"):
            if not Path(where).is_file():
                raise UserError(f"--module {spec!r} is not allowed: no such file {where!r}")
            loader = importlib.util.spec_from_file_location(f"_robustlab_model_{Path(where).stem}", where)
            mod = importlib.util.module_from_spec(loader)
            loader.loader.exec_module(mod)
        else:
            mod = importlib.import_module(where)
        obj = getattr(mod, name)
    except UserError:
        raise
    except Exception as exc:  # noqa: BLE001
        raise UserError(f"--module {spec!r} is not allowed: {type(exc).__name__}: {exc}") from None
    if not callable(obj):
        raise UserError(f"--module {spec!r} is not allowed: {name} is not callable")
    return obj


def load_data(path: str | Path) -> tuple[torch.Tensor, torch.Tensor]:
    """``(x, y)`` from a ``.pt`` file (``torch.save({"x": x, "y": y})`` or a tuple ``(x, y)``)
    or an ``.npz`` file with arrays ``x`` and ``y``."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"--data {str(path)!r} is not allowed: no such file")
    try:
        if path.suffix == ".npz":
            with np.load(path) as z:
                data = {"x": z["x"], "y": z["y"]}
        else:
            data = torch.load(str(path), map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001
        raise UserError(f"--data {str(path)!r} is not allowed: unreadable ({type(exc).__name__}: "
                        f"{(str(exc).splitlines() or [''])[0][:160]})") from None
    if isinstance(data, dict) and {"x", "y"} <= set(data):
        return torch.as_tensor(data["x"]), torch.as_tensor(data["y"])
    if isinstance(data, list | tuple) and len(data) == 2:
        return torch.as_tensor(data[0]), torch.as_tensor(data[1])
    raise UserError(f"--data {str(path)!r} is not allowed: expected {{'x': inputs, 'y': labels}} or (x, y)")


class _CallableModule(types.ModuleType):
    """``robustlab.evaluate(...)`` calls :func:`evaluate` whether the name refers to this module
    (as it does once the submodule is imported) or to the function."""

    def __call__(self, *args: Any, **kwargs: Any) -> Evaluation:
        return evaluate(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
