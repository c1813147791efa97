"""Train the embedded default model from scratch and export it as a diffusers folder.

    python -m training.train --out training/runs/main

Stages run in order and each one is skipped when its output already exists, so an interrupted
run resumes by running the same command again:

1. tokenizer: CLIP tokenizer with every vocabulary word as one token.
2. vae:       AutoencoderKL trained on freshly rendered images (64x64 -> 4x16x16 latents).
3. data:      a fixed dataset of rendered shapes, encoded once to latent means.
4. unet:      UNet + text encoder trained jointly on the latents (checkpointed, resumable).
5. decoder:   VAE decoder fine-tuned on those same latents (encoder untouched) for sharper edges.
6. export:    EMA weights written as a StableDiffusionPipeline folder.
"""

import argparse
import json
import math
import multiprocessing
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from diffusers import AutoencoderKL, DDPMScheduler, DPMSolverMultistepScheduler, StableDiffusionPipeline
from transformers import CLIPTokenizer

from training.models import ModelConfig, build_text_encoder, build_unet, build_vae
from training.shapes import SIZES, VOCABULARY, caption, place_shape, render, sample_shape, training_triples
from training.tokenizer import write_clip_tokenizer


@dataclass
class TrainConfig:
    """Everything a run depends on; saved next to its outputs."""

    seed: int = 0
    model: ModelConfig = field(default_factory=ModelConfig)
    # VAE stage
    vae_steps: int = 2500
    vae_batch: int = 16
    vae_lr: float = 1e-3
    vae_kl_weight: float = 1e-6  # per latent element; only keeps latents bounded and the decoder robust
    # data stage
    dataset_size: int = 40_000
    # decoder stage: sharpen the decoder on the fixed dataset latents (the UNet's targets stay valid)
    decoder_steps: int = 1500
    decoder_lr: float = 3e-4
    # UNet stage
    unet_steps: int = 3000
    batch: int = 64
    lr: float = 6e-4
    warmup_steps: int = 200
    min_lr_ratio: float = 0.05
    weight_decay: float = 0.01
    ema_decay: float = 0.999
    caption_dropout: float = 0.1  # empty captions teach the unconditional branch for CFG
    min_snr_gamma: float = 5.0
    beta_schedule: str = "scaled_linear"
    beta_start: float = 0.00085
    beta_end: float = 0.012
    # Offset noise: the last step keeps sqrt(alpha_bar) = 0.07 of the image, as strong at 16x16 as
    # the noise's own per-channel mean, so without it the model read the background colour from
    # the seed and followed "on a blue background" only ~45% of the time (measured). A random
    # per-channel constant in the training noise makes that mean uninformative.
    offset_noise: float = 0.25
    # Seed-decided layout: each training image is rendered where its own diffusion noise says (see
    # noise_layout), so at sampling time the seed's initial latent decides position and size, and
    # a prompt variation that changes the background keeps the composition.
    couple_layout: bool = True
    checkpoint_every: int = 100
    log_every: int = 25
    # One intra-op thread: on this shared 2-core machine two OpenMP threads spent most of each step
    # waiting at barriers (gdb) and ran 2-10 s/step instead of 0.6; one thread is a steady ~1.1 s/step.
    threads: int = 1


def noise_schedule(config: TrainConfig) -> DDPMScheduler:
    """The training schedule: SD's scaled-linear betas, epsilon prediction (see offset_noise)."""
    return DDPMScheduler(
        num_train_timesteps=1000,
        beta_start=config.beta_start,
        beta_end=config.beta_end,
        beta_schedule=config.beta_schedule,
        prediction_type="epsilon",
        clip_sample=False,
        steps_offset=1,  # unused by "linspace" spacing; set so StableDiffusionPipeline does not warn
    )


def sampling_scheduler(config: TrainConfig) -> DPMSolverMultistepScheduler:
    """Deterministic (non-ancestral) default sampler: DPM-Solver++ 2M, good at 20 steps."""
    return DPMSolverMultistepScheduler.from_config(noise_schedule(config).config, algorithm_type="dpmsolver++")


