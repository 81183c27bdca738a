"""``robustlab.evaluate``: robust accuracy of a trained model, per ε and attack, and the
per-sample worst case over attacks (what RobustBench's ``benchmark`` and AutoAttack report).

The attacks come from :mod:`robustlab.evaluation.suite` (names, the AutoAttack suite, callables);
the data from tensors, arrays, a ``DataLoader`` or a ``Dataset``; the work is shown by a tqdm
progress bar on a terminal.
"""

from __future__ import annotations

import dataclasses
import html
import math
import sys
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
from torch import nn

from ..config import UserError
from .suite import ATTACKS, SUITES, Entry, resolve_attacks

__all__ = ["evaluate", "Evaluation", "Normalized", "ATTACKS", "SUITES", "THREATS"]

THREATS = ("linf", "l2")
WORST = "worst case"
AttackSpec = str | Callable[..., torch.Tensor]


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


@dataclasses.dataclass
class Evaluation:
    """What :func:`evaluate` measured.

    ``table``: one row per ε and attack, with ``"worst case"`` and ``"clean"`` rows: ``accuracy``,
    ``n_correct``, ``n``, ``implementation`` (what ran: robustlab's own attack, a torchattacks
    adapter, a callable), ``n_projected`` (rows a callable returned outside the ball or the box,
    moved onto them; 0 for the library's attacks) and ``n_attacked``.
    ``per_sample``: one row per ε and sample: ``label``, ``clean`` and one boolean column per
    attack and the worst case, True where the sample is still classified correctly. With
    ``cascade=True`` an attack column reads "robust to this attack and every earlier one"."""

    table: pd.DataFrame
    per_sample: pd.DataFrame
    threat: str
    attacks: list[str]
    cascade: bool = False
    seconds: dict[tuple[float, str], float] = dataclasses.field(default_factory=dict)  # wall time per (ε, attack)

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


def _clean_correct(model: nn.Module, x: torch.Tensor, y: torch.Tensor, batch: int) -> tuple[torch.Tensor, int]:
    """Correctness ``(N,)`` of clean predictions, in eval mode, and the number of classes (1 for
    binary scores); labels checked against the outputs."""
    from ..attacks import checks
    from ..attacks.losses import correct

    out, k = [], 1
    with checks.eval_mode(model), torch.no_grad():
        for i in range(0, x.shape[0], batch):
            z = model(x[i:i + batch])
            if isinstance(z, torch.Tensor) and z.is_floating_point() and not bool(torch.isfinite(z).all()):
                bad = int((~torch.isfinite(z.reshape(z.shape[0], -1))).any(1).sum()) if z.dim() else 1
                raise UserError(f"model is not allowed: its outputs are not finite (NaN or inf) on {bad} of the "
                                f"{z.shape[0] if z.dim() else 1} inputs from {i}; an accuracy of such outputs "
                                "would mean nothing: check the model and its inputs")
            if i == 0:
                k = z.shape[1] if z.ndim == 2 else 1
                try:
                    checks.check_labels(z, y[:batch])
                except ValueError as exc:
                    raise UserError(f"y is not allowed: {exc}") from None
            out.append(correct(z, y[i:i + batch]).cpu())
    return torch.cat(out), k


def _to_tensors(x: Any, y: Any, batch_size: int) -> tuple[Any, Any]:
    """A ``DataLoader`` (or any iterable of ``(inputs, labels)`` batches) or a map-style
    ``Dataset`` of pairs, read once into two tensors on the CPU; tensors and arrays as given."""
    if y is not None:
        return x, y
    if isinstance(x, (torch.Tensor, np.ndarray)):
        raise UserError("y is not allowed to be missing with tensor inputs: pass labels, or a DataLoader "
                        "of (inputs, labels) batches as x")
    from torch.utils.data import DataLoader, Dataset, IterableDataset

    if isinstance(x, Dataset) and not isinstance(x, IterableDataset) and hasattr(x, "__len__"):
        x = DataLoader(x, batch_size=batch_size, shuffle=False)
    if not isinstance(x, Iterable):
        raise UserError(f"x={type(x).__name__} is not allowed: a tensor or array with y, or a DataLoader / "
                        "Dataset of (inputs, labels) pairs")
    xs, ys = [], []
    for batch in x:
        if isinstance(batch, dict) and {"x", "y"} <= set(batch):
            batch = (batch["x"], batch["y"])
        if not isinstance(batch, (tuple, list)) or len(batch) < 2:
            raise UserError(f"x is not allowed: its batches must be (inputs, labels) pairs, got "
                            f"{type(batch).__name__}")
        xs.append(torch.as_tensor(batch[0]).detach().cpu())
        ys.append(torch.as_tensor(batch[1]).detach().cpu())
    if not xs:
        raise UserError("x is not allowed: the loader yielded no batches")
    return torch.cat(xs), torch.cat(ys)


