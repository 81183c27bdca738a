"""Synthetic binary data on the unit sphere, labelled by a random teacher network.

The setting of the lazy-training paper's theorem without any image: inputs ``x ~ Uniform(S^{d−1})``
(normalised Gaussians, so ``‖x‖ = 1`` exactly as the theory assumes) and labels

    y = sign(g(x)),   g(x) = Σ_{k=1}^K a_k ReLU(⟨u_k, x⟩),

with teacher directions ``u_k ~ Uniform(S^{d−1})`` and signs ``a_k`` alternating +1, −1.
Because every ``ReLU(⟨u_k, x⟩)`` has the same law, ``E g(x) = 0`` for even ``K``: the
classes are balanced in expectation at every ``d``. An optional margin drops points with
``|g(x)| < margin · std(g)`` so that the classes are separated.

Coordinates lie in [−1, 1] (not [0, 1] like pixels): attacks should use that box.
"""

from __future__ import annotations

import torch

from ..utils import make_generator
from .images import Split

__all__ = ["sphere_teacher", "SPHERE_BOUNDS"]

SPHERE_BOUNDS = (-1.0, 1.0)  # every unit vector lies in this box, so clipping to it is a no-op


def _unit(n: int, d: int, g: torch.Generator) -> torch.Tensor:
    x = torch.randn(n, d, generator=g, dtype=torch.float64)
    return x / x.norm(dim=1, keepdim=True)


def sphere_teacher(
    d: int,
    *,
    n_train: int = 1000,
    n_test: int = 500,
    teacher_width: int = 4,
    margin: float = 0.0,
    seed: int = 0,
    dtype: torch.dtype = torch.float32,
) -> Split:
    """Points on ``S^{d−1}`` with ±1 labels from a random ReLU teacher (see module docstring).

    Returns a :class:`Split` with ``x_train`` (n_train, d), ``y_train`` (n_train,) ±1 float,
    and the same for test. Depends only on ``(d, teacher_width, margin, seed)`` and the
    sizes; the teacher is shared by train and test.
    """
    if d < 2:
        raise ValueError(f"d={d}: the sphere needs d >= 2")
    if teacher_width < 1:
        raise ValueError(f"teacher_width={teacher_width}: need >= 1")
    if margin < 0:
        raise ValueError(f"margin={margin}: need >= 0")
    g = make_generator(seed, "sphere-teacher", d, teacher_width)
    u = _unit(teacher_width, d, g)  # (K, d)
    a = torch.tensor([1.0 if k % 2 == 0 else -1.0 for k in range(teacher_width)], dtype=torch.float64)

    def teacher(x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x @ u.T) @ a  # (N,)

    scale = teacher(_unit(4096, d, g)).std().item()  # the teacher's spread, for the margin
    need = n_train + n_test
    xs: list[torch.Tensor] = []
    have = 0
    for _ in range(200):  # rejection sampling for the margin (one pass when margin = 0)
        if have >= need:
            break
        x = _unit(max(2 * (need - have), 256), d, g)
        x = x[teacher(x).abs() >= margin * scale]
        xs.append(x)
        have += len(x)
    if have < need:
        raise ValueError(f"margin={margin} rejects almost every point at d={d}: use a smaller margin")
    x = torch.cat(xs)[:need]
    y = torch.where(teacher(x) >= 0, 1.0, -1.0)
    x, y = x.to(dtype).contiguous(), y.to(dtype)
    return Split(x[:n_train], y[:n_train], x[n_train:], y[n_train:], classes=(-1, 1), binary=True)
