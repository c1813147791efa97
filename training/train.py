"""Train the embedded default model from scratch and export it as a diffusers folder.

    python -m training.train --config shipped --out training/runs/shipped --export seedlab/embedded_model

`--config` picks a named TrainConfig (CONFIGS): "shipped" is the schedule of the weights in
seedlab/embedded_model (2,000 UNet steps, resumed at 1,200), "default" is TrainConfig() (1,200
UNet steps), "pilot" is a short end-to-end check. Stages run in order and each one is
skipped when its output already exists, so an interrupted run resumes by running the same command
again:

1. tokenizer: CLIP tokenizer with every vocabulary word as one token.
2. vae:       AutoencoderKL taught the designed latent code of training.latent: the encoder maps
              an image to its code, the decoder maps codes (and noisy codes near them) to the image.
   decoder:   the decoder alone fine-tuned with an outline-weighted loss, on codes with less noise
              on the layout channels and more on the constant ones (see TrainConfig).
3. unet:      UNet + text encoder trained jointly on the codes of freshly rendered shapes
              (checkpointed, resumable; every step's batch is a pure function of (seed, step)).
              It never needs the VAE, so stage 2 runs beside it in a child process.
4. export:    EMA weights written as a StableDiffusionPipeline folder.
"""

import argparse
import json
import multiprocessing
import time
from dataclasses import asdict, replace
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from diffusers import AutoencoderKL, DDPMScheduler, DPMSolverMultistepScheduler, StableDiffusionPipeline
from transformers import CLIPTokenizer

from training import scene
from training.checkpoints import load_checkpoint, load_ema, save_checkpoint
from training.config import CONFIGS, TrainConfig, cosine_lr, unet_lr_scale  # tests use them here
from training.latent import LAYOUT_CHANNELS, shape_code
from training.models import build_text_encoder, build_unet, build_vae
from training.scene_latent import image_code, scene_code
from training.shapes import VOCABULARY, caption, sample_shape, training_triples
from training.tokenizer import write_clip_tokenizer


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


def render_batch(rng: np.random.Generator, n: int, world: str = "shapes") -> tuple[np.ndarray, torch.Tensor, list]:
    """n random training images of `world`: (n, 64, 64, 3) uint8 images, (n, c, 16, 16) codes, and the Shapes
    ("shapes") or the (Scene, prompt) pairs ("scenes")."""
    if world == "scenes":
        drawn = [scene.sample_scene(rng) for _ in range(n)]
        images, codes = zip(*(image_code(s) for s, _ in drawn))
        return np.stack(images), torch.from_numpy(np.stack(codes)), drawn
    triples = training_triples()
    shapes = [sample_shape(rng, triples) for _ in range(n)]
    images, codes = zip(*(shape_code(s) for s in shapes))
    return np.stack(images), torch.from_numpy(np.stack(codes)), shapes


def fast_cpu_precision():
    """bf16 autocast for the VAE's 64x64 convolutions: ~5x faster on CPUs with AMX, plenty for flat colours."""
    return torch.autocast("cpu", dtype=torch.bfloat16)


# ---------------------------------------------------------------- stage 1: tokenizer


def stage_tokenizer(out: Path, config: TrainConfig) -> CLIPTokenizer:
    """Write the shipped tokenizer (every vocabulary word of the config's world is a single token)."""
    words = scene.VOCABULARY if config.world == "scenes" else VOCABULARY
    return write_clip_tokenizer(out / "tokenizer", words, max_length=config.model.max_length)


# ---------------------------------------------------------------- stage 2: VAE


def vae_loss(vae: AutoencoderKL, images: torch.Tensor, codes: torch.Tensor, generator, code_noise: float):
    """Encoder regression to the code plus decoder reconstruction from noisy codes; returns (loss, decoder L1).

    images (b, 3, 64, 64) in [-1, 1]; codes (b, 14, 16, 16). The encoder's log-variance is pulled
    to -10 (std 0.007), so a posterior sample is the code itself for img2img users.
    """
    posterior = vae.encode(images).latent_dist
    encoder = F.mse_loss(posterior.mean.float(), codes) + 1e-3 * ((posterior.logvar.float() + 10) ** 2).mean()
    strength = code_noise * torch.rand((len(codes), 1, 1, 1), generator=generator)
    noisy = codes + strength * torch.randn(codes.shape, generator=generator)
    reconstruction = vae.decode(noisy).sample.float()
    l1 = (reconstruction - images).abs().mean()
    return encoder + l1 + F.mse_loss(reconstruction, images), l1


