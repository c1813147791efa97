"""A per-visitor cap on requests waiting in Gradio's queue.

Gradio turns requests away only when its whole queue is full (`queue_size`), so one visitor posting 33 requests
filled it: every other visitor got HTTP 503, and half an hour of work waited, charged only as each started. Here
the queue's `push` first counts the visitor's requests still waiting (not the one running); past
`visitor_queued` (SEEDLAB_VISITOR_QUEUED) the new one is refused at once with a message, before it is queued.
The visitor is found as the handlers find it (webui/requests.py: the client's address, an MCP caller's stamp).
"""

from __future__ import annotations

from typing import Any

from webui.uploads import stamped_peer
from webui.visitors import client_address


def request_visitor(request: Any) -> str:
    """Who sent a queued request (a starlette Request): as webui.requests.visitor finds it."""
    headers = {key.lower(): value for key, value in dict(getattr(request, "headers", None) or {}).items()}
    host = getattr(getattr(request, "client", None), "host", None)
    return stamped_peer(headers) or client_address(headers, host) or "unknown"


def waiting(queue: Any, visitor: str) -> int:
    """How many of `visitor`'s requests wait in Gradio's queue (every concurrency group)."""
    return sum(1 for group in queue.event_queue_per_concurrency_id.values() for event in group.queue
               if request_visitor(event.request) == visitor)


def cap_queued(demo: Any, per_visitor: int) -> None:
    """Wrap the Blocks' queue so that a visitor with `per_visitor` requests waiting is refused the next one."""
    queue = demo._queue  # Gradio's Queue (pinned gradio): its push is what /queue/join calls
    push = queue.push

    async def push_within_share(body, request, username):
        visitor = request_visitor(request)
        if waiting(queue, visitor) >= per_visitor:
            return (False, f"too many requests waiting: each visitor may have {per_visitor} in the queue; wait for "
                           "yours to finish", "error")
        return await push(body, request, username)

    queue.push = push_within_share