def log(out: Path, message: str) -> None:
    """Print and append to out/log.txt."""
    line = f"[{time.strftime('%H:%M:%S')}] {message}"
    print(line, flush=True)
    with open(out / "log.txt", "a") as f:
        f.write(line + "\n")


def to_tensor(images: np.ndarray) -> torch.Tensor:
    """(n, 64, 64, 3) uint8 -> (n, 3, 64, 64) float in [-1, 1]."""
    return torch.from_numpy(images).permute(0, 3, 1, 2).float() / 127.5 - 1.0


def render_batch(rng: np.random.Generator, n: int, triples: list) -> tuple[np.ndarray, list]:
    """Render n random training shapes; return (n, 64, 64, 3) uint8 images and their Shapes."""
    shapes = [sample_shape(rng, triples) for _ in range(n)]
    return np.stack([render(s)[0] for s in shapes]), shapes


def cosine_lr(step: int, total: int, warmup: int, min_ratio: float) -> float:
    """Multiplier for the peak learning rate: linear warmup then cosine decay to min_ratio."""
    if step < warmup:
        return (step + 1) / warmup
    progress = (step - warmup) / max(1, total - warmup)
    return min_ratio + (1 - min_ratio) * 0.5 * (1 + math.cos(math.pi * min(1.0, progress)))


def fast_cpu_precision():
    """bf16 autocast for the VAE's 64x64 convolutions: ~5x faster on CPUs with AMX, plenty for flat colours."""
    return torch.autocast("cpu", dtype=torch.bfloat16)


# ---------------------------------------------------------------- stage 1: tokenizer


def stage_tokenizer(out: Path, config: TrainConfig) -> CLIPTokenizer:
    """Write the shipped tokenizer (every vocabulary word is a single token)."""
    return write_clip_tokenizer(out / "tokenizer", VOCABULARY, max_length=config.model.max_length)


# ---------------------------------------------------------------- stage 2: VAE


def vae_loss(vae: AutoencoderKL, images: torch.Tensor, kl_weight: float) -> tuple[torch.Tensor, torch.Tensor]:
    """L1 + MSE reconstruction of a posterior sample, plus a tiny KL; returns (loss, reconstruction L1)."""
    posterior = vae.encode(images).latent_dist  # mean, std: (b, 4, 16, 16)
    reconstruction = vae.decode(posterior.sample()).sample
    l1 = (reconstruction - images).abs().mean()
    mse = F.mse_loss(reconstruction, images)
    kl = posterior.kl().mean() / posterior.mean[0].numel()
    return l1 + mse + kl_weight * kl, l1


def stage_vae(out: Path, config: TrainConfig) -> AutoencoderKL:
    """Train the autoencoder on freshly rendered images, save out/vae, return it."""
    if (out / "vae" / "config.json").exists():
        return AutoencoderKL.from_pretrained(out / "vae")
    torch.manual_seed(config.seed)
    vae = build_vae(config.model).to(memory_format=torch.channels_last)
    optimizer = torch.optim.AdamW(vae.parameters(), lr=config.vae_lr, weight_decay=0.0)
    triples = training_triples()
    start = time.time()
    for step in range(config.vae_steps):
        for group in optimizer.param_groups:
            group["lr"] = config.vae_lr * cosine_lr(step, config.vae_steps, 50, 0.05)
        rng = np.random.default_rng([config.seed, 1, step])
        images = to_tensor(render_batch(rng, config.vae_batch, triples)[0])
        with fast_cpu_precision():
            loss, l1 = vae_loss(vae, images.contiguous(memory_format=torch.channels_last), config.vae_kl_weight)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if step % 100 == 0 or step == config.vae_steps - 1:
            log(out, f"vae step {step} loss {loss.item():.4f} l1 {l1.item():.4f} ({time.time() - start:.0f}s)")
    vae.eval().to(memory_format=torch.contiguous_format)  # safetensors wants contiguous weights
    save_reconstructions(vae, out / "vae_reconstructions.png", config.seed)
    vae.save_pretrained(out / "vae")
    return vae


