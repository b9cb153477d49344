"""Entry point for torch's device-backend autoload (the ``torch.backends`` group): ``import torch``
alone registers the tpu device. Kept apart from ``torch_tpu/__init__`` so the two imports can
start from either side without a cycle."""


def _autoload() -> None:
    import torch_tpu  # noqa: F401