def _progress(total: int, progress: bool | None):
    """A tqdm bar over attacked samples, on stderr; by default only when stderr is a terminal."""
    from tqdm.auto import tqdm

    show = sys.stderr.isatty() if progress is None else bool(progress)
    return tqdm(total=total, unit="sample", desc="evaluate", file=sys.stderr, disable=not show,
                dynamic_ncols=True, leave=False)


def _check_int(key: str, v: Any, lo: int, optional: bool = False) -> None:
    if (v is None and optional) or (not isinstance(v, bool) and isinstance(v, int) and v >= lo):
        return
    raise UserError(f"{key}={v!r} is not allowed: an integer >= {lo}")


def evaluate(
    model: nn.Module,
    x: Any,
    y: Any = None,
    *,
    threat: str = "linf",
    eps: float | Sequence[float] = (8 / 255,),
    attacks: AttackSpec | Sequence[AttackSpec] | dict[str, AttackSpec] = ("apgd-ce", "apgd-dlr"),
    bounds: tuple[float, float] | None = (0.0, 1.0),
    steps: int | None = None,
    restarts: int = 1,
    batch_size: int = 500,
    seed: int = 0,
    cascade: bool = False,
    progress: bool | None = None,
) -> Evaluation:
    """Clean and robust accuracy of ``model`` for every ε and attack, and the per-sample worst
    case over the attacks: a sample is robust at ε when it is classified correctly clean *and*
    after every attack (AutoAttack's and RobustBench's count).

    >>> ev = robustlab.evaluate(model, x, y, eps=[2/255, 8/255], attacks="autoattack")  # doctest: +SKIP
    >>> ev.table, ev.per_sample, ev.figure("robust.png")                               # doctest: +SKIP

    Args:
        model: an ``nn.Module`` mapping inputs in ``bounds`` to logits ``(N, k)`` (or binary
            scores ``(N,)`` with labels ±1). It runs in eval mode (restored afterwards) on its own
            device. A model trained on normalised inputs goes through :class:`Normalized`.
        x, y: inputs ``(N, ...)`` inside ``bounds`` and integer labels ``(N,)`` (tensors or arrays);
            or ``x`` a ``DataLoader`` / iterable of ``(inputs, labels)`` batches, or a ``Dataset`` of
            pairs, with ``y`` omitted: read once, in order, into memory.
        threat: ``"linf"`` or ``"l2"``; ε is measured in input units.
        eps: one budget or a list.
        attacks: names, a suite, callables, or a dict ``{name: attack}`` naming them in the table:

            * ``"fgsm"`` (one step), ``"pgd"`` (40 steps of 2.5·ε/40, Madry et al.), both
              saturation-safe; ``"apgd-ce"``, ``"apgd-dlr"`` (Auto-PGD, 100 steps, Croce & Hein
              2020); ``"apgd-t"`` (APGD on the targeted DLR loss, over the 9 highest other
              classes); ``"square"`` (Square, 5,000 queries, ℓ∞); ``"fab-t"`` (FAB targeted,
              through torchattacks when installed: the table's ``implementation`` says so);
            * ``"autoattack"``: AutoAttack's standard suite, APGD-CE, APGD-T, FAB-T, Square;
            * a callable ``fn(model, x, y) -> x_adv`` (keyword parameters ``eps``, ``bounds``,
              ``generator`` are filled in when it has them) or a robustlab ``Attack``: its output is
              projected onto the ball and clamped to the box, and rows that needed it are counted in
              ``n_projected``.
        bounds: the input box ``(lo, hi)``; inputs outside it are refused. ``None``: unbounded.
        steps, restarts: override the gradient attacks' steps (Square keeps its queries) and every
            iterative attack's random restarts.
        batch_size: samples per attack call.
        seed: every random choice comes from a generator seeded from ``seed``, the attack and ε:
            the same call gives the same numbers (on CPU) and adding an attack moves no other.
        cascade: run each attack only on the samples every earlier attack left robust, as
            AutoAttack does: the same worst case for less work; the attack rows then count
            "robust to this attack and every earlier one". Samples misclassified clean are never
            attacked (they count as not robust).
        progress: a tqdm bar on stderr; ``None`` (default): only when stderr is a terminal.

    Returns:
        an :class:`Evaluation` (``table``, ``per_sample``, ``figure()``).

    Raises:
        robustlab.UserError: before any attack runs, for a model that is not an ``nn.Module``,
            inputs outside ``bounds``, a negative or non-finite ε, an unknown attack, suite or
            threat, an attack that needs more classes than the model has.
    """
    if threat not in THREATS:
        raise UserError(f"threat={threat!r} is not allowed: one of {', '.join(THREATS)}")
    eps_list = _check_eps(eps)
    _check_int("steps", steps, 1, optional=True)
    _check_int("restarts", restarts, 1)
    _check_int("batch_size", batch_size, 1)
    _check_int("seed", seed, 0)
    if bounds is not None:
        try:
            lo, hi = (float(b) for b in bounds)
        except (TypeError, ValueError):
            raise UserError(f"bounds={bounds!r} is not allowed: (lo, hi) numbers with lo < hi, or None") from None
        if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
            raise UserError(f"bounds={bounds!r} is not allowed: (lo, hi) finite numbers with lo < hi, or None")
        bounds = (lo, hi)
    entries = resolve_attacks(attacks, threat, steps, restarts)
    x, y = _to_tensors(x, y, batch_size)
    x, y = _check_data(model, x, y, bounds)
    device = _model_device(model)
    x, y = x.to(device), y.to(device)
    clean, k = _clean_correct(model, x, y, batch_size)
    for entry in entries:
        if k < entry.min_classes:
            raise UserError(f"attack={entry.name!r} is not allowed: it needs at least {entry.min_classes} "
                            f"classes (the model has {k})")
    n = len(clean)
    frames, seconds = [], {}
    rows = [{"threat": threat, "eps": 0.0, "attack": "clean", "accuracy": float(clean.float().mean()),
             "n_correct": int(clean.sum()), "n": n, "implementation": "", "n_projected": 0, "n_attacked": 0}]
    with _progress(len(eps_list) * len(entries) * n, progress) as bar:
        for e in eps_list:
            per = {"eps": e, "sample": np.arange(n), "label": y.cpu().numpy(), "clean": clean.numpy()}
            worst = clean.clone()
            for entry in entries:
                bar.set_description(f"ε={e:g} {entry.name}")
                todo = worst if cascade else clean
                ok, report = _attack_all(model, entry, e, k, x, y, todo, bounds, batch_size, seed, bar)
                seconds[(e, entry.name)] = report.pop("seconds")
                worst &= ok
                per[entry.name] = ok.numpy()
                rows.append({"threat": threat, "eps": e, "attack": entry.name, "accuracy": float(ok.float().mean()),
                             "n_correct": int(ok.sum()), "n": n, "implementation": entry.implementation,
                             **report})
            per[WORST] = worst.numpy()
            rows.append({"threat": threat, "eps": e, "attack": WORST, "accuracy": float(worst.float().mean()),
                         "n_correct": int(worst.sum()), "n": n, "implementation": "per sample, over the attacks",
                         "n_projected": sum(r["n_projected"] for r in rows[-len(entries):]),
                         "n_attacked": 0})
            frames.append(pd.DataFrame(per))
    return Evaluation(pd.DataFrame(rows), pd.concat(frames, ignore_index=True), threat,
                      [entry.name for entry in entries], cascade, seconds)


