"""Models and their initialisations (no training code here)."""

from .ensemble import Flat, fold, unfold

__all__ = ["Flat", "fold", "unfold"]
from .two_layer import TwoLayerReLU, neuron_offsets, outside_ball, project_to_ball  # noqa: E402

__all__ += ["TwoLayerReLU", "neuron_offsets", "outside_ball", "project_to_ball"]
from .deep import INITS, ConvNet, DeepMLP, ResNet, VmapEnsemble, init_variance  # noqa: E402

__all__ += ["INITS", "ConvNet", "DeepMLP", "ResNet", "VmapEnsemble", "init_variance"]
from .patch_cnn import PatchCNN, smoothed_relu  # noqa: E402
from .small_cnn import SmallCNN  # noqa: E402

__all__ += ["PatchCNN", "smoothed_relu", "SmallCNN"]
