"""What a request tells the app: where links should point, who is asking, and a link in the page's address."""

from __future__ import annotations

import os
from urllib.parse import urlsplit

import gradio as gr

from seedlab.files.links import DEFAULT_BASE_URL, encode_query
from seedlab.files.links import KEYS as LINK_KEYS
from webui.uploads import stamped_peer
from webui.visitors import client_address


def base_url(request: gr.Request | None) -> str:
    """Where links point: SEEDLAB_BASE_URL, else the page the browser is on, else the address it called."""
    configured = os.environ.get("SEEDLAB_BASE_URL", "").strip()
    if configured:
        return configured
    headers = {key.lower(): value for key, value in dict(getattr(request, "headers", None) or {}).items()}
    referer = headers.get("referer", "")
    if referer.startswith(("http://", "https://")):  # the page itself (Gradio's API calls live under it)
        return referer.split("#")[0].split("?")[0]
    url = urlsplit(str(getattr(request, "url", "") or ""))
    if url.scheme in ("http", "https") and url.netloc:
        scheme = headers.get("x-forwarded-proto", url.scheme).split(",")[0].strip()
        host = headers.get("x-forwarded-host", url.netloc).split(",")[0].strip()
        return f"{scheme}://{host}/"
    return DEFAULT_BASE_URL


def visitor(request: gr.Request | None) -> str | None:
    """Who is charged for a request: the client's address (a new API session is the same visitor); an MCP tool
    call's own caller, as PeerStamp signed it (its loopback call comes from 127.0.0.1 with headers it chose)."""
    headers = {key.lower(): value for key, value in dict(getattr(request, "headers", None) or {}).items()}
    host = getattr(getattr(request, "client", None), "host", None)
    return stamped_peer(headers) or client_address(headers, host) or getattr(request, "session_hash", None)


def link_query(request: gr.Request | None) -> str | None:
    """The page's query string when it carries a link (Gradio passes the page's query to every event)."""
    params = getattr(request, "query_params", None) or {}
    items = params.multi_items() if hasattr(params, "multi_items") else list(dict(params).items())
    items = [(key, value) for key, value in items if not key.startswith("__") and key != "view"]  # Gradio's own
    if not {"v", "fp", *LINK_KEYS} & {key for key, _ in items}:
        return None
    return encode_query(items)
