"""Generation on Hugging Face ZeroGPU: GPU work must run inside a function decorated with spaces.GPU."""

from __future__ import annotations

from seedlab import stream

try:  # Hugging Face ZeroGPU: GPU work must run inside a function decorated with spaces.GPU
    import spaces
except ImportError:
    spaces = None


def on_gpu(function):
    """`function` wrapped by spaces.GPU on a ZeroGPU Space; unchanged anywhere else."""
    return spaces.GPU(duration=120)(function) if spaces is not None else function


# Every generation is a stream of per-step events. On ZeroGPU the cancel event cannot reach the GPU
# process, so a Stop takes effect at the next image.
stream_on_gpu = on_gpu(stream)
