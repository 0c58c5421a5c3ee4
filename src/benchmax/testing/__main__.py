"""``python -m benchmax.testing --port 8000``: the scripted model server as a process of its own."""

from benchmax.testing._server import main

main()
