"""What ``serve`` lets in: the checks every request passes before textual-serve sees it.

A browser runs any web page's script, and that page may ask for ``http://127.0.0.1:8000``:
so the server answers only requests that name it (the ``Host`` header is this server's
address and port, or a name the teacher allowed with ``--allow-host``: a DNS-rebinding
page names its own domain), opens an app only for a websocket whose ``Origin`` is the
server's own page, and, with a token (the default off this machine), only for a browser
that opened the link with the token in it (kept in a cookie for the page's websocket and
its downloads).  Each refusal is one plain-text message saying what to do.

``--max-clients`` caps the apps running at once: each is a process of its own (see
docs/tui.md for what one costs); the page and the websocket beyond the cap are refused
with a message.
"""

from __future__ import annotations

import hmac
import ipaddress
import secrets
import socket
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

#: apps (connected viewers) at once unless --max-clients says otherwise
DEFAULT_MAX_CLIENTS = 40
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")


def new_token() -> str:
    return secrets.token_urlsafe(18)


def choose_token(host: str, given: str | None, no_token: bool) -> str | None:
    """The token a server on ``host`` needs: the one given, else a new one unless the
    address is this machine's own (127.0.0.1, ::1, localhost) or ``--no-token``."""
    if given is not None or no_token:
        return given
    return None if is_loopback(host) else new_token()


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name.strip("[]"))
    except ValueError:
        return False
    return True


def _bracket(host: str) -> str:
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def host_names(bind: str, allow: Iterable[str]) -> frozenset[str]:
    """The names (without port) a request may give in ``Host``: the bound address (the
    loopback names for a loopback one; this machine's name for a wildcard one), and the
    names allowed."""
    names = {_bracket(a).lower() for a in allow}
    if is_loopback(bind):
        names.update(LOOPBACK_NAMES)
    elif bind in ("0.0.0.0", "::", ""):
        names.update(LOOPBACK_NAMES)
        fqdn = socket.getfqdn()
        names.update(n.lower() for n in (socket.gethostname(), fqdn) if n)
    else:
        names.add(_bracket(bind).lower())
    return frozenset(names)


@dataclass
class Guard:
    """The checks, with what the server was started with."""

    bind: str
    port: int
    allow: frozenset[str]
    token: str | None = None
    max_clients: int = DEFAULT_MAX_CLIENTS
    #: the number of apps running now (the server keeps it)
    clients: Callable[[], int] = field(default=lambda: 0)

    @property
    def cookie(self) -> str:
        return f"autograd_tui_token_{self.port}"  # cookies are per host, not per port

    def host_refusal(self, host: str) -> str | None:
        name, _, port = host.rpartition(":") if not host.endswith("]") else (host, "", "")
        if not name or "]" in port:
            name, port = host, ""
        wildcard = self.bind in ("0.0.0.0", "::", "")
        ok = port == str(self.port) and (name.lower() in self.allow
                                         or (wildcard and _is_ip(name)))
        if ok:
            return None
        return (f"this server answers to {self.where()} only, not to the name "
                f"{host[:80]!r}: open it by that address, or start it with "
                "--allow-host NAME to allow another name for it")

    def where(self) -> str:
        names = sorted(n for n in self.allow if n != "[::1]")
        return " or ".join(f"{n}:{self.port}" for n in names[:4]) or f"port {self.port}"

    def origin_refusal(self, origin: str | None, host: str) -> str | None:
        if origin == f"http://{host}":
            return None
        return ("a websocket that does not come from this server's own page is refused "
                f"(its Origin was {origin!r}, not 'http://{host[:80]}')")

    def token_refusal(self, given: str | None) -> str | None:
        if self.token is None:
            return None
        if given is not None and hmac.compare_digest(given.encode(), self.token.encode()):
            return None
        return ("this server needs its link with the token (…/?token=…), as printed where "
                "`autograd-tui serve` was started: ask the teacher for it")

    def full_refusal(self) -> str | None:
        n = self.clients()
        if n < self.max_clients:
            return None
        return (f"this server has {n} viewers already, its limit (--max-clients "
                f"{self.max_clients}): close another tab, or try again later")

    def check(self, request: Any) -> tuple[int, str] | None:
        """(status, message) when ``request`` is refused, else None."""
        refusal = self.host_refusal(request.host)
        if refusal:
            return 403, refusal
        if request.path == "/":
            given = request.query.get("token") or request.cookies.get(self.cookie)
        else:
            given = request.cookies.get(self.cookie)
        if request.path.startswith("/ws"):
            refusal = self.origin_refusal(request.headers.get("Origin"), request.host)
            if refusal:
                return 403, refusal
        if request.path == "/" or request.path.startswith(("/ws", "/download")):
            refusal = self.token_refusal(given)
            if refusal:
                return 403, refusal
        if request.path == "/" or request.path.startswith("/ws"):
            refusal = self.full_refusal()
            if refusal:
                return 503, refusal
        return None

    def middleware(self) -> Callable[..., Awaitable[Any]]:
        from aiohttp import web

        @web.middleware
        async def guard(request: web.Request, handler: Any) -> Any:
            refused = self.check(request)
            if refused is not None:
                status, text = refused
                return web.Response(status=status, text=f"autograd-tui serve: {text}\n",
                                    headers={"X-Content-Type-Options": "nosniff",
                                             "Cache-Control": "no-store"})
            response = await handler(request)
            if request.path == "/" and self.token is not None:
                response.set_cookie(self.cookie, self.token, httponly=True,
                                    samesite="Strict", path="/")
            return response

        return guard
