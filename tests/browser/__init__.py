"""Tests that drive the real page (`python app.py`) in a headless Chromium, and the helpers they share: pages.py
(open a page, wait for its images and boxes) and settle.py (wait until a page's chained events have finished)."""
