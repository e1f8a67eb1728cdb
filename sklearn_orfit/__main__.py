"""``python -m sklearn_orfit`` and the ``sklearn-orfit`` console script.

See :mod:`sklearn_orfit.cli._main` (``sklearn-orfit --help``) for the subcommands.
"""

import sys

from .cli._main import main

__all__ = ["main"]

if __name__ == "__main__":
    sys.exit(main())