def stage_vae(out: Path, config: TrainConfig) -> AutoencoderKL:
    """Train the autoencoder on freshly rendered images and their codes, save out/vae, return it."""
    if (out / "vae" / "config.json").exists():
        return AutoencoderKL.from_pretrained(out / "vae")
    torch.manual_seed(config.seed)  # initial weights only; batches and noise come from seeded generators
    vae = build_vae(config.model).to(memory_format=torch.channels_last)
    optimizer = torch.optim.AdamW(vae.parameters(), lr=config.vae_lr, weight_decay=0.0)
    start = time.time()
    for step in range(config.vae_steps):
        for group in optimizer.param_groups:
            group["lr"] = config.vae_lr * cosine_lr(step, config.vae_steps, 50, 0.05)
        images, codes, _ = render_batch(np.random.default_rng([config.seed, 1, step]), config.vae_batch, config.world)
        generator = torch.Generator().manual_seed(config.seed * 1_000_003 + step)
        with fast_cpu_precision():
            images = to_tensor(images).contiguous(memory_format=torch.channels_last)
            loss, l1 = vae_loss(vae, images, codes, generator, config.code_noise)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if step % 100 == 0 or step == config.vae_steps - 1:
            log(out, f"vae step {step} loss {loss.item():.4f} l1 {l1.item():.4f} ({time.time() - start:.0f}s)")
    vae.eval().to(memory_format=torch.contiguous_format)  # safetensors wants contiguous weights
    vae.register_to_config(scaling_factor=1.0)  # the code is already at unit scale
    save_reconstructions(vae, out / "vae_reconstructions.png", config)
    vae.save_pretrained(out / "vae")
    return vae


@torch.no_grad()
def save_reconstructions(vae: AutoencoderKL, path: Path, config: TrainConfig) -> None:
    """Save 16 originals (top rows) above the decodings of their codes (bottom rows) for a visual check."""
    from PIL import Image

    images, codes, _ = render_batch(np.random.default_rng([config.seed, 99]), 16, config.world)
    decoded = vae.decode(codes).sample
    decoded = ((decoded.clamp(-1, 1) + 1) * 127.5).round().byte().permute(0, 2, 3, 1).numpy()
    rows = [np.concatenate(list(batch[i : i + 8]), axis=1) for batch in (images, decoded) for i in (0, 8)]
    Image.fromarray(np.concatenate(rows, axis=0)).resize((1024, 512), Image.NEAREST).save(path)


def outline_weight(images: torch.Tensor, edge_weight: float) -> torch.Tensor:
    """(b, 3, 64, 64) images -> (b, 1, 64, 64) loss weights: 1, or edge_weight within 2 px of the shape's outline.

    Star points and square corners are a few pixels of a 4096-pixel image: without the weight the
    decoder settles for rounded shapes that cost almost nothing in a plain L1.
    """
    shape = (images != images[..., :1, :1]).any(dim=1, keepdim=True).float()  # the border is background
    dilated = F.max_pool2d(shape, 5, stride=1, padding=2)
    eroded = -F.max_pool2d(-shape, 5, stride=1, padding=2)
    return 1.0 + (edge_weight - 1.0) * (dilated - eroded)


