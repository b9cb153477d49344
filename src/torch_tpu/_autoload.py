"""Entry point for torch's device-backend autoload (the ``torch.backends`` group): ``import torch``
alone registers the tpu device. Kept apart from ``torch_tpu/__init__`` so the two imports can
start from either side without a cycle."""


def _autoload() -> None:
    try:
        import torch_tpu  # noqa: F401
    except ImportError as error:
        # An unbuilt checkout must not break `import torch` for the whole environment;
        # `import torch_tpu` still raises the real error.
        import warnings

        warnings.warn(f"torch_tpu is installed but could not be loaded: {error}", stacklevel=2)
