"""SeedLab's Gradio front end: controls derived from the recipe's fields, handlers, files. Not imported by seedlab/."""
