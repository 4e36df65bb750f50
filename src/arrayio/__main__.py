"""``python -m arrayio`` runs the ``arrayio`` command."""

from .cli import main

main()
