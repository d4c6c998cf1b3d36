"""``autograd-tui serve``: the app in a web browser, for a projector or a class without
terminals.

textual-serve's ``Server`` serves a page with a terminal (xterm.js) in it; each browser
that opens the page gets its own app: the server starts ``autograd-tui run NAME ...``
(this Python, ``-m autograd_tui``) in a subprocess per connection, with Textual's web
driver in place of a terminal, and ends it when the page closes.  So every student's
tab is its own run, stepped on its own.

The arguments are checked here first, as ``run`` checks them (an unknown scenario is one
message and exit 2 before anything listens), and so is the address (a port in use is one
message and exit 1).  What a request must be to get in (its ``Host``, a websocket's
``Origin``, the token, ``--max-clients``) is in ``serve_guard.py``; under serve, the app's
export never writes where a viewer says (``app/web_export.py``).  Ctrl-C stops the server
and the apps it started: exit 0, the way a server is meant to end.
"""

from __future__ import annotations

import argparse
import errno
import os
import re
import shlex
import shutil
import socket
import sys
import tempfile
from typing import Any

from autograd_tui.commands.common import (
    EXIT_OK,
    FORMATTER,
    PROG,
    Failure,
    UsageError,
    add_run_options,
    check_run_args,
    examples,
    say,
)
from autograd_tui.commands.serve_guard import (
    DEFAULT_MAX_CLIENTS,
    Guard,
    choose_token,
    host_names,
)

DEFAULT_SCENARIO = "linear-relu"
#: seconds Ctrl-C waits for the apps of open pages to quit
SHUTDOWN_WAIT = 10.0
#: a Host header that can go into the page as it is (a name or address, and a port)
_HOST_HEADER = re.compile(r"[A-Za-z0-9.\-]+(:\d{1,5})?|\[[0-9A-Fa-f:.]+\](:\d{1,5})?")


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "serve", help="the app in a web browser (for a projector or a class)",
        formatter_class=FORMATTER,
        description="Serve the app on a web page: every browser that opens it gets its own "
                    "app on the scenario, as `run` opens it in a terminal. Ctrl-C stops.",
        epilog=examples(
            "autograd-tui serve",
            "autograd-tui serve chain --param n=6",
            "autograd-tui serve multi-device --policy random --seed 3 --port 8080",
            "autograd-tui serve linear-relu --host 0.0.0.0    # the network, with a token",
            "autograd-tui serve --export-dir ~/class-exports  # exports land there"))
    p.add_argument("scenario", metavar="NAME|PATH", nargs="?", default=DEFAULT_SCENARIO,
                   help=f"a built-in scenario or a scenario file (default {DEFAULT_SCENARIO})")
    add_run_options(p)
    p.add_argument("--host", default="127.0.0.1",
                   help="the address to listen on (default 127.0.0.1: this machine only; "
                        "0.0.0.0 for every network interface)")
    p.add_argument("--port", type=int, default=8000, help="the port (default 8000)")
    p.add_argument("--allow-host", action="append", default=[], metavar="NAME",
                   help="a name browsers may reach the server by, besides its address "
                        "(repeatable; e.g. the machine's name on the class network)")
    p.add_argument("--token", default=None,
                   help="the token the link must carry (default: a new random one when "
                        "--host is not this machine only; none on 127.0.0.1)")
    p.add_argument("--no-token", action="store_true",
                   help="no token, even with --host 0.0.0.0 (anyone who can reach the "
                        "port gets an app)")
    p.add_argument("--max-clients", type=int, default=DEFAULT_MAX_CLIENTS, metavar="N",
                   help=f"apps (open tabs) at once; the next is refused with a message "
                        f"(default {DEFAULT_MAX_CLIENTS}; each takes about 65 MB)")
    p.add_argument("--follow", action="store_true",
                   help="the first browser to connect leads: every other one shows its "
                        "step as it happens (L in a follower: back to the leader)")
    p.add_argument("--export-dir", metavar="DIR", default=None,
                   help="exports (e) are written into this folder on the server; without "
                        "it they go to the viewer's browser as a download")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if not 1 <= args.port <= 65535:
        raise UsageError(f"--port {args.port}: a port is a number from 1 to 65535")
    if args.max_clients < 1:
        raise UsageError(f"--max-clients {args.max_clients}: at least 1")
    if args.token is not None and (args.no_token or not re.fullmatch(r"[A-Za-z0-9_-]{8,128}",
                                                                     args.token)):
        raise UsageError("--token: 8 to 128 letters, digits, '-' or '_' (and not with "
                         "--no-token)")
    name = check_run_args(args.scenario, args).name
    export_dir = _export_dir(args.export_dir)
    check_address(args.host, args.port)
    # Imported here: aiohttp and textual-serve are needed by this command only.
    from aiohttp.web_runner import GracefulExit

    from autograd_tui.app.web_export import EXPORT_DIR_VARIABLE
    from autograd_tui.commands.serve_apps import Follow, kill_left
    from autograd_tui.words import plain

    token = choose_token(args.host, args.token, args.no_token)
    guard = Guard(args.host, args.port, host_names(args.host, args.allow_host), token,
                  args.max_clients)
    url = f"http://{_url_host(args.host)}:{args.port}"
    if export_dir is not None:  # the apps read it (textual-serve passes the environment)
        os.environ[EXPORT_DIR_VARIABLE] = export_dir
    else:
        os.environ.pop(EXPORT_DIR_VARIABLE, None)
    folder = tempfile.mkdtemp(prefix="autograd-tui-follow-") if args.follow else None
    server = _server(app_command(args), args.host, args.port, url, plain(name), guard,
                     Follow(folder) if folder else None)
    try:
        server.serve()
    except OSError as e:  # lost the port between the check and the bind
        raise Failure(_address_error(args.host, args.port, e)) from None
    except GracefulExit:  # a second Ctrl-C while the first one waits for the apps
        pass
    finally:
        kill_left(server.apps)
        if folder:
            shutil.rmtree(folder, ignore_errors=True)
    say("stopped")
    return EXIT_OK


