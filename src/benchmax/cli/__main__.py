"""``python -m benchmax.cli``: the same command as the ``benchmax`` console script."""

from benchmax.cli import main

main()
