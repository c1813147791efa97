"""Exploration: plots over any recipe field and seed travel.

A1111's X/Y/Z plot (plot), seed to seed through the variation strength (travel), recipes made into
PNG files in process or on workers (render) and the plot's self-contained HTML page (viewer). May
import every layer below it: the engine, files, serving and scale.
"""
