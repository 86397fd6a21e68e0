"""``python -m mzlite.repro.paper``: regenerate (or ``--check``) data/paper/*.json from the .tex."""

import sys

from . import main

if __name__ == "__main__":
    sys.exit(main())
