"""Files and links: what SeedLab writes and what it reads from other tools.

SeedLab's PNG text and links (metadata, links), A1111 infotext (infotext), ComfyUI graphs (comfyui),
the JSON of InvokeAI, Fooocus, SwarmUI, NovelAI and others (formats), metadata hidden in pixels
(stealth), contact sheets (sheets) and `seedlab info` (info). May import the engine only.
"""
