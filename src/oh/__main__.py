"""``python -m oh``: the ``oh`` command."""

from oh.cli import main

raise SystemExit(main())
