"""The engine: making pixels from a recipe, exactly.

The recipe and its fields (recipe, seeds), the starting noise (noise, philox), the pipelines
(models, tracing, embeddings), the generation itself (generation) and what makes it repeatable
(determinism, cpu, environment, version). The bottom layer: it imports no other part of seedlab.
Importing this package imports nothing, so the CPU baseline (cpu.py) can be set before torch computes.
"""