@torch.no_grad()
def save_reconstructions(vae: AutoencoderKL, path: Path, seed: int) -> None:
    """Save 16 originals (top rows) above their reconstructions (bottom rows) for a visual check."""
    from PIL import Image

    images, _ = render_batch(np.random.default_rng([seed, 99]), 16, training_triples())
    decoded = vae.decode(vae.encode(to_tensor(images)).latent_dist.mean).sample
    decoded = ((decoded.clamp(-1, 1) + 1) * 127.5).round().byte().permute(0, 2, 3, 1).numpy()
    rows = [np.concatenate(list(batch[i : i + 8]), axis=1) for batch in (images, decoded) for i in (0, 8)]
    Image.fromarray(np.concatenate(rows, axis=0)).resize((1024, 512), Image.NEAREST).save(path)


# ---------------------------------------------------------------- stage 3: data


@torch.no_grad()
def stage_data(out: Path, config: TrainConfig, vae: AutoencoderKL) -> dict:
    """Render the dataset once, encode to posterior means, set the VAE scaling factor; cache in out/latents.pt."""
    path = out / "latents.pt"
    if path.exists():
        return torch.load(path)
    rng = np.random.default_rng([config.seed, 2])
    triples = training_triples()
    latents, shapes = [], []
    vae.to(memory_format=torch.channels_last)
    start = time.time()
    for first in range(0, config.dataset_size, 256):
        images, batch_shapes = render_batch(rng, min(256, config.dataset_size - first), triples)
        with fast_cpu_precision():
            posterior = vae.encode(to_tensor(images).contiguous(memory_format=torch.channels_last)).latent_dist
        latents.append(posterior.mean.float().contiguous().half())  # (256, 4, 16, 16)
        shapes += [asdict(s) for s in batch_shapes]
        if first % 10240 == 0:
            log(out, f"data {first}/{config.dataset_size} ({time.time() - start:.0f}s)")
    vae.to(memory_format=torch.contiguous_format)
    latents = torch.cat(latents)
    scaling_factor = 1.0 / latents.float().std().item()
    data = {"latents": latents, "shapes": shapes, "scaling_factor": scaling_factor}
    torch.save(data, path)
    log(out, f"data done: {len(shapes)} latents, mean {latents.float().mean():.3f}, scaling factor {scaling_factor:.4f}")
    return data


# ---------------------------------------------------------------- stage 4: UNet + text encoder


class CaptionTokens:
    """Tokenize captions once and remember them (the training captions take only a few thousand forms)."""

    def __init__(self, tokenizer: CLIPTokenizer):
        self.tokenizer = tokenizer
        self.cache: dict[str, torch.Tensor] = {}

    def __call__(self, captions: list[str]) -> torch.Tensor:
        """(n,) strings -> (n, max_length) token ids, padded like StableDiffusionPipeline pads them."""
        for text in captions:
            if text not in self.cache:
                ids = self.tokenizer(text, padding="max_length", truncation=True, max_length=self.tokenizer.model_max_length)
                self.cache[text] = torch.tensor(ids.input_ids)
        return torch.stack([self.cache[text] for text in captions])


def diffusion_loss(
    unet, text_encoder, scheduler, latents, token_ids, generator, min_snr_gamma, offset_noise=0.0, noise=None
) -> torch.Tensor:
    """Epsilon-prediction loss with min-SNR weighting and offset noise; latents (b, 4, 16, 16) already scaled.

    noise: the (b, 4, 16, 16) Gaussian noise to use (drawn from generator when None).
    """
    batch, channels = latents.shape[:2]
    if noise is None:
        noise = torch.randn(latents.shape, generator=generator)
    noise = noise + offset_noise * torch.randn((batch, channels, 1, 1), generator=generator)  # per-channel constant
    timesteps = torch.randint(0, scheduler.config.num_train_timesteps, (batch,), generator=generator)
    noisy = scheduler.add_noise(latents, noise, timesteps)
    context = text_encoder(token_ids)[0]  # (b, 32, hidden)
    prediction = unet(noisy, timesteps, encoder_hidden_states=context).sample
    alphas = scheduler.alphas_cumprod[timesteps]
    snr = alphas / (1 - alphas)
    weight = snr.clamp(max=min_snr_gamma) / snr  # min-SNR-gamma: the steps that shape the image count most
    per_sample = F.mse_loss(prediction, noise, reduction="none").mean(dim=(1, 2, 3))
    return (weight * per_sample).mean()


