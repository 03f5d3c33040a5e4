"""The attention explorer: a local web page over trained runs (`python -m experiments serve`).

Not an experiment (experiments.registry.TOOL_PACKAGES keeps discovery from importing it):
  service.py   Explorer: loaded runs answering one input at a time, as plain JSON-able dicts
               (the command line's lines, its numbers, and every attention map); no web library
  zoo_page.py  one zoo attention on numbers the user types (no trained run)
  app.py       the FastAPI app over both (its docstring holds the HTTP API contract)
  server.py    the uvicorn server's bounds: body deadline (408), connection limit (503),
               disconnects logged as one line
  static/      the page (index.html and what it loads), served at / and /static
"""
