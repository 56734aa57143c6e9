"""``python -m queuey`` runs the command line."""

from queuey.cli import main

main()
