"""Every registered study module at once: the workers' fork server preloads this, so that a
worker starts with its study imported instead of importing it again in each worker process."""

import importlib

from . import REGISTRY

for _module in REGISTRY.values():
    importlib.import_module(_module)
