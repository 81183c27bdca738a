"""train"""
from .supervised import SGDSpec, TrainLog, evaluate, train_supervised  # noqa: E402

__all__ = ["SGDSpec", "TrainLog", "evaluate", "train_supervised"]
from .feature import FeatureHistory, FeatureTrainSpec, train_patch_cnn  # noqa: E402
from .images import ImageTrainSpec, nonrobust_dataset, train_images  # noqa: E402

__all__ += ["FeatureHistory", "FeatureTrainSpec", "train_patch_cnn", "ImageTrainSpec", "nonrobust_dataset",
            "train_images"]
