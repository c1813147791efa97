"""Who a visitor is: the address a request came from, behind a Space's proxy the one that proxy saw.

One visitor is one budget, one upload allowance and one share of the queue, so the address must be one a
client cannot choose:
- A client can write any `X-Forwarded-For` itself; each proxy in front of the app appends the address it saw.
  So only the last `hops` entries are proxies' observations, and the client is the entry `hops` from the end.
  On a Hugging Face Space (`SPACE_ID` set) that is one proxy; elsewhere none is trusted unless the host says how
  many stand in front (`SEEDLAB_PROXY_HOPS`). A header with fewer entries than hops names nobody: the peer is used.
- An IPv6 client holds a whole /64 (2**64 addresses to rotate through), so it is known by its /64; an
  IPv4-mapped IPv6 address is its IPv4 address. A port a proxy writes after the address ("[2001:db8::1]:443",
  "203.0.113.9:443") names no other visitor.
"""

from __future__ import annotations

import ipaddress
import os

HOPS_VAR = "SEEDLAB_PROXY_HOPS"
MAX_HOPS = 8


def proxy_hops() -> int:
    """How many proxies in front of the app append to X-Forwarded-For: SEEDLAB_PROXY_HOPS, else 1 on a Space."""
    text = os.environ.get(HOPS_VAR, "").strip()
    if not text:
        return 1 if os.environ.get("SPACE_ID") else 0
    if not text.isdigit() or int(text) > MAX_HOPS:
        raise ValueError(f"{HOPS_VAR} must be a whole number from 0 to {MAX_HOPS} (the proxies in front of the app), "
                         f"got {text[:20]!r}")
    return int(text)


def visitor_key(address: str | None) -> str | None:
    """An address as one visitor: IPv6 by its /64, IPv4-mapped IPv6 as IPv4; anything else as written (capped)."""
    if not address:
        return address
    text = address.strip()
    if text.startswith("["):  # "[2001:db8::1]:443", as proxies write an IPv6 address with its port
        text = text[1:].partition("]")[0]
    elif text.count(":") == 1:  # "203.0.113.9:443": an IPv4 address with its port
        text = text.partition(":")[0]
    try:
        ip = ipaddress.ip_address(text.split("%")[0])  # a zone index (fe80::1%eth0) names no other host
    except ValueError:
        return text[:64]
    if ip.version == 6 and ip.ipv4_mapped is not None:
        return str(ip.ipv4_mapped)
    if ip.version == 6:
        return str(ipaddress.ip_network(f"{ip}/64", strict=False))
    return str(ip)


def client_address(headers: dict[str, str], peer: str | None) -> str | None:
    """Who a request comes from (lower-case header names): the peer, or the address the outermost trusted proxy
    saw; as a visitor key (IPv6 by /64)."""
    hops = proxy_hops()
    entries = [entry.strip() for entry in headers.get("x-forwarded-for", "").split(",") if entry.strip()]
    if hops and len(entries) >= hops:
        return visitor_key(entries[-hops])
    return visitor_key(peer)
