"""UNet training checkpoints: weights, EMA and optimizer state, written atomically and restored to resume."""

from __future__ import annotations

from pathlib import Path

import torch


def save_checkpoint(folder: Path, params, ema, optimizer, step: int) -> None:
    """Write weights, EMA and optimizer state atomically (tmp file then rename)."""
    folder.mkdir(parents=True, exist_ok=True)
    state = {"step": step, "params": [p.detach() for p in params], "ema": ema, "optimizer": optimizer.state_dict()}
    torch.save(state, folder / "state.tmp")
    (folder / "state.tmp").replace(folder / "state.pt")


def load_checkpoint(folder: Path, params, ema, optimizer) -> int:
    """Restore a checkpoint if there is one; return the step to resume from."""
    if not (folder / "state.pt").exists():
        return 0
    state = torch.load(folder / "state.pt")
    with torch.no_grad():
        for p, saved in zip(params, state["params"]):
            p.copy_(saved)
        for e, saved in zip(ema, state["ema"]):
            e.copy_(saved)
    optimizer.load_state_dict(state["optimizer"])
    return state["step"]


def load_ema(params, ema) -> None:
    """Copy the EMA weights into the live model (what we ship)."""
    with torch.no_grad():
        for p, e in zip(params, ema):
            p.copy_(e)
