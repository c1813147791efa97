"""SeedLab's version: recorded in every image's environment and PNG text, so it depends on nothing."""

__version__ = "0.1.0"