def _attack_all(model, entry: Entry, eps: float, k: int, x, y, todo: torch.Tensor, bounds, batch_size: int,
                seed: int, bar) -> tuple[torch.Tensor, dict]:
    """Correctness ``(N,)`` after ``entry``'s attack at ``eps`` on the rows ``todo`` (the others
    read False), in batches; the report's ``n_projected``, ``n_attacked`` and ``seconds`` (wall)."""
    import time

    from ..attacks import checks
    from ..attacks.losses import correct
    from ..utils import make_generator
    from .suite import CallableAttack

    attack = entry.build(eps, k)
    gen = make_generator(seed, "evaluate", entry.name, repr(eps), device=x.device)
    idx = todo.nonzero().squeeze(1).to(x.device)
    ok = torch.zeros(len(todo), dtype=torch.bool)
    report: dict = {}
    kw = {"report": report} if isinstance(attack, CallableAttack) else {}
    bar.update(len(todo) - len(idx))
    t0 = time.perf_counter()
    for i in range(0, len(idx), batch_size):
        rows = idx[i:i + batch_size]
        xb, yb = x[rows], y[rows]
        try:
            x_adv = attack(model, xb, yb, bounds=bounds, generator=gen, **kw)
        except ValueError as exc:  # an attack that cannot take this model or input (Square: images only)
            raise UserError(f"attack={entry.name!r} is not allowed here: {exc}") from None
        with checks.eval_mode(model), torch.no_grad():
            ok[rows.cpu()] = correct(model(x_adv), yb).cpu()
        bar.update(len(rows))
    return ok, {"n_projected": report.get("projected", 0), "n_attacked": len(idx),
                "seconds": time.perf_counter() - t0}
