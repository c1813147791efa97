"""A1111 PNGs made on the embedded model by k-diffusion's own samplers, driven as A1111 1.10 drives them,
come back from `python -m seedlab reproduce FILE` as the same image.

The PNGs are made here with tests/reference/a1111.py (k-diffusion 0.1.1's functions, A1111's CFG
denoiser, ImageRNG, Brownian noise and hires pass), decoded by the model's VAE, made 8-bit as A1111 does
(`astype(np.uint8)`: truncated), and carry the text A1111
writes: the sampler under its A1111 name (old and new spellings), Schedule type, ENSD, hires fix keys; and
prompts in A1111's syntax (weights, nesting, No norm, Clip skip 2, more than one chunk, BREAK) conditioned as
A1111 conditions them (tests/reference/a1111_prompt.py).
"""

from __future__ import annotations

import functools
import json

import numpy as np
import pytest
import torch
from PIL import Image
from PIL.PngImagePlugin import PngInfo

from seedlab.engine.models import EMBEDDED_MODEL_DIR
from tests.helpers import compvis_alphas_cumprod, run_here
from tests.reference.a1111_prompt import a1111_conditioning

pytestmark = pytest.mark.skipif(not (EMBEDDED_MODEL_DIR / "model_index.json").exists(), reason="no embedded model")

PROMPT, SEED, STEPS, CFG, SIZE = "a red circle on a blue background", 42, 12, 2.5, 64
CASES = {  # name: (sampler as written, schedule for the reference, reference options, further A1111 keys)
    "dpmpp_2m_karras_old_name": ("DPM++ 2M Karras", "Automatic", {}, ""),
    "euler_karras": ("Euler", "Karras", {}, "Schedule type: Karras"),
    "euler_a_ensd": ("Euler a", "Automatic", {"ensd": 31337}, "ENSD: 31337"),
    "dpmpp_sde": ("DPM++ SDE", "Automatic", {}, "Schedule type: Karras"),
    "dpmpp_2m_sde_exponential": ("DPM++ 2M SDE", "Exponential", {}, "Schedule type: Exponential"),
    "dpm2_a": ("DPM2 a", "Automatic", {}, ""),
    "hires_latent": ("Euler a", "Automatic", {"hires": {"scale": 2, "upscaler": "Latent", "steps": 6,
                                                        "denoising_strength": 0.6}},
                     "Denoising strength: 0.6, Hires upscale: 2, Hires steps: 6, Hires upscaler: Latent"),
    "hires_bicubic_antialiased": ("DPM++ 2M", "Automatic", {"hires": {
        "scale": 1.5, "upscaler": "Latent (bicubic antialiased)", "steps": 0, "denoising_strength": 0.5}},
        "Denoising strength: 0.5, Hires upscale: 1.5, Hires upscaler: Latent (bicubic antialiased)"),
}


# Prompts A1111 reads with its syntax (issue 29): conditioning built as A1111 builds it, sampled with Euler.
PROMPT_CASES = {  # name: (prompt, negative prompt, emphasis, clip skip)
    "weights": ("a (red:1.4) circle on a [blue] background", "", "Original", 1),
    "nested_no_norm": ("a ((red)) circle (on a [blue] background:1.2)", "(dark:1.3)", "No norm", 1),
    "clip_skip_2": ("a red circle on a blue background", "", "Original", 2),
    "long_and_break": ("a red circle, on a blue background, with soft light, and a thin white outline, seen from "
                       "above, centred, simple shapes, flat colours BREAK a small yellow square in the corner",
                       "blurry", "Original", 1),
}


def a1111_image(decoded: torch.Tensor) -> Image.Image:
    """The decoded image as A1111's process_images_inner saves it: float32, torch.clamp((x + 1.0) / 2.0, ...), then
    255. * np.moveaxis(...) and astype(np.uint8) (truncated, where diffusers rounds)."""
    x_samples = torch.clamp((decoded.float() + 1.0) / 2.0, min=0.0, max=1.0)
    return Image.fromarray((255. * np.moveaxis(x_samples[0].cpu().numpy(), 0, 2)).astype(np.uint8))


