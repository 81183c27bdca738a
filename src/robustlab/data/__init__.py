"""Data: generators and loaders, (config, generator) -> tensors. Nothing trains here."""

from .images import DATASETS, ImageData, Split, load_images, load_raw, resize

__all__ = ["DATASETS", "ImageData", "Split", "load_images", "load_raw", "resize"]
