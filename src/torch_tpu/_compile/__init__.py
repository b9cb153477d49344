"""torch.compile on tpu: the ``tpu`` backend (dynamo_backend.py) and the routing of the default and
"inductor" backends to it for tpu code (routing.py)."""

from __future__ import annotations

from .dynamo_backend import backend
from .routing import install

__all__ = ["backend", "install"]