@pytest.fixture(scope="module")
def a1111_pngs(tmp_path_factory):
    """The PNGs, as A1111 1.10 with RNG CPU would have made them on the embedded model."""
    from diffusers import StableDiffusionPipeline

    import tests.reference.a1111 as reference

    pipe = StableDiffusionPipeline.from_pretrained(EMBEDDED_MODEL_DIR)
    channels, factor = pipe.unet.config.in_channels, pipe.vae_scale_factor
    alphas_cumprod = torch.tensor(compvis_alphas_cumprod(), dtype=torch.float32)
    folder = tmp_path_factory.mktemp("a1111")
    saved = (reference.LATENT_CHANNELS, reference.LATENT_SCALE_FACTOR)
    reference.LATENT_CHANNELS, reference.LATENT_SCALE_FACTOR = channels, factor  # the embedded model's latents
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the CLI's default on a CPU: the same kernels, the same low bits
    try:
        with torch.inference_mode():
            cond, uncond = pipe.encode_prompt(PROMPT, "cpu", 1, True, "")
            for name, (sampler, schedule, options, keys) in CASES.items():
                latents = reference.a1111_txt2img(pipe.unet, alphas_cumprod, cond=cond, uncond=uncond, seed=SEED,
                                                  width=SIZE, height=SIZE, steps=STEPS, cfg_scale=CFG, sampler=sampler,
                                                  schedule=schedule, **options)
                decoded = pipe.vae.decode(latents / pipe.vae.config.scaling_factor, return_dict=False)[0]
                image = a1111_image(decoded)
                text = (f"{PROMPT}\nSteps: {STEPS}, Sampler: {sampler}, CFG scale: {CFG}, Seed: {SEED}, "
                        f"Size: {SIZE}x{SIZE}, Model hash: 6ce0161689, Model: embedded, RNG: CPU"  # as A1111 writes
                        + (f", {keys}" if keys else ""))
                info = PngInfo()
                info.add_text("parameters", text)
                image.save(folder / f"{name}.png", pnginfo=info)
            for name, (prompt, negative, emphasis, clip_skip) in PROMPT_CASES.items():
                encode = functools.partial(a1111_conditioning, pipe.tokenizer, pipe.text_encoder, emphasis=emphasis,
                                           clip_skip=clip_skip)
                latents = reference.a1111_txt2img(pipe.unet, alphas_cumprod, cond=encode(prompt),
                                                  uncond=encode(negative), seed=SEED, width=SIZE, height=SIZE,
                                                  steps=STEPS, cfg_scale=CFG, sampler="Euler")
                decoded = pipe.vae.decode(latents / pipe.vae.config.scaling_factor, return_dict=False)[0]
                image = a1111_image(decoded)
                keys = "".join([f", Emphasis: {emphasis}" if emphasis != "Original" else "",
                                f", Clip skip: {clip_skip}" if clip_skip > 1 else ""])
                text = (f"{prompt}\nNegative prompt: {negative}\nSteps: {STEPS}, Sampler: Euler, CFG scale: {CFG}, "
                        f"Seed: {SEED}, Size: {SIZE}x{SIZE}, Model hash: 6ce0161689, Model: embedded, RNG: CPU{keys}")
                info = PngInfo()
                info.add_text("parameters", text)
                image.save(folder / f"{name}.png", pnginfo=info)
    finally:
        reference.LATENT_CHANNELS, reference.LATENT_SCALE_FACTOR = saved
        torch.set_num_threads(threads)
    return folder


@pytest.mark.parametrize("name", ["dpmpp_2m_karras_old_name", "hires_latent"])
def test_an_a1111_png_regenerates_as_the_same_image_from_the_command_line(a1111_pngs, name, tmp_path):
    source, out = a1111_pngs / f"{name}.png", tmp_path / "regenerated.png"
    if name == "dpmpp_2m_karras_old_name":  # a VAE this machine lacks (as many A1111 files name): said, not fatal
        image = Image.open(source)
        info = PngInfo()
        info.add_text("parameters", image.text["parameters"] + ", VAE hash: 235745af8d, "
                                                               "VAE: vae-ft-mse-840000-ema-pruned.safetensors")
        source = tmp_path / f"{name}-vae.png"
        image.save(source, pnginfo=info)
    run = run_here("reproduce", source, "--out", out, "--json")
    assert run.stdout.strip(), run.stderr[-3000:]
    verdict = json.loads(run.stdout.strip().splitlines()[-1])
    assert verdict["max_difference"] <= 2, verdict["summary"]
    assert Image.open(out).size == Image.open(a1111_pngs / f"{name}.png").size
    if name == "dpmpp_2m_karras_old_name":
        assert any("the checkpoint's own VAE decodes the image" in note for note in verdict["notes"]), verdict


