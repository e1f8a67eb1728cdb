"""The ``sklearn-orfit`` command line."""

from ._main import main

__all__ = ["main"]
