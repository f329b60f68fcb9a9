"""``python -m oh.cli``: the ``oh`` command (what the banner names when no ``oh`` script runs)."""

from oh.cli import main

raise SystemExit(main())
