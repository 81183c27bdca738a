"""Models and data sets from files, for ``robustlab evaluate``: a TorchScript file or a state
dict with the factory that builds its model, and ``(x, y)`` from a ``.pt`` or ``.npz`` file; the
factory spec ``pkg.mod:name`` / ``file.py:name`` also names a user's attack function."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from torch import nn

from ..config import UserError

__all__ = ["load_model", "load_data", "load_object"]


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
    model = load_object(module)()
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


def load_object(spec: str, flag: str = "--module"):
    """The callable that ``spec`` names: ``pkg.mod:name`` (imported) or ``path/to/file.py:name``
    (loaded from the file). Anything wrong is a :class:`UserError` naming ``flag``."""
    import importlib
    import importlib.util

    if ":" not in spec:
        raise UserError(f"{flag} {spec!r} is not allowed: expected pkg.mod:name or file.py:name")
    where, name = spec.rsplit(":", 1)
    try:
        if where.endswith(".py"):
            if not Path(where).is_file():
                raise UserError(f"{flag} {spec!r} is not allowed: no such file {where!r}")
            loader = importlib.util.spec_from_file_location(f"_robustlab_user_{Path(where).stem}", where)
            mod = importlib.util.module_from_spec(loader)
            loader.loader.exec_module(mod)
        else:
            mod = importlib.import_module(where)
        obj = getattr(mod, name)
    except UserError:
        raise
    except Exception as exc:  # noqa: BLE001 - any failure to import the user's code is their input
        raise UserError(f"{flag} {spec!r} is not allowed: {type(exc).__name__}: {exc}") from None
    if not callable(obj):
        raise UserError(f"{flag} {spec!r} is not allowed: {name} is not callable")
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
