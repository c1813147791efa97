"""Other tools' code re-created from their sources (A1111, ComfyUI, stable-diffusion.cpp, Apple's Core ML, the
LDM checkpoint layout), driven as each tool drives it: the oracles SeedLab's tests compare pixels with."""