def stage_decoder(out: Path, config: TrainConfig, vae: AutoencoderKL) -> AutoencoderKL:
    """Fine-tune only the decoder for sharp outlines and flat colours from the codes a UNet makes."""
    if (out / "vae_tuned" / "config.json").exists():
        return AutoencoderKL.from_pretrained(out / "vae_tuned")
    decoder_params = list(vae.post_quant_conv.parameters()) + list(vae.decoder.parameters())
    optimizer = torch.optim.AdamW(decoder_params, lr=config.decoder_lr, weight_decay=0.0)
    vae.train().to(memory_format=torch.channels_last)
    start = time.time()
    for step in range(config.decoder_steps):
        for group in optimizer.param_groups:
            group["lr"] = config.decoder_lr * cosine_lr(step, config.decoder_steps, 20, 0.05)
        images, codes, _ = render_batch(np.random.default_rng([config.seed, 5, step]), config.vae_batch, config.world)
        generator = torch.Generator().manual_seed(config.seed * 1_000_003 + step)
        scale = torch.full((1, codes.shape[1], 1, 1), config.decoder_constant_noise)
        scale[:, :LAYOUT_CHANNELS] = config.decoder_code_noise
        strength = scale * torch.rand((len(codes), 1, 1, 1), generator=generator)  # (b, 14, 1, 1)
        codes = codes + strength * torch.randn(codes.shape, generator=generator)
        images = to_tensor(images)
        with fast_cpu_precision():
            reconstruction = vae.decode(codes.contiguous(memory_format=torch.channels_last)).sample.float()
        weight = outline_weight(images, config.edge_weight)  # (b, 1, 64, 64)
        l1 = (reconstruction - images).abs().mean()
        loss = (weight * (reconstruction - images).abs()).mean() / weight.mean() + F.mse_loss(reconstruction, images)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if step % 100 == 0 or step == config.decoder_steps - 1:
            log(out, f"decoder step {step} loss {loss.item():.4f} l1 {l1.item():.4f} ({time.time() - start:.0f}s)")
    vae.eval().to(memory_format=torch.contiguous_format)
    save_reconstructions(vae, out / "vae_tuned_reconstructions.png", config)
    vae.save_pretrained(out / "vae_tuned")
    return vae


# ---------------------------------------------------------------- stage 3: UNet + text encoder


class CaptionTokens:
    """Tokenize captions once and remember them (the training captions take only a few thousand forms)."""

    def __init__(self, tokenizer: CLIPTokenizer):
        self.tokenizer = tokenizer
        self.cache: dict[str, torch.Tensor] = {}

    def __call__(self, captions: list[str]) -> torch.Tensor:
        """(n,) strings -> (n, max_length) token ids, padded like StableDiffusionPipeline pads them."""
        for text in captions:
            if text not in self.cache:
                ids = self.tokenizer(text, padding="max_length", truncation=True,
                                     max_length=self.tokenizer.model_max_length)
                self.cache[text] = torch.tensor(ids.input_ids)
        return torch.stack([self.cache[text] for text in captions])


def diffusion_loss(unet, text_encoder, scheduler, latents, token_ids, generator, min_snr_gamma,
                   offset_noise=0.0, consistency=0.0) -> torch.Tensor:
    """Epsilon-prediction loss with min-SNR weighting and offset noise; latents (b, c, 16, 16).

    With consistency > 0 the batch is pairs (latents[i] beside latents[i + b / 2], see paired_batch): each pair
    shares its noise and timestep, and the squared difference of its two predictions of the clean layout channels
    (the noise predictions' difference over the SNR: what DPM-Solver++ steps on, largest at the first, noisiest
    steps, where the composition is decided) is added times `consistency`.
    """
    batch, channels = latents.shape[:2]
    draws = batch // 2 if consistency > 0 else batch
    noise = torch.randn((draws, *latents.shape[1:]), generator=generator)
    noise = noise + offset_noise * torch.randn((draws, channels, 1, 1), generator=generator)  # per-channel constant
    timesteps = torch.randint(0, scheduler.config.num_train_timesteps, (draws,), generator=generator)
    if consistency > 0:
        noise, timesteps = noise.repeat(2, 1, 1, 1), timesteps.repeat(2)
    noisy = scheduler.add_noise(latents, noise, timesteps)
    context = text_encoder(token_ids)[0]  # (b, 32, hidden)
    prediction = unet(noisy, timesteps, encoder_hidden_states=context).sample
    alphas = scheduler.alphas_cumprod[timesteps]
    snr = alphas / (1 - alphas)
    weight = snr.clamp(max=min_snr_gamma) / snr  # min-SNR-gamma: the steps that shape the image count most
    per_sample = F.mse_loss(prediction, noise, reduction="none").mean(dim=(1, 2, 3))
    loss = (weight * per_sample).mean()
    if consistency > 0:
        layout = prediction[:, :LAYOUT_CHANNELS]
        apart = (layout[:draws] - layout[draws:]).square().mean(dim=(1, 2, 3))
        loss = loss + consistency * (apart / snr[:draws]).mean()
    return loss