def app_command(args: argparse.Namespace) -> str:
    """The shell command that runs the app for one browser: ``run`` with the same
    scenario options, every word quoted (textual-serve runs it through the shell)."""
    source = args.scenario
    if os.path.exists(source) and (source.endswith(".py") or os.path.isfile(source)):
        source = os.path.abspath(source)  # the same file whatever the app's folder
    words = [sys.executable, "-m", "autograd_tui", "run", source,
             "--policy", args.policy, "--seed", str(args.seed)]
    for item in args.param:
        words += ["--param", item]
    for item in args.engine:
        words += ["--engine", item]
    return shlex.join(words)


def _export_dir(path: str | None) -> str | None:
    if path is None:
        return None
    folder = os.path.abspath(os.path.expanduser(path))
    if not os.path.isdir(folder):
        raise Failure(f"--export-dir {path}: not a folder (create it first)")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise Failure(f"--export-dir {path}: this user cannot write into it")
    return folder


def check_address(host: str, port: int) -> None:
    """Bind ``host:port`` once and let go, so that a port in use (or an address this
    machine does not have) is one message before the server prints anything."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM,
                                   flags=socket.AI_PASSIVE)
    except socket.gaierror as e:
        raise Failure(f"--host {host}: not an address of this machine ({e.strerror})") \
            from None
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as s:
        # as aiohttp binds: SO_REUSEADDR, so a port in TIME_WAIT is not taken for in use
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(address)
        except OSError as e:
            raise Failure(_address_error(host, port, e)) from None


def _address_error(host: str, port: int, e: OSError) -> str:
    if e.errno == errno.EADDRINUSE:
        return (f"port {port} on {host} is in use (another server, or another "
                f"`{PROG} serve`): choose another with --port")
    if e.errno == errno.EACCES:
        return f"port {port} on {host}: permission denied (ports below 1024 need root)"
    if e.errno == errno.EADDRNOTAVAIL:
        return f"--host {host}: not an address of this machine"
    return f"cannot listen on {host}:{port}: {e.strerror or e}"


def _url_host(host: str) -> str:
    """The host as a browser on this machine reaches it (IPv6 in brackets)."""
    if host in ("0.0.0.0", ""):
        return "127.0.0.1"
    if host == "::":
        return "[::1]"
    return f"[{host}]" if ":" in host else host


def _server(command: str, host: str, port: int, url: str, scenario: str,
            guard: Guard, follow: Any) -> Any:
    """textual-serve's Server, saying what it serves in our words rather than its banner,
    and ending the apps of open pages promptly on Ctrl-C."""
    import asyncio
    import logging

    from textual_serve.server import Server

    from autograd_tui.commands.serve_apps import OwnedApp, handle_websocket

    class _Server(Server):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            #: the open pages, each with the event its handler sets once its app ended
            self.sessions: dict[asyncio.Task[Any], asyncio.Event] = {}
            self.apps: set[OwnedApp] = set()  # each connection's app (serve_apps.py)
            guard.clients = lambda: len(self.sessions)

        async def _make_app(self) -> Any:
            app = await super()._make_app()
            app.middlewares.append(guard.middleware())
            return app

        async def handle_websocket(self, request: Any) -> Any:
            task, ended = asyncio.current_task(), asyncio.Event()
            assert task is not None
            self.sessions[task] = ended
            try:
                return await handle_websocket(self, request, follow, self.apps)
            finally:
                del self.sessions[task]
                ended.set()

        async def on_shutdown(self, app: Any) -> None:
            # Ctrl-C with pages open: aiohttp would wait up to a minute for their handlers
            # to end by themselves.  Cancelled, textual-serve's handler closes the page's
            # websocket and asks its app to quit, and waits for it (bounded here).
            waits = [asyncio.ensure_future(ended.wait()) for ended in self.sessions.values()]
            for task in list(self.sessions):
                task.cancel()
            if waits:
                _, pending = await asyncio.wait(waits, timeout=SHUTDOWN_WAIT)
                for w in pending:
                    w.cancel()

        async def handle_index(self, request: Any) -> Any:
            # The page tells the browser where the app's websocket is: at the address the
            # browser used (a student's laptop reaches --host 0.0.0.0 by the server's
            # name, not by 127.0.0.1).  Nothing is awaited between setting it and its use.
            host = request.host
            self.public_url = f"http://{host}" if _HOST_HEADER.fullmatch(host) else url
            return await super().handle_index(request)

        def initialize_logging(self) -> None:
            super().initialize_logging()
            # aiohttp logs every request (each script and font of each tab): noise on a
            # projector.  textual-serve's own warnings (an app that failed to start) stay.
            logging.getLogger("aiohttp.access").setLevel(logging.WARNING)

        async def on_startup(self, app: Any) -> None:
            link = f"{url}/?token={guard.token}" if guard.token else url
            print(f"{PROG}: serving the app on {scenario} at {link}\n"
                  f"{PROG}: open it in a browser (each tab is its own run); "
                  "Ctrl-C stops", flush=True)

    return _Server(command, host=host, port=port, title=f"{PROG}: {scenario}",
                   public_url=url)
