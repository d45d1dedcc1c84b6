"""The interactive explorer: type an expression, see its graph, step through the
forward pass and then the backward pass (``wengert explore``).

The server is the standard library's ``ThreadingHTTPServer`` bound to 127.0.0.1;
the page (``static/``) is plain HTML, CSS and JavaScript drawing SVG, with no
build step and nothing loaded from elsewhere.
"""
from .api import ApiError, expression_payload, schedule_payload
from .server import make_server, serve

__all__ = ["serve", "make_server", "expression_payload", "schedule_payload", "ApiError"]