def paired(config: TrainConfig, step: int) -> bool:
    """Whether the step trains on pairs (TrainConfig.layout_consistency)."""
    return config.layout_consistency > 0 and step >= config.consistency_from


def training_batch(config: TrainConfig, step: int, tokens: CaptionTokens) -> tuple[torch.Tensor, torch.Tensor]:
    """The step's (codes, token ids), freshly rendered: a pure function of (seed, step) so resuming replays it."""
    if paired(config, step):
        return paired_batch(config, step, tokens)
    rng = np.random.default_rng([config.seed, 3, step])
    _, codes, drawn = render_batch(rng, config.batch, config.world)
    if config.world == "scenes":  # each scene was drawn from its prompt
        captions = ["" if rng.random() < config.caption_dropout else prompt for _, prompt in drawn]
    else:
        captions = ["" if rng.random() < config.caption_dropout else caption(shape, rng) for shape in drawn]
    return codes, tokens(captions)


def paired_batch(config: TrainConfig, step: int, tokens: CaptionTokens) -> tuple[torch.Tensor, torch.Tensor]:
    """batch / 2 scenes, then a partner of each on its layout (scene.partner_scene); twice as often as caption
    dropout, a partner keeps its scene with no caption, the guidance's unconditional branch at the same noisy code."""
    if config.world != "scenes":
        raise ValueError("layout_consistency needs world='scenes'")
    rng = np.random.default_rng([config.seed, 4, step])
    firsts = [scene.sample_scene(rng) for _ in range(config.batch // 2)]
    partners = []
    for first, prompt in firsts:
        partners.append((first, "") if rng.random() < 2 * config.caption_dropout
                        else scene.partner_scene(first, prompt, rng))
    captions = ["" if rng.random() < config.caption_dropout else prompt for _, prompt in firsts]
    captions += [prompt for _, prompt in partners]
    codes = np.stack([scene_code(s) for s, _ in firsts + partners])
    return torch.from_numpy(codes), tokens(captions)


def stage_unet(out: Path, config: TrainConfig, tokenizer: CLIPTokenizer):
    """Train UNet + text encoder with AdamW, warmup + cosine, EMA; checkpoint to out/checkpoint."""
    torch.manual_seed(config.seed)  # initial weights only
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
            group["lr"] = config.lr * unet_lr_scale(step, config)
        generator = torch.Generator().manual_seed(config.seed * 1_000_003 + step)
        latents, token_ids = training_batch(config, step, tokens)
        loss = diffusion_loss(unet, text_encoder, scheduler, latents, token_ids, generator, config.min_snr_gamma,
                              config.offset_noise, config.layout_consistency if paired(config, step) else 0.0)
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
                f"lr {optimizer.param_groups[0]['lr']:.2e} {rate:.2f}s/step "
                f"eta {rate * (config.unet_steps - done) / 60:.0f}min")
            running = []
        if done % config.checkpoint_every == 0 or done == config.unet_steps:
            save_checkpoint(out / "checkpoint", params, ema, optimizer, done)
    load_ema(params, ema)
    return unet, text_encoder


# ---------------------------------------------------------------- stage 4: export


def export(folder: Path, config: TrainConfig, vae: AutoencoderKL, unet, text_encoder, tokenizer: CLIPTokenizer) -> None:
    """Save a plain StableDiffusionPipeline folder (safetensors, no safety checker)."""
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
    """Export the latest checkpoint's EMA weights, to look at a run in progress."""
    tokenizer = CLIPTokenizer.from_pretrained(out / "tokenizer")
    unet = build_unet(config.model)
    text_encoder = build_text_encoder(config.model, len(tokenizer))
    params = list(unet.parameters()) + list(text_encoder.parameters())
    ema = [p.detach().clone() for p in params]
    step = load_checkpoint(out / "checkpoint", params, ema, torch.optim.AdamW(params))
    load_ema(params, ema)
    vae_folder = out / "vae_tuned" if (out / "vae_tuned").exists() else out / "vae"
    export(folder, config, AutoencoderKL.from_pretrained(vae_folder), unet, text_encoder, tokenizer)
    print(f"exported step {step} to {folder}")


def _prepare(out: Path, config: TrainConfig) -> None:
    """The VAE and decoder stages, for a child process."""
    torch.set_flush_denormal(True)
    torch.set_num_threads(config.threads)
    stage_decoder(out, config, stage_vae(out, config))


def run(out: Path, config: TrainConfig, export_dir: Path | None) -> None:
    """All stages, each skipped when already done."""
    out.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(config.threads)
    (out / "config.json").write_text(json.dumps(asdict(config), indent=2))
    start = time.time()
    tokenizer = stage_tokenizer(out, config)
    child = None
    if not (out / "vae_tuned" / "config.json").exists():
        # The UNet trains on designed codes and never needs the VAE, so the VAE trains beside it
        # on the second core. In a child process: after oneDNN's bf16 kernels ran in a process,
        # its fp32 UNet steps were ~15x slower (9.8 s vs 0.65 s per step, measured).
        child = multiprocessing.get_context("spawn").Process(target=_prepare, args=(out, config))
        child.start()
    unet, text_encoder = stage_unet(out, config, tokenizer)
    if child is not None:
        child.join()
        if child.exitcode != 0:
            raise RuntimeError(f"the vae stages failed (exit code {child.exitcode}); see {out / 'log.txt'}")
    vae = stage_decoder(out, config, stage_vae(out, config))
    export(out / "pipeline", config, vae, unet, text_encoder, tokenizer)
    if export_dir is not None:
        export(export_dir, config, vae, unet, text_encoder, tokenizer)
    log(out, f"finished in {(time.time() - start) / 60:.1f} min (this invocation); pipeline at {out / 'pipeline'}")


def parse_args(argv: list[str] | None = None) -> tuple[argparse.Namespace, TrainConfig]:
    """The command line and the TrainConfig it names (a named config, then flags that override its fields)."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path("training/runs/main"))
    parser.add_argument("--export", type=Path, default=None,
                        help="also export the pipeline here, e.g. seedlab/embedded_model")
    named = parser.add_mutually_exclusive_group()
    named.add_argument("--config", choices=list(CONFIGS), default="default",
                       help="named TrainConfig: shipped = the embedded model's schedule "
                            "(default: default, 1,200 UNet steps)")
    named.add_argument("--pilot", action="store_true",
                       help="same as --config pilot: a short end-to-end check of every stage")
    parser.add_argument("--unet-steps", type=int, default=None,
                        help="override the config's UNet step count (resume longer)")
    parser.add_argument("--snapshot", type=Path, default=None, help="only export the latest checkpoint here and exit")
    args = parser.parse_args(argv)
    name = "pilot" if args.pilot else args.config
    config = CONFIGS[name]
    if args.unet_steps is not None:
        try:
            config = replace(config, unet_steps=args.unet_steps)
        except ValueError as error:
            parser.error(f"--unet-steps {args.unet_steps} does not fit --config {name}: {error}")
    return args, config


def main() -> None:
    # First, before any parallel op creates the worker threads (they inherit the FPU flags): tiny
    # Adam second moments become denormal floats, whose slow x86 arithmetic made steps 6x slower.
    torch.set_flush_denormal(True)
    args, config = parse_args()
    if args.snapshot is not None:
        snapshot(args.out, config, args.snapshot)
        return
    run(args.out, config, args.export)


if __name__ == "__main__":
    main()
