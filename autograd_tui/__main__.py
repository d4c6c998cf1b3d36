"""``python -m autograd_tui``: same as the ``autograd-tui`` console script."""

import sys

from autograd_tui.commands import main

if __name__ == "__main__":
    sys.exit(main())
