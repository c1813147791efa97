"""Request hygiene: Gradio stores any upload (up to max_file_size) before an event asks for it, so each
visitor gets a bounded number of uploads and bytes per window, refused with HTTP 429 beyond that; a
link too long to be one of SeedLab's gets SeedLab's message (Gradio's page answered it with a bare HTTP 500);
and an MCP caller is known by its own connection, not by headers it writes (PeerStamp)."""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from collections.abc import Callable
from html import escape

from seedlab.files.links import MAX_QUERY_CHARS
from seedlab.serving.budget import WINDOW_SECONDS, Window
from webui.visitors import client_address, proxy_hops  # as before: who a request comes from

LOOPBACK = ("127.0.0.1", "::1", "localhost")

PEER_HEADER = "x-seedlab-peer"  # "ADDRESS;SIGNATURE": who called /gradio_api/mcp, stamped by PeerStamp
_SECRET = secrets.token_bytes(32)  # per process: a stamp cannot be forged or carried to another server


def _signature(address: str) -> str:
    return hmac.new(_SECRET, address.encode(), hashlib.sha256).hexdigest()


def stamped_peer(headers: dict[str, str]) -> str | None:
    """The MCP caller's address that PeerStamp wrote into these headers; None if there is none or it is forged."""
    address, _, signature = headers.get(PEER_HEADER, "").rpartition(";")
    return address if address and hmac.compare_digest(signature, _signature(address)) else None


class PeerStamp:
    """ASGI middleware: an MCP tool call is charged to the caller's own connection.

    Gradio's MCP server runs a tool through a loopback call from 127.0.0.1 with the caller's headers copied, and
    uvicorn believes X-Forwarded-For from 127.0.0.1, so the caller could name any visitor (and all callers would
    be one without it). Each request to /gradio_api/mcp gets the address it really came from (client_address:
    the peer, or a Space proxy's entry) stamped and signed in PEER_HEADER, which the loopback call carries; a
    stamp anyone else sends is removed.
    """

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http":
            headers = [(key, value) for key, value in scope["headers"]]
            plain = {key.decode("latin-1").lower(): value.decode("latin-1") for key, value in headers}
            kept = [(key, value) for key, value in headers if key.decode("latin-1").lower() != PEER_HEADER
                    or stamped_peer(plain) is not None]
            if "/mcp" in scope.get("path", ""):
                address = client_address(plain, (scope.get("client") or (None,))[0]) or "unknown"
                kept = [(key, value) for key, value in kept if key.decode("latin-1").lower() != PEER_HEADER]
                kept.append((PEER_HEADER.encode(), f"{address};{_signature(address)}".encode("latin-1")))
            if kept != headers:
                scope = {**scope, "headers": kept}
        await self.app(scope, receive, send)


class LinkGuard:
    """ASGI middleware: a page or file request whose query string is longer than any SeedLab link gets HTTP 414
    with SeedLab's message and a way back to the page, before Gradio parses it."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        query = scope.get("query_string", b"") if scope["type"] == "http" else b""
        if len(query) > MAX_QUERY_CHARS:
            text = (f"link: the query string must be at most {MAX_QUERY_CHARS:,} characters, got {len(query):,}. "
                    "A SeedLab link is never this long: this one was altered, or joined with other text.")
            body = (f"<!doctype html><title>SeedLab: link too long</title><p>{escape(text)}</p>"
                    f'<p><a href="{escape(scope.get("root_path", "") or "")}/">Open SeedLab without it</a></p>')
            await send({"type": "http.response.start", "status": 414,
                        "headers": [(b"content-type", b"text/html; charset=utf-8")]})
            await send({"type": "http.response.body", "body": body.encode()})
            return
        await self.app(scope, receive, send)


class UploadGuard:
    """ASGI middleware: at most `max_uploads` uploads and `max_bytes` per visitor in any WINDOW_SECONDS.

    `local_free`: a visitor on this machine itself (a loopback address, no proxy in front) is not counted: a share per
    visitor is for a public server, and the one person at a local run drops as many files as they like."""

    def __init__(self, app, max_uploads: int = 20, max_bytes: int = 32 * 2**20,
                 clock: Callable[[], float] = time.monotonic, local_free: bool = False):
        self.app, self.max_uploads, self.max_bytes, self.local_free = app, max_uploads, max_bytes, local_free
        self.window = Window(clock)

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http" and scope["method"] == "POST" and scope["path"].rstrip("/").endswith("/upload"):
            headers = {key.decode("latin-1").lower(): value.decode("latin-1") for key, value in scope["headers"]}
            peer = (scope.get("client") or (None,))[0]
            if self.local_free and proxy_hops() == 0 and peer in LOOPBACK:
                return await self.app(scope, receive, send)
            if headers.get("content-length", "").isdigit():
                size = int(headers["content-length"])
            else:  # chunked: no size said up front, so the body is read here (up to the share) and counted
                body = await self._read_body(receive)
                if body is None:
                    return await _refuse(send, 413, f"an upload without Content-Length may be at most "
                                                    f"{self.max_bytes // 2**20} MB")
                size, receive = len(body), _replay(body)
            refusal = self.admit(client_address(headers, peer) or "unknown", size)
            if refusal:
                return await _refuse(send, 429, refusal)
        await self.app(scope, receive, send)

    async def _read_body(self, receive) -> bytes | None:
        """The whole request body, or None past max_bytes (or when the client went away)."""
        body = bytearray()
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return None
            body += message.get("body", b"")
            if len(body) > self.max_bytes:
                return None
            if not message.get("more_body", False):
                return bytes(body)

    def admit(self, visitor: str, size: int) -> str | None:
        """None when this upload is within the visitor's share, else the refusal's text."""
        fits = lambda count, used: count < self.max_uploads and used + size <= self.max_bytes
        if self.window.take(visitor, size, fits) is None:
            return None
        size = f"{self.max_bytes // 2**20} MB" if self.max_bytes >= 2**20 else f"{self.max_bytes:,} bytes"
        return (f"Too many files dropped: this server takes {self.max_uploads} files ({size}) "
                f"from each visitor in {WINDOW_SECONDS // 60} minutes. Wait a few minutes, then drop the file again.")


async def _refuse(send, status: int, text: str) -> None:
    """Plain text: the page shows the body as it is ("HTTP 429: Too many files dropped: ..."), JSON and all."""
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"text/plain; charset=utf-8"), (b"retry-after", b"60")]})
    await send({"type": "http.response.body", "body": text.encode()})


def _replay(body: bytes):
    """An ASGI receive that hands the app a body already read, then waits as the server's would."""
    sent = False

    async def receive():
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return {"type": "http.disconnect"}

    return receive