@pytest.fixture(scope="module")
def embedded():
    import seedlab

    return seedlab.load_model("embedded", torch.device("cpu"))


@pytest.mark.parametrize("name", [name for name in CASES if name not in ("dpmpp_2m_karras_old_name", "hires_latent")]
                         + list(PROMPT_CASES))
def test_an_a1111_png_regenerates_as_the_same_image(a1111_pngs, embedded, name):
    import seedlab

    recipe, _, _, notes = seedlab.read_png(a1111_pngs / f"{name}.png")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        regenerated = np.asarray(seedlab.generate(embedded, recipe).image, dtype=np.int16)
    finally:
        torch.set_num_threads(threads)
    original = np.asarray(Image.open(a1111_pngs / f"{name}.png").convert("RGB"), dtype=np.int16)
    assert notes == [] and recipe.to_8bit == "truncate"  # A1111's text: its 8-bit step
    assert regenerated.shape == original.shape
    assert np.array_equal(regenerated, original)  # the same process, the same kernels: every pixel


def a1111_euler_image(pipe, unet, encode, prompt: str, negative: str):
    """The image A1111 1.10 makes with Euler from `encode`'s conditioning on `unet` (CPU noise, one thread)."""
    import tests.reference.a1111 as reference

    alphas_cumprod = torch.tensor(compvis_alphas_cumprod(), dtype=torch.float32)
    saved = (reference.LATENT_CHANNELS, reference.LATENT_SCALE_FACTOR)
    reference.LATENT_CHANNELS, reference.LATENT_SCALE_FACTOR = pipe.unet.config.in_channels, pipe.vae_scale_factor
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with torch.inference_mode():
            latents = reference.a1111_txt2img(unet, alphas_cumprod, cond=encode(prompt), uncond=encode(negative),
                                              seed=SEED, width=SIZE, height=SIZE, steps=STEPS, cfg_scale=CFG,
                                              sampler="Euler")
            decoded = pipe.vae.decode(latents / pipe.vae.config.scaling_factor, return_dict=False)[0]
            return a1111_image(decoded)
    finally:
        reference.LATENT_CHANNELS, reference.LATENT_SCALE_FACTOR = saved
        torch.set_num_threads(threads)


LORA_PROMPT = "a red circle <lora:detail:0.8> on a blue background"


@pytest.fixture(scope="module")
def a1111_lora_png(tmp_path_factory):
    """A1111 1.10's image with a kohya LoRA named inline: merged as A1111 merges it (tests/reference/a1111_lora.py),
    conditioned and sampled as above; the LoRA kept in an A1111 models folder (models/Lora)."""
    import copy

    from diffusers import StableDiffusionPipeline

    import tests.reference.a1111_lora as lora_reference

    pipe = StableDiffusionPipeline.from_pretrained(EMBEDDED_MODEL_DIR)
    folder = tmp_path_factory.mktemp("a1111-lora")
    (folder / "models" / "Lora").mkdir(parents=True)
    path = lora_reference.write_kohya_lora(folder / "models" / "Lora" / "detail.safetensors", pipe.unet,
                                           pipe.text_encoder, rank=4, alpha=2.0, relative_std=0.3)
    text, loras = lora_reference.parse_extra_networks(LORA_PROMPT)
    unet, text_encoder = copy.deepcopy(pipe.unet), copy.deepcopy(pipe.text_encoder)
    assert lora_reference.apply_a1111_loras(unet, text_encoder, [(path, te, un) for _, te, un in loras]) > 0
    image = a1111_euler_image(pipe, unet, functools.partial(a1111_conditioning, pipe.tokenizer, text_encoder), text,
                              "blurry")
    hashes = lora_reference.lora_hashes_infotext([("detail", path)])
    info = PngInfo()
    info.add_text("parameters", f"{LORA_PROMPT}\nNegative prompt: blurry\nSteps: {STEPS}, Sampler: Euler, CFG scale: "
                                f"{CFG}, Seed: {SEED}, Size: {SIZE}x{SIZE}, Model: embedded, RNG: CPU, "
                                f'Lora hashes: "{hashes}", Version: v1.10.1')
    image.save(folder / "lora.png", pnginfo=info)
    return folder