def noise_layout(noise: torch.Tensor) -> np.ndarray:
    """Four numbers in [0, 1) per (4, 16, 16) noise: x, y, width within the size class, size class.

    Each is a half-against-half contrast of one channel (right minus left, or bottom minus top),
    mapped through the normal CDF: uniform for Gaussian noise, smooth in the noise, and blind to the
    per-channel constant of offset noise. A global linear feature is easy for the UNet's 8x8
    attention block to read from the initial latent. Returns (b, 4).
    """
    half = noise.shape[-1] // 2
    horizontal = noise[..., half:].mean(dim=(-2, -1)) - noise[..., :half].mean(dim=(-2, -1))  # (b, 4)
    vertical = noise[..., half:, :].mean(dim=(-2, -1)) - noise[..., :half, :].mean(dim=(-2, -1))
    std = math.sqrt(2 / (noise.shape[-1] * half))  # of a difference of two means of iid N(0, 1)
    contrast = torch.stack([horizontal[:, 0], vertical[:, 1], horizontal[:, 2], vertical[:, 3]], dim=1) / std
    return (0.5 * (1 + torch.erf(contrast / math.sqrt(2)))).numpy()


def coupled_shapes(rng: np.random.Generator, layouts: np.ndarray, caption_dropout: float) -> list[tuple["Shape", str]]:
    """One (shape, caption) per noise layout row.

    Colour, kind, background and wording come from rng; position and width from the layout, and
    the size class too unless the caption names it (then the words decide).
    """
    from training.shapes import Shape

    triples = training_triples()
    pairs = []
    for ux, uy, uw, uclass in layouts:
        colour, kind, background = triples[rng.integers(len(triples))]
        size = "small" if rng.random() < 0.5 else "large"
        text = caption(Shape(colour, kind, size, background, SIZES[size][0], 0, 0), rng)
        if rng.random() < caption_dropout:
            text = ""  # the unconditional branch of classifier-free guidance
        if size not in text.replace(",", " ").split():
            size = "small" if uclass < 0.5 else "large"  # the caption is silent: the seed decides
        pairs.append((place_shape(colour, kind, size, background, (ux, uy, uw)), text))
    return pairs


@torch.no_grad()
def coupled_batch(vae: AutoencoderKL, data: dict, config: TrainConfig, step: int, tokens: "CaptionTokens", generator):
    """The step's batch, each image rendered where its own noise says: (scaled latents, token ids, noise)."""
    rng = np.random.default_rng([config.seed, 4, step])
    noise = torch.randn((config.batch, config.model.latent_channels, 16, 16), generator=generator)
    pairs = coupled_shapes(rng, noise_layout(noise), config.caption_dropout)
    images = np.stack([render(shape)[0] for shape, _ in pairs])
    latents = vae.encode(to_tensor(images)).latent_dist.mean * data["scaling_factor"]
    return latents, tokens([text for _, text in pairs]), noise


def sample_batch(data: dict, config: TrainConfig, step: int, tokens: CaptionTokens) -> tuple[torch.Tensor, torch.Tensor]:
    """The step's batch, a pure function of (seed, step) so resuming gives the same run."""
    from training.shapes import Shape

    rng = np.random.default_rng([config.seed, 3, step])
    index = rng.integers(0, len(data["shapes"]), config.batch)
    latents = data["latents"][torch.from_numpy(index)].float() * data["scaling_factor"]
    captions = [
        "" if rng.random() < config.caption_dropout else caption(Shape(**data["shapes"][i]), rng) for i in index
    ]
    return latents, tokens(captions)


