"""Scale: many images at once with the same pixels as one.

Worker processes (pool, workers), Ray actors (cluster) and seed sweeps with their resumable
manifest (sweep, manifest). May import the engine and files.
"""
