"""Data: generators and loaders, (config, generator) -> tensors. Nothing trains here."""

from .images import DATASETS, ImageData, Split, load_images, load_raw, resize

__all__ = ["DATASETS", "ImageData", "Split", "load_images", "load_raw", "resize"]
from .sphere import SPHERE_BOUNDS, sphere_teacher  # noqa: E402

__all__ += ["SPHERE_BOUNDS", "sphere_teacher"]
from .patches import AssumptionWarning, Features, PatchData, PatchSpec, sample_ensemble  # noqa: E402

__all__ += ["AssumptionWarning", "Features", "PatchData", "PatchSpec", "sample_ensemble"]
