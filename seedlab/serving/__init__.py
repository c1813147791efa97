"""Serving policy: what a server accepts and how it checks a reproduction.

What a request may ask for (admission, limits), what it costs (budget) and whether a regenerated
image matches its original (reproduction). Shared by the app, its API and the CLI. May import the
engine, files and scale (a reproduction retried under another CPU baseline runs in a worker process).
"""
