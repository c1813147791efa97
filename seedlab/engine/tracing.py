"""Traced denoiser calls on a CPU: the same kernels as eager PyTorch, with less Python per step.

A small model's denoising step on a CPU is bound by Python, not arithmetic: every one of the UNet's
few hundred module calls costs interpreter time, which a batched call pays once for all its images
and SeedLab's exact batch-1 calls pay per image (embedded model, one thread: 32.6 ms per batch-2
call eager, 25 ms traced). `torch.jit.trace` records the aten operations one eager call runs;
replaying them runs the same kernels on the same tensors in the same order, so the pixels are
identical (tests compare against plain diffusers bit for bit, on every scheduler they cover).

A trace holds only the shapes and Python branches it saw, so one is made per input signature
(shapes and dtypes of the latents, timestep and prompt embeddings). Calls a trace cannot stand for
(extra conditioning, a training-mode module, autograd, another device) run eagerly, as before. On
a GPU nothing is traced: its graph executor may fuse kernels, which can change low bits.

torch 2.13 marks `torch.jit.trace` deprecated in favour of torch.compile and torch.export. Measured
on the embedded model (one thread, batch-2 UNet call): eager 14.0 ms, torch.compile with the
"eager" backend (no fusion, so the same pixels) 11.6 ms after 3.6 s of compiling, a trace 9.1 ms
after 0.1 s. The trace stays while torch keeps it (torch is pinned); if tracing ever fails, the
UNet runs eagerly, as before, with the same pixels.

A trace is never given back: `torch.jit.trace` registers the traced function in torch's process-wide
compilation unit, which keeps its graph after every reference is dropped (14 to 17 MB a signature on the
embedded model; 100 one-step grids at new sizes took a server from 1.1 to 2.8 GB). So a process makes at most
MAX_TRACES traces, for the first signatures it meets, and keeps them all; any other call runs eagerly (the
same pixels, ~30% slower on the embedded model). The server's usual requests (its default size, with and
without CFG) are the first it meets.
"""

from __future__ import annotations

import threading
import warnings

import torch

MAX_TRACES = 8  # traces a process ever makes (a size, CFG on/off, a timestep dtype each): never freed, so never more
_made = 0  # traces made in this process, every TracedUNet together
_made_lock = threading.Lock()


def _claim_trace() -> bool:
    """Take one of the process's MAX_TRACES; False when all are taken (the call then runs eagerly)."""
    global _made
    with _made_lock:
        if _made >= MAX_TRACES:
            return False
        _made += 1
        return True


class TracedUNet:
    """Stands in for a pipeline's UNet: plain calls replay a trace, anything else runs the UNet itself."""

    def __init__(self, unet: torch.nn.Module):
        self.unet = unet
        self._traces: dict[tuple, torch.jit.ScriptFunction] = {}
        self._lock = threading.Lock()
        self._failed = False  # tracing failed once (a model it cannot follow): every call runs eagerly

    def __getattr__(self, name: str):
        return getattr(self.unet, name)  # config, dtype, device, ...: the UNet's own

    def __call__(self, sample, timestep, encoder_hidden_states=None, *args, return_dict: bool = True, **extra):
        eager = args or return_dict or self._failed or not self._traceable(sample, timestep, encoder_hidden_states,
                                                                            extra)
        trace = None if eager else self._trace(sample, timestep, encoder_hidden_states)
        if trace is None:
            return self.unet(sample, timestep, encoder_hidden_states, *args, return_dict=return_dict, **extra)
        # Replayed as recorded: no graph optimisation passes (they may fuse or reorder operations).
        # The switch is per thread, so other threads' TorchScript is untouched.
        with torch.jit.optimized_execution(False):
            return (trace(sample, timestep, encoder_hidden_states),)

    def _traceable(self, sample, timestep, encoder_hidden_states, extra: dict) -> bool:
        """A plain inference call on a CPU, with tensors for every input and no extra conditioning."""
        tensors = (sample, timestep, encoder_hidden_states)
        return (all(isinstance(t, torch.Tensor) and t.device.type == "cpu" for t in tensors)
                and timestep.ndim <= 1 and torch.is_inference_mode_enabled() and not self.unet.training
                and all(value is None for value in extra.values()))

    def _trace(self, sample, timestep, encoder_hidden_states) -> torch.jit.ScriptFunction | None:
        key = tuple((tuple(t.shape), t.dtype) for t in (sample, timestep, encoder_hidden_states))
        with self._lock:
            trace = self._traces.get(key)
            if trace is None:
                if not _claim_trace():  # all taken for good: evicting one would free nothing
                    return None
                self.unet.requires_grad_(False)  # a trace keeps the weights as constants (shared, not copied)
                with warnings.catch_warnings():  # "might not generalize to other inputs": hence one per signature
                    warnings.simplefilter("ignore", torch.jit.TracerWarning)
                    warnings.simplefilter("ignore", DeprecationWarning)  # see the module's docstring
                    try:
                        with torch.jit.optimized_execution(False):
                            trace = torch.jit.trace(self._eager, (sample, timestep, encoder_hidden_states),
                                                    check_trace=False)
                    except Exception:  # noqa: BLE001 - a model the tracer cannot follow still runs, eagerly
                        self._failed = True
                        return None
                self._traces[key] = trace
        return trace

    def _eager(self, sample, timestep, encoder_hidden_states):
        return self.unet(sample, timestep, encoder_hidden_states, return_dict=False)[0]
