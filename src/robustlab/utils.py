"""Small shared helpers: devices, generators, thread limits."""

from __future__ import annotations

import torch

from .config import UserError

__all__ = ["resolve_device", "make_generator", "derive_seed"]


def resolve_device(name: str = "cpu") -> torch.device:
    """``cpu``, ``cuda`` (error if absent) or ``auto`` (CUDA when present)."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name.startswith("cuda"):
        if not torch.cuda.is_available():
            raise UserError(f"device={name!r} is not allowed: CUDA is not available on this machine (use cpu or auto)")
        return torch.device(name)
    if name == "cpu":
        return torch.device("cpu")
    raise UserError(f"device={name!r} is not allowed: one of cpu, cuda, auto")


def derive_seed(seed: int, *salt: int | str) -> int:
    """A child seed from a parent seed and a salt (stable across runs and platforms)."""
    import hashlib

    blob = ":".join([str(seed), *map(str, salt)]).encode()
    return int.from_bytes(hashlib.sha256(blob).digest()[:7], "little")


def make_generator(seed: int, *salt: int | str, device: torch.device | str = "cpu") -> torch.Generator:
    """An explicit torch.Generator seeded from the config seed (and an optional salt)."""
    g = torch.Generator(device=device)
    g.manual_seed(derive_seed(seed, *salt) if salt else seed)
    return g