def stage_unet(out: Path, config: TrainConfig, data: dict, tokenizer: CLIPTokenizer, vae: AutoencoderKL):
    """Train UNet + text encoder with AdamW, warmup + cosine, EMA; checkpoint to out/checkpoint."""
    torch.manual_seed(config.seed)
    unet = build_unet(config.model)
    text_encoder = build_text_encoder(config.model, len(tokenizer))
    params = list(unet.parameters()) + list(text_encoder.parameters())
    ema = [p.detach().clone() for p in params]
    optimizer = torch.optim.AdamW(params, lr=config.lr, weight_decay=config.weight_decay)
    start_step = load_checkpoint(out / "checkpoint", params, ema, optimizer)
    if start_step >= config.unet_steps:
        load_ema(params, ema)
        return unet, text_encoder
    scheduler = noise_schedule(config)
    tokens = CaptionTokens(tokenizer)
    unet.train()
    text_encoder.train()
    start, running = time.time(), []
    for step in range(start_step, config.unet_steps):
        for group in optimizer.param_groups:
            group["lr"] = config.lr * cosine_lr(step, config.unet_steps, config.warmup_steps, config.min_lr_ratio)
        generator = torch.Generator().manual_seed(config.seed * 1_000_003 + step)
        if config.couple_layout:
            latents, token_ids, noise = coupled_batch(vae, data, config, step, tokens, generator)
        else:
            (latents, token_ids), noise = sample_batch(data, config, step, tokens), None
        loss = diffusion_loss(
            unet, text_encoder, scheduler, latents, token_ids, generator, config.min_snr_gamma, config.offset_noise, noise
        )
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        optimizer.step()
        decay = min(config.ema_decay, (1 + step) / (10 + step))  # short memory early, when weights move fast
        with torch.no_grad():
            torch._foreach_lerp_(ema, [p.detach() for p in params], 1 - decay)
        running.append(loss.item())
        done = step + 1
        if done % config.log_every == 0:
            rate = (time.time() - start) / (done - start_step)
            log(out, f"unet step {done}/{config.unet_steps} loss {np.mean(running):.4f} "
                f"lr {optimizer.param_groups[0]['lr']:.2e} {rate:.2f}s/step eta {rate * (config.unet_steps - done) / 60:.0f}min")
            running = []
        if done % config.checkpoint_every == 0 or done == config.unet_steps:
            save_checkpoint(out / "checkpoint", params, ema, optimizer, done)
    load_ema(params, ema)
    return unet, text_encoder


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


# ---------------------------------------------------------------- stage 5: decoder


def stage_decoder(out: Path, config: TrainConfig, vae: AutoencoderKL, data: dict) -> AutoencoderKL:
    """Fine-tune only the decoder to map the stored latent means back to their exact renders."""
    from training.shapes import Shape

    if (out / "vae_tuned" / "config.json").exists():
        return AutoencoderKL.from_pretrained(out / "vae_tuned")
    decoder_params = list(vae.post_quant_conv.parameters()) + list(vae.decoder.parameters())
    optimizer = torch.optim.AdamW(decoder_params, lr=config.decoder_lr, weight_decay=0.0)
    vae.train().to(memory_format=torch.channels_last)
    start = time.time()
    for step in range(config.decoder_steps):
        for group in optimizer.param_groups:
            group["lr"] = config.decoder_lr * cosine_lr(step, config.decoder_steps, 20, 0.05)
        rng = np.random.default_rng([config.seed, 5, step])
        index = rng.integers(0, len(data["shapes"]), config.vae_batch)
        images = to_tensor(np.stack([render(Shape(**data["shapes"][i]))[0] for i in index]))
        latents = data["latents"][torch.from_numpy(index)].float()  # (b, 4, 16, 16) unscaled means
        with fast_cpu_precision():
            reconstruction = vae.decode(latents.contiguous(memory_format=torch.channels_last)).sample
        reconstruction = reconstruction.float()
        l1 = (reconstruction - images).abs().mean()
        loss = l1 + F.mse_loss(reconstruction, images)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if step % 100 == 0 or step == config.decoder_steps - 1:
            log(out, f"decoder step {step} loss {loss.item():.4f} l1 {l1.item():.4f} ({time.time() - start:.0f}s)")
    vae.eval().to(memory_format=torch.contiguous_format)
    save_reconstructions(vae, out / "vae_tuned_reconstructions.png", config.seed)
    vae.save_pretrained(out / "vae_tuned")
    return vae


# ---------------------------------------------------------------- stage 6: export