def reproduce(png, monkeypatch, env_models=None):
    """`seedlab reproduce PNG --json` in this process, with `env_models` as SEEDLAB_MODELS_DIR (or none)."""
    from seedlab.engine.weights import library

    if env_models is None:
        monkeypatch.delenv(library.ENV, raising=False)
    else:
        monkeypatch.setenv(library.ENV, str(env_models))
    monkeypatch.setenv("SEEDLAB_CACHE_DIR", str(png.parent / "cache"))
    monkeypatch.setattr(library, "_configured", None)  # the folder is read again, as a new process reads it
    monkeypatch.setattr(library, "_HASHES", library._HashCache())
    return run_here("reproduce", png, "--json")


def test_an_a1111_png_with_a_kohya_lora_in_the_models_folder_regenerates_as_the_same_image(a1111_lora_png,
                                                                                            monkeypatch):
    run = reproduce(a1111_lora_png / "lora.png", monkeypatch, a1111_lora_png / "models")
    assert run.stdout.strip(), run.stderr[-3000:]
    verdict = json.loads(run.stdout.strip().splitlines()[-1])
    assert verdict["max_difference"] <= 2, verdict["summary"]
    assert not any("LoRA" in note for note in verdict.get("notes", [])), verdict


def test_without_its_lora_the_command_line_names_it_its_hash_and_the_models_folder(a1111_lora_png, monkeypatch):
    run = reproduce(a1111_lora_png / "lora.png", monkeypatch)
    assert run.returncode == 2 and not run.stdout
    assert run.stderr.startswith("seedlab: error: LoRA 'detail' (hash ") and "SEEDLAB_MODELS_DIR" in run.stderr


TI_PROMPT = "a red circle in inkstyle on a blue background"


@pytest.fixture(scope="module")
def a1111_ti_png(tmp_path_factory):
    """A1111 1.10's image with a textual-inversion embedding (an A1111 .pt) named in the prompt, conditioned as A1111
    conditions it (tests/reference/a1111_prompt.py's EmbeddingDatabase), the file kept in models/embeddings."""
    from diffusers import StableDiffusionPipeline

    from tests.reference.a1111_prompt import EmbeddingDatabase, a1111_ti_hashes

    pipe = StableDiffusionPipeline.from_pretrained(EMBEDDED_MODEL_DIR)
    folder = tmp_path_factory.mktemp("a1111-ti")
    (folder / "models" / "embeddings").mkdir(parents=True)
    width = pipe.text_encoder.get_input_embeddings().weight.shape[1]
    vectors = torch.randn(2, width, generator=torch.Generator().manual_seed(3)) * 0.5
    path = folder / "models" / "embeddings" / "inkstyle.pt"
    torch.save({"string_to_token": {"*": 265}, "string_to_param": {"*": vectors}, "name": "inkstyle"}, path)
    database = EmbeddingDatabase(pipe.tokenizer, expected_shape=width)
    database.load_from_file(str(path), path.name)
    encode = functools.partial(a1111_conditioning, pipe.tokenizer, pipe.text_encoder, embedding_db=database)
    image = a1111_euler_image(pipe, pipe.unet, encode, TI_PROMPT, "blurry")
    with torch.inference_mode():
        hashes = a1111_ti_hashes(pipe.tokenizer, pipe.text_encoder, TI_PROMPT, "blurry", database)
    assert hashes.startswith("inkstyle: ")
    info = PngInfo()
    info.add_text("parameters", f"{TI_PROMPT}\nNegative prompt: blurry\nSteps: {STEPS}, Sampler: Euler, CFG scale: "
                                f"{CFG}, Seed: {SEED}, Size: {SIZE}x{SIZE}, Model: embedded, RNG: CPU, "
                                f'TI hashes: "{hashes}", Version: v1.10.1')
    image.save(folder / "ti.png", pnginfo=info)
    return folder


def test_an_a1111_png_with_an_embedding_in_the_models_folder_regenerates_as_the_same_image(a1111_ti_png, monkeypatch):
    run = reproduce(a1111_ti_png / "ti.png", monkeypatch, a1111_ti_png / "models")
    assert run.stdout.strip(), run.stderr[-3000:]
    verdict = json.loads(run.stdout.strip().splitlines()[-1])
    assert verdict["max_difference"] <= 2, verdict["summary"]
    assert not any("embedding" in note for note in verdict["notes"]), verdict  # found, with its hash
    # No models folder: the word is read as text, and the verdict says why.
    run = reproduce(a1111_ti_png / "ti.png", monkeypatch)
    without = json.loads(run.stdout.strip().splitlines()[-1])
    assert without["max_difference"] > 2
    assert any(note.startswith("embedding inkstyle (hash ") and "not in the models folder" in note
               for note in without["notes"]), without
