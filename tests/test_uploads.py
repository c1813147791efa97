"""Upload hygiene: each visitor's uploads are bounded per window, on the real server's upload route."""

import httpx
import pytest

from tests.conftest import AppServer
from tests.helpers import Clock
from webui.uploads import WINDOW_SECONDS, UploadGuard, client_address


def test_the_guard_counts_uploads_and_bytes_per_visitor_in_a_window():
    clock = Clock()
    guard = UploadGuard(app=None, max_uploads=3, max_bytes=1000, clock=clock)
    assert [guard.admit("a", 10) for _ in range(3)] == [None] * 3
    assert "this server takes 3 files (1,000 bytes) from each visitor in 10 minutes" in guard.admit("a", 10)
    assert guard.admit("b", 10) is None  # another visitor
    assert guard.admit("c", 2000) is not None  # too many bytes at once
    clock.now += WINDOW_SECONDS + 1
    assert guard.admit("a", 10) is None  # the window moved on


def test_only_a_spaces_proxy_is_trusted_to_name_the_client(monkeypatch):
    headers = {"x-forwarded-for": "6.6.6.6, 10.1.2.3"}
    monkeypatch.delenv("SPACE_ID", raising=False)
    assert client_address(headers, "127.0.0.1") == "127.0.0.1"  # a client may write any X-Forwarded-For itself
    monkeypatch.setenv("SPACE_ID", "someone/seedlab")
    assert client_address(headers, "10.0.0.1") == "10.1.2.3"  # the entry the Space's proxy appended


@pytest.fixture(scope="module")
def strict_server(app_model, tmp_path_factory):
    server = AppServer(app_model, tmp_path_factory.mktemp("uploads"), {"SEEDLAB_VISITOR_UPLOADS": "3"})
    server.start()
    try:
        yield server
    finally:
        server.stop()


def test_the_upload_route_refuses_a_visitor_past_the_limit_and_keeps_serving(strict_server):
    statuses = []
    for index in range(5):
        response = httpx.post(f"{strict_server.url}/gradio_api/upload",
                              files={"files": (f"junk{index}.png", b"not an image" * 100)}, timeout=30)
        statuses.append(response.status_code)
    assert statuses == [200, 200, 200, 429, 429]
    assert response.text.startswith("Too many files dropped: this server takes 3 files")
    assert "SEEDLAB_" not in response.text and "{" not in response.text, "a person's words, not JSON"
    assert httpx.get(f"{strict_server.url}/gradio_api/info", timeout=30).status_code == 200


def test_an_upload_without_content_length_is_counted_by_its_body(strict_server):
    """A chunked upload says no size up front: its bytes count all the same, and one past the share is refused."""
    def chunked(data: bytes):
        yield from (data[start:start + 4096] for start in range(0, len(data), 4096))

    boundary = "seedlab-test"
    body = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"files\"; filename=\"big.png\"\r\n"
            "Content-Type: application/octet-stream\r\n\r\n").encode() + b"x" * (33 * 2**20) + \
        f"\r\n--{boundary}--\r\n".encode()
    response = httpx.post(f"{strict_server.url}/gradio_api/upload", content=chunked(body), timeout=60,
                          headers={"content-type": f"multipart/form-data; boundary={boundary}"})
    assert response.status_code == 413 and "without Content-Length" in response.text
    assert httpx.get(f"{strict_server.url}/gradio_api/info", timeout=30).status_code == 200


def test_a_chunked_uploads_bytes_count_and_reach_the_app_whole():
    import asyncio

    received, statuses = [], []

    async def app(scope, receive, send):
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        received.append(body)
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})

    async def post(guard, parts):
        messages = [{"type": "http.request", "body": part, "more_body": k < len(parts) - 1}
                    for k, part in enumerate(parts)]

        async def receive():
            return messages.pop(0)

        async def send(message):
            if message["type"] == "http.response.start":
                statuses.append(message["status"])

        scope = {"type": "http", "method": "POST", "path": "/gradio_api/upload", "headers": [],
                 "client": ("127.0.0.1", 5)}
        await guard(scope, receive, send)

    guard = UploadGuard(app, max_uploads=10, max_bytes=1000)
    asyncio.run(post(guard, [b"a" * 300, b"b" * 300]))  # 600 bytes in two chunks, no Content-Length
    asyncio.run(post(guard, [b"c" * 600]))  # 1,200 bytes in all: past the visitor's share
    asyncio.run(post(guard, [b"d" * 700, b"e" * 400]))  # one upload past max_bytes on its own
    assert statuses == [200, 429, 413]
    assert received == [b"a" * 300 + b"b" * 300]


