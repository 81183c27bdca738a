"""train"""
from .supervised import SGDSpec, TrainLog, evaluate, train_supervised  # noqa: E402

__all__ = ["SGDSpec", "TrainLog", "evaluate", "train_supervised"]