def export(folder: Path, config: TrainConfig, vae: AutoencoderKL, unet, text_encoder, tokenizer: CLIPTokenizer, scaling_factor: float) -> None:
    """Save a plain StableDiffusionPipeline folder (safetensors, no safety checker)."""
    vae.register_to_config(scaling_factor=scaling_factor)
    pipe = StableDiffusionPipeline(
        vae=vae.eval(),
        text_encoder=text_encoder.eval(),
        tokenizer=tokenizer,
        unet=unet.eval(),
        scheduler=sampling_scheduler(config),
        safety_checker=None,
        feature_extractor=None,
        requires_safety_checker=False,
    )
    pipe.save_pretrained(folder, safe_serialization=True)


def snapshot(out: Path, config: TrainConfig, folder: Path) -> None:
    """Export the latest checkpoint's EMA weights (with the untuned decoder) to look at a run in progress."""
    tokenizer = CLIPTokenizer.from_pretrained(out / "tokenizer")
    unet = build_unet(config.model)
    text_encoder = build_text_encoder(config.model, len(tokenizer))
    params = list(unet.parameters()) + list(text_encoder.parameters())
    ema = [p.detach().clone() for p in params]
    step = load_checkpoint(out / "checkpoint", params, ema, torch.optim.AdamW(params))
    load_ema(params, ema)
    scaling_factor = torch.load(out / "latents.pt")["scaling_factor"]
    export(folder, config, AutoencoderKL.from_pretrained(out / "vae"), unet, text_encoder, tokenizer, scaling_factor)
    print(f"exported step {step} to {folder}")


def _prepare(out: Path, config: TrainConfig) -> None:
    """The VAE and data stages, for a child process."""
    torch.set_flush_denormal(True)
    torch.set_num_threads(config.threads)
    stage_data(out, config, stage_vae(out, config))


def run(out: Path, config: TrainConfig, export_dir: Path | None) -> None:
    """All stages, each skipped when already done."""
    out.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(config.threads)
    (out / "config.json").write_text(json.dumps(asdict(config), indent=2))
    start = time.time()
    tokenizer = stage_tokenizer(out, config)
    if not (out / "latents.pt").exists():
        # The bf16 VAE stages run in a child process: after oneDNN's bf16 (AMX) kernels ran in a
        # process, its fp32 UNet steps were ~15x slower (9.8 s vs 0.65 s per step, measured).
        child = multiprocessing.get_context("spawn").Process(target=_prepare, args=(out, config))
        child.start()
        child.join()
        if child.exitcode != 0:
            raise RuntimeError(f"the vae/data stages failed (exit code {child.exitcode}); see {out / 'log.txt'}")
    vae = stage_vae(out, config)
    data = stage_data(out, config, vae)
    unet, text_encoder = stage_unet(out, config, data, tokenizer, vae)
    vae = stage_decoder(out, config, vae, data)
    export(out / "pipeline", config, vae, unet, text_encoder, tokenizer, data["scaling_factor"])
    if export_dir is not None:
        export(export_dir, config, vae, unet, text_encoder, tokenizer, data["scaling_factor"])
    log(out, f"finished in {(time.time() - start) / 60:.1f} min (this invocation); pipeline at {out / 'pipeline'}")


def main() -> None:
    # First, before any parallel op creates the worker threads (they inherit the FPU flags): tiny
    # Adam second moments become denormal floats, whose slow x86 arithmetic made steps 6x slower.
    torch.set_flush_denormal(True)
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path("training/runs/main"))
    parser.add_argument("--export", type=Path, default=None, help="also export the pipeline here, e.g. seedlab/embedded_model")
    parser.add_argument("--pilot", action="store_true", help="a 2-3 minute run that checks the pipeline end to end")
    parser.add_argument("--unet-steps", type=int, default=None, help="override the UNet step count (resume longer)")
    parser.add_argument("--snapshot", type=Path, default=None, help="only export the latest checkpoint here and exit")
    args = parser.parse_args()
    config = TrainConfig()
    if args.pilot:
        config = TrainConfig(vae_steps=20, dataset_size=512, decoder_steps=10, unet_steps=30, warmup_steps=5, log_every=5, checkpoint_every=10)
    if args.unet_steps is not None:
        config.unet_steps = args.unet_steps
    if args.snapshot is not None:
        snapshot(args.out, config, args.snapshot)
        return
    run(args.out, config, args.export)


if __name__ == "__main__":
    main()