def test_a_link_longer_than_any_seedlab_link_gets_seedlabs_message_and_the_server_keeps_serving(strict_server):
    """Gradio's page answered a query past ~65 KB with a bare HTTP 500; httpx refuses to send such URLs, so the
    request line is written on a socket."""
    import socket

    from seedlab.files.links import MAX_QUERY_CHARS

    port = int(strict_server.url.rsplit(":", 1)[1])
    for length in (MAX_QUERY_CHARS + 1, 70_000):
        with socket.create_connection(("127.0.0.1", port), timeout=30) as connection:
            connection.sendall(f"GET /?prompt={'a' * length}&seed=1 HTTP/1.1\r\nHost: x\r\nConnection: close"
                               "\r\n\r\n".encode())
            answer = b""
            while chunk := connection.recv(65536):
                answer += chunk
        head, _, body = answer.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 414"), head[:80]
        assert f"at most {MAX_QUERY_CHARS:,} characters".encode() in body and b"Open SeedLab without it" in body
    response = httpx.get(f"{strict_server.url}/?prompt=a%20cat&seed=1", timeout=30)  # a real link still opens
    assert response.status_code == 200


def test_an_mcp_caller_is_known_by_its_connection_not_by_headers_it_writes():
    """Gradio's MCP loopback call comes from 127.0.0.1 with the caller's headers, and uvicorn believes
    X-Forwarded-For from there: without the stamp an MCP caller picked its visitor with one header."""
    import asyncio
    from types import SimpleNamespace

    from webui.requests import visitor
    from webui.uploads import PEER_HEADER, PeerStamp, stamped_peer

    seen = []

    async def app(scope, receive, send):
        seen.append({key.decode(): value.decode() for key, value in scope["headers"]})

    def call(path: str, peer: str, headers: dict) -> dict:
        scope = {"type": "http", "path": path, "client": (peer, 5000),
                 "headers": [(key.encode(), value.encode()) for key, value in headers.items()]}
        asyncio.run(PeerStamp(app)(scope, None, None))
        return seen[-1]

    def request(headers: dict, host: str):
        return SimpleNamespace(headers=headers, client=SimpleNamespace(host=host), session_hash="session")

    forged = {PEER_HEADER: "6.6.6.6;" + "0" * 64, "x-forwarded-for": "6.6.6.6"}
    stamped = call("/gradio_api/mcp/", "203.0.113.9", forged)  # the MCP request: stamped with its own address
    assert stamped_peer(stamped) == "203.0.113.9"
    loopback = call("/gradio_api/queue/join", "127.0.0.1", {**stamped, "x-forwarded-for": "7.7.7.7"})
    assert visitor(request(loopback, "7.7.7.7")) == "203.0.113.9"  # charged to the caller, not to 7.7.7.7
    direct = call("/gradio_api/queue/join", "198.51.100.7", forged)  # a stamp written by hand is removed
    assert PEER_HEADER not in direct and visitor(request(direct, "198.51.100.7")) == "198.51.100.7"
    assert visitor(request(forged, "198.51.100.7")) == "198.51.100.7"  # and never believed


def test_a_visitor_on_this_machine_is_not_counted_on_a_local_run(monkeypatch):
    """A local run's one person (a loopback address, no proxy in front) drops as many files as they like; a visitor
    from elsewhere, or any visitor behind a Space's proxy, keeps the share."""
    import asyncio

    statuses = []

    async def app(scope, receive, send):
        await send({"type": "http.response.start", "status": 200, "headers": []})

    async def post(guard, client: str):
        async def send(message):
            if message["type"] == "http.response.start":
                statuses.append(message["status"])

        scope = {"type": "http", "method": "POST", "path": "/gradio_api/upload", "client": (client, 5),
                 "headers": [(b"content-length", b"10")]}
        await guard(scope, None, send)

    monkeypatch.delenv("SPACE_ID", raising=False)
    monkeypatch.delenv("SEEDLAB_PROXY_HOPS", raising=False)
    guard = UploadGuard(app, max_uploads=2, local_free=True)
    for client in ["127.0.0.1"] * 5 + ["192.0.2.7"] * 3:
        asyncio.run(post(guard, client))
    assert statuses == [200] * 5 + [200, 200, 429]
    monkeypatch.setenv("SPACE_ID", "someone/seedlab")  # behind the Space's proxy every peer is the proxy
    statuses.clear()
    for _ in range(3):
        asyncio.run(post(guard, "127.0.0.1"))
    assert statuses == [200, 200, 429]
