"""A JSON-over-HTTP server on a free local port for test doubles of HTTP APIs.

The doubles (tests/doubles/kubefake.py, tests/maintenance/fakenova.py) only decide what to answer;
this module reads the request body, writes the answer and runs the server in a thread.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from email.message import Message
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

# (method, path, JSON body or None, request headers) -> (status, JSON answer or None for no body)
Answer = Callable[[str, str, Any, Message], tuple[int, Any]]
METHODS = ("GET", "PUT", "POST", "PATCH", "DELETE")


@contextmanager
def serve_json(answer: Answer) -> Iterator[str]:
    """Serve `answer` on 127.0.0.1; yields the base URL, stops the server afterwards."""

    class Handler(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length)) if length else None
            status, reply = answer(self.command, self.path, body, self.headers)
            data = json.dumps(reply).encode() if reply is not None else b""
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: object) -> None:
            pass

    for method in METHODS:
        setattr(Handler, f"do_{method}", Handler._answer)
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
