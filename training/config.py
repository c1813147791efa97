"""Training configurations: TrainConfig, the named configs (the shipped one among them) and the LR schedule."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from training.models import ModelConfig


@dataclass(frozen=True)
class TrainConfig:
    """Everything a run depends on; saved next to its outputs. Frozen: derive variants with dataclasses.replace."""

    seed: int = 0
    # What the model learns: "shapes", the embedded model's world (training/shapes.py, training/latent.py), or
    # "scenes", embedded-v2's (training/scene.py, training/scene_latent.py: styles, size words, last word wins).
    world: str = "shapes"
    model: ModelConfig = field(default_factory=ModelConfig)
    # VAE stage
    vae_steps: int = 1500
    vae_batch: int = 16
    vae_lr: float = 1e-3
    # The decoder learns from noisy codes, so the UNet's slightly-off codes still decode to flat
    # colours and clean edges: per image a standard deviation uniform in [0, code_noise), the
    # same on all 14 channels, Gaussian noise independent per pixel. The encoder sees clean images.
    code_noise: float = 0.3
    # decoder stage (encoder untouched): sharp outlines (edge_weight) and flat colours from UNet codes
    decoder_steps: int = 2000
    decoder_lr: float = 5e-4
    edge_weight: float = 10.0  # loss weight of pixels within 2 px of a shape's outline (star points, corners)
    # Per-pixel Gaussian noise as in the VAE stage, one uniform u in [0, 1) per image, but scaled
    # per channel group: std u * decoder_code_noise on the 4 layout channels (less than code_noise,
    # for sharp small shapes) and u * decoder_constant_noise on the 10 constant ones (kind,
    # colours; more than code_noise: the UNet's constants wobble over space, and a decoder that
    # averages them keeps backgrounds flat).
    decoder_code_noise: float = 0.1
    decoder_constant_noise: float = 0.5
    # UNet stage
    unet_steps: int = 1200
    # Steps where an earlier, shorter run stopped and was resumed with a larger unet_steps; each
    # step's learning rate follows the cosine of the segment it falls in (see unet_lr_scale).
    # The shipped weights had one such resume, at 1,200 (CONFIGS["shipped"]).
    unet_resumed_at: tuple[int, ...] = ()
    batch: int = 64
    lr: float = 6e-4
    warmup_steps: int = 100
    min_lr_ratio: float = 0.05
    weight_decay: float = 0.01
    ema_decay: float = 0.999
    caption_dropout: float = 0.1  # empty captions teach the unconditional branch for CFG
    min_snr_gamma: float = 5.0
    beta_schedule: str = "scaled_linear"
    beta_start: float = 0.00085
    beta_end: float = 0.012
    # Offset noise: the last step keeps sqrt(alpha_bar) = 0.07 of the image, as strong at 16x16 as
    # the noise's own per-channel mean (std 1/16), so without it the model read the background
    # colour from the seed and followed "on a blue background" only ~45% of the time (measured with
    # the earlier learned 4-channel latent). A random per-channel constant in the training noise
    # makes that mean uninformative.
    offset_noise: float = 0.25
    # Paired batches from step consistency_from on: each scene beside a variation of it on the same layout (its
    # prompt with a word appended, another caption, or no caption, the guidance's unconditional branch), with
    # the same noise and timestep, and a loss of layout_consistency times the squared difference of the two
    # predictions of the clean layout channels, so that no word moves the seed's composition. Measured on the
    # first v2 run at t = 999: 0.03-0.045 (about 0.2 of the layout's [-1, 1] range), against ~0.001 at t = 200.
    # 0 turns it off (batches as before).
    layout_consistency: float = 0.0
    consistency_from: int = 0
    checkpoint_every: int = 100
    log_every: int = 25
    # One intra-op thread: on this shared 2-core machine two OpenMP threads spent most of each step
    # waiting at barriers (gdb) and ran 2-10 s/step instead of 0.6; one thread is a steady ~1.1 s/step.
    threads: int = 1

    def __post_init__(self):
        """Refuse resume points outside the run (each must fall inside the step range after it), and unknown worlds."""
        if self.world not in ("shapes", "scenes"):
            raise ValueError(f"world must be 'shapes' or 'scenes', got {self.world!r}")
        ends = (*self.unet_resumed_at, self.unet_steps)
        if any(a <= 0 or a >= b for a, b in zip(ends, ends[1:])):
            raise ValueError(
                f"unet_resumed_at must be increasing steps between 1 and unet_steps - 1 ({self.unet_steps - 1}), "
                f"got {self.unet_resumed_at}"
            )


SCENES_MODEL = ModelConfig(latent_channels=32, vae_channels=(32, 64, 96), unet_channels=(64, 96), text_hidden=96,
                           text_layers=3, text_heads=4, text_intermediate=192, max_length=48)

CONFIGS = {
    "default": TrainConfig(),
    # The weights in seedlab/embedded_model: TrainConfig() to 1,200 UNet steps, then that run
    # resumed with --unet-steps 2000 (the cosine restarts from its 2,000-step value at 1,200).
    "shipped": TrainConfig(unet_steps=2000, unet_resumed_at=(1200,)),
    # embedded-v2 (seedlab/embedded_model_v2): the scenes world, a 32-channel code, a text encoder deep enough
    # to tell which of several words on one attribute came last.
    # 2,800 UNet steps plain, then (resumed at 2,800, the cosine restarting from its 4,300-step value) 1,500
    # paired steps where no word may move the layout: the first run's words moved it (colour variations kept
    # the mask in 48% of seeds).
    # The decoder weighs outline pixels 30 times (10 by default): a decoder-only run so gained 2-4 points of mask IoU.
    "v2": TrainConfig(world="scenes", model=SCENES_MODEL, vae_steps=1500, decoder_steps=2500, unet_steps=4300,
                      unet_resumed_at=(2800,), lr=8e-4, decoder_constant_noise=0.6, edge_weight=30.0,
                      layout_consistency=1.0, consistency_from=2800),
    "v2-pilot": TrainConfig(world="scenes", model=SCENES_MODEL, vae_steps=20, decoder_steps=10, unet_steps=30,
                            warmup_steps=5, log_every=5, checkpoint_every=10),
    "pilot": TrainConfig(vae_steps=20, decoder_steps=10, unet_steps=30, warmup_steps=5, log_every=5,
                         checkpoint_every=10),
}


def cosine_lr(step: int, total: int, warmup: int, min_ratio: float) -> float:
    """Multiplier for the peak learning rate: linear warmup then cosine decay to min_ratio."""
    if step < warmup:
        return (step + 1) / warmup
    progress = (step - warmup) / max(1, total - warmup)
    return min_ratio + (1 - min_ratio) * 0.5 * (1 + math.cos(math.pi * min(1.0, progress)))


def unet_lr_scale(step: int, config: TrainConfig) -> float:
    """The UNet's learning-rate multiplier: the cosine of the run segment (see unet_resumed_at) holding step."""
    total = next(end for end in (*config.unet_resumed_at, config.unet_steps) if step < end)
    return cosine_lr(step, total, config.warmup_steps, config.min_lr_ratio)
