"""convtune.backends: torch.backends' layout. ``convtune.backends.cudnn`` holds the flags."""

from . import cudnn

__all__ = ["cudnn"]
