"""The recipe: one immutable, validated value that describes an image completely.

Every field is defined once, here, with its `Spec`: type, default, allowed range, UI label and
help, link key, A1111 infotext key and CLI option. Validation, the UI controls, the API handlers'
parameters, links, PNG text and the CLI options are all derived from these definitions, so adding a
field is its definition here plus its meaning (where it acts: noise.py, generation.py). A new field goes last and
its default keeps every earlier image's pixels: links, PNGs and sweep headers that lack it read it as the default.

Field names follow diffusers' call arguments. A bad value raises `RecipeError` (a ValueError)
listing every bad field with the value and the allowed range; each layer names the field its own
way (the UI by its label, a link by its key, the CLI by its option).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .samplers.names import COMFY_SCHEDULES

# FieldError, RecipeError, Spec and the size limits are part of this module's API too.
from .spec import A1111_HASH, MAX_SIZE, MIN_SIZE, SIZE_MULTIPLE, FieldError, RecipeError, Spec
from .validation import MAX_HIRES_SCALE, check_hires, check_loras, check_preview, check_uint32_seeds
from .weights import vae_names

MAX_SEED = 2**64 - 1  # what torch's manual_seed accepts; ComfyUI and Fooocus seeds reach 2**63
DEFAULT_MODEL = "embedded"  # the checkpoint in seedlab/embedded_model, and the model of a recipe that names none
NEW_IMAGE_MODEL = "embedded-v2"  # seedlab/embedded_model_v2: new images' model where its weights are here
EMBEDDED_NAMES = (DEFAULT_MODEL, NEW_IMAGE_MODEL)  # the models that ship in the repository: any host may load them
EMBEDDED_FOLDERS = {DEFAULT_MODEL: Path(__file__).resolve().parents[1] / "embedded_model",
                    NEW_IMAGE_MODEL: Path(__file__).resolve().parents[1] / "embedded_model_v2"}
DEFAULT_SCHEDULER = "default"  # the model's own scheduler; resolved to a class name at generation
# Appended only: a value keeps its meaning. The last four are other tools' noise (random_sources.py).
RNG_SOURCES = ("cpu", "device", "numpy-pcg64", "cuda-philox", "numpy-mt19937", "std-libstdc++", "std-libc++",
               "std-msvc")
DTYPES = ("float32", "float16", "bfloat16")
MAX_PROMPT_CHARS = 2000
MAX_STEPS = 200
MAX_GUIDANCE = 50.0
# A1111's "Schedule type" labels (modules/sd_schedulers.py); Automatic is the sampler's own default.
SCHEDULES = ("Automatic", "Uniform", "Karras", "Exponential", "Polyexponential", "SGM Uniform", "KL Optimal",
             "Align Your Steps", "Simple", "Normal", "DDIM", "Beta")
# A1111's latent upscalers for hires fix (processing.latent_upscale_modes): interpolation mode, antialias.
LATENT_UPSCALERS = {"Latent": ("bilinear", False), "Latent (antialiased)": ("bilinear", True),
                    "Latent (bicubic)": ("bicubic", False), "Latent (bicubic antialiased)": ("bicubic", True),
                    "Latent (nearest)": ("nearest", False), "Latent (nearest-exact)": ("nearest-exact", False),
                    # ComfyUI's LatentUpscale methods: the mode of the same name; bislerp is its own (upscale.py)
                    "nearest-exact": ("nearest-exact", False), "bilinear": ("bilinear", False),
                    "area": ("area", False), "bicubic": ("bicubic", False), "bislerp": ("bislerp", False)}
PROMPT_SYNTAXES = ("plain", "a1111", "comfyui", "novelai")
MAX_LORA_CHARS = 1000
# ComfyUI's default_noise_sampler: a CPU generator seeded with seed + 1 since PR 11528, with the seed before it.
COMFYUI_NOISE = ("seed+1", "seed")
EIGHT_BIT_STEPS = ("round", "truncate")  # the decoded image to 8 bits: diffusers rounds, A1111 and ComfyUI truncate
EMPHASES = ("Original", "No norm", "None")  # A1111's emphasis modes (modules/sd_emphasis.py)


def embedded_here() -> list[str]:
    """The embedded models whose weights this checkout holds, newest first (a checkout may lack a folder)."""
    return [name for name in reversed(EMBEDDED_NAMES) if (EMBEDDED_FOLDERS[name] / "model_index.json").exists()]


def new_image_model() -> str:
    """What new images are made with when no model is named: embedded-v2, or the first embedded model where this
    checkout lacks embedded-v2's weights."""
    here = embedded_here()
    return here[0] if here else NEW_IMAGE_MODEL


def _spec(default: Any = dataclasses.MISSING, **spec: Any) -> Any:
    return dataclasses.field(default=default, metadata={"spec": Spec(**spec)})


@dataclass(frozen=True)
class Recipe:
    """Everything needed to regenerate one image, bit for bit, on the same environment."""

    prompt: str = _spec(kind="text", high=MAX_PROMPT_CHARS, label="Prompt", link="prompt", cli="--prompt",
                        help="what the image shows")
    seed: int = _spec(0, kind="seed", high=MAX_SEED, label="Seed", link="seed", cli="--seed", a1111="Seed",
                      help="the starting noise: 0 to 18446744073709551615")
    negative_prompt: str = _spec("", kind="text", high=MAX_PROMPT_CHARS, label="Negative prompt", link="neg",
                                 cli="--negative", help="what the image should not show")
    model: str = _spec(DEFAULT_MODEL, kind="name", high=300, label="Model", link="model", cli="--model",
                       a1111="Model",
                       help='"embedded", "embedded-v2" (where its weights are here), a diffusers folder or a hub id')
    scheduler: str = _spec(DEFAULT_SCHEDULER, kind="name", high=300, label="Scheduler", link="sampler",
                           cli="--scheduler", a1111="Sampler",
                           help="one of A1111's samplers (DPM++ 2M, Euler a, ...: run as A1111 runs them) or a "
                                "diffusers scheduler class compatible with the model")
    num_inference_steps: int = _spec(20, kind="int", low=1, high=MAX_STEPS, label="Steps", link="steps",
                                     cli="--steps", a1111="Steps", help="denoising steps")
    guidance_scale: float = _spec(7.5, kind="float", high=MAX_GUIDANCE, label="Guidance scale", link="cfg",
                                  cli="--guidance", a1111="CFG scale", help="how strongly the prompt is followed")
    width: int = _spec(64, kind="int", low=MIN_SIZE, high=MAX_SIZE, multiple=SIZE_MULTIPLE, label="Width",
                       link="w", cli="--width", a1111="Size", help="image width in pixels")
    height: int = _spec(64, kind="int", low=MIN_SIZE, high=MAX_SIZE, multiple=SIZE_MULTIPLE, label="Height",
                        link="h", cli="--height", a1111="Size", help="image height in pixels")
    rng: str = _spec("cpu", kind="choice", choices=RNG_SOURCES, label="RNG source", link="rng", cli="--rng",
                     a1111="RNG", help="where the noise comes from: cpu (portable, plain diffusers), device "
                                       "(the GPU's own), numpy-pcg64 (mindone.diffusers on Ascend), "
                                       "cuda-philox (a CUDA GPU's noise on any machine, A1111's NV), "
                                       "numpy-mt19937 (Apple's Core ML pipeline, Mochi Diffusion; seeds up to "
                                       "4294967295), std-libstdc++ / std-libc++ / std-msvc (stable-diffusion.cpp's "
                                       "std_default built on Linux / macOS / Windows)")
    variation_seed: int = _spec(0, kind="seed", high=MAX_SEED, label="Variation seed", link="vseed",
                                cli="--variation-seed", a1111="Variation seed", a1111_when="variation_strength",
                                help="a second seed whose noise is blended in (A1111's variation seed)")
    variation_strength: float = _spec(0.0, kind="float", high=1.0, label="Variation strength", link="vstr",
                                      cli="--variation-strength", a1111="Variation seed strength",
                                      a1111_when="variation_strength",
                                      help="0 keeps the seed's own noise exactly, 1 is the variation seed's")
    seed_resize_from: tuple[int, int] | None = _spec(None, kind="size", label="Seed resize from", link="resize",
                                                     cli="--seed-resize-from", a1111="Seed resize from",
                                                     a1111_when="seed_resize_from",
                                                     help="WIDTHxHEIGHT the noise is drawn at, so a seed keeps "
                                                          "its composition at another size (empty: off)")
    deterministic: bool = _spec(False, kind="bool", label="Full determinism", link="det", cli="--deterministic",
                                a1111="Full determinism",
                                help="deterministic kernels for this generation (slower on a GPU)")
    dtype: str = _spec("float32", kind="choice", choices=DTYPES, label="dtype", link="dtype", cli="--dtype",
                       a1111="Dtype", help="the weights' precision")
    # How the prompts are read: as the text they are (plain, every earlier recipe), or as A1111, ComfyUI or NovelAI do.
    prompt_syntax: str = _spec("plain", kind="choice", choices=PROMPT_SYNTAXES, label="Prompt syntax", link="syntax",
                               cli="--prompt-syntax", a1111="Prompt syntax", a1111_when="prompt_syntax",
                               help="plain: the text as it is; a1111: (word:1.2), [word], BREAK and long prompts in "
                                    "chunks, as A1111 reads them; comfyui: (word:1.2) and embedding:NAME as ComfyUI "
                                    "weighs them; novelai: {word}, [word] as NovelAI's 1.05 (SD 1.x, 2.x)")
    emphasis: str = _spec("Original", kind="choice", choices=EMPHASES, label="Emphasis", link="emphasis",
                          cli="--emphasis", a1111="Emphasis", a1111_when="emphasis",
                          help="A1111's emphasis mode: Original keeps the mean, No norm does not, None ignores weights")
    clip_skip: int = _spec(1, kind="int", low=1, high=12, label="Clip skip", link="clipskip", cli="--clip-skip",
                           a1111="Clip skip", a1111_when="clip_skip",
                           help="A1111's Clip skip, ComfyUI's CLIPSetLastLayer -N: the text encoder's layer from the "
                                "end (1: the last)")
    # A1111's sampler settings (used by A1111 sampler names in `scheduler`: "DPM++ 2M", "Euler a", ...).
    schedule: str = _spec("Automatic", kind="choice", choices=(*SCHEDULES, *COMFY_SCHEDULES), label="Schedule type",
                          link="schedule", cli="--schedule", a1111="Schedule type", a1111_when="schedule",
                          help="the noise schedule of an A1111 sampler (Automatic: the sampler's own) or of a "
                               "ComfyUI sampler (its scheduler: normal, karras, ...)")
    eta: float = _spec(1.0, kind="float", high=1.0, label="Eta", link="eta", cli="--eta", a1111="Eta", a1111_when="eta",
                       help="how much noise ancestral and SDE samplers add back at each step (A1111's default 1)")
    eta_noise_seed_delta: int = _spec(0, kind="int", high=2**32 - 1, label="ENSD", link="ensd", cli="--ensd",
                                      a1111="ENSD", a1111_when="eta_noise_seed_delta",
                                      help="A1111's eta noise seed delta: ancestral noise comes from seed + ENSD "
                                           "(31337 in NovelAI-style setups; 0: off)")
    s_churn: float = _spec(0.0, kind="float", high=100.0, label="Sigma churn", link="churn", cli="--s-churn",
                           a1111="Sigma churn", a1111_when="s_churn", help="extra noise per step for Euler, Heun, DPM2")
    s_tmin: float = _spec(0.0, kind="float", high=1000.0, label="Sigma tmin", link="tmin", cli="--s-tmin",
                          a1111="Sigma tmin", a1111_when="s_tmin", help="churn only at sigmas from this level")
    s_tmax: float = _spec(0.0, kind="float", high=1000.0, label="Sigma tmax", link="tmax", cli="--s-tmax",
                          a1111="Sigma tmax", a1111_when="s_tmax",
                          help="churn only at sigmas up to this level (0: any)")
    s_noise: float = _spec(1.0, kind="float", high=2.0, label="Sigma noise", link="snoise", cli="--s-noise",
                           a1111="Sigma noise", a1111_when="s_noise", help="the churn noise's scale")
    schedule_sigma_min: float = _spec(0.0, kind="float", high=1000.0, label="Schedule min sigma", link="smin",
                                      cli="--sigma-min", a1111="Schedule min sigma", a1111_when="schedule_sigma_min",
                                      help="the schedule's lowest sigma (0: the model's)")
    schedule_sigma_max: float = _spec(0.0, kind="float", high=1000.0, label="Schedule max sigma", link="smax",
                                      cli="--sigma-max", a1111="Schedule max sigma", a1111_when="schedule_sigma_max",
                                      help="the schedule's highest sigma (0: the model's)")
    schedule_rho: float = _spec(0.0, kind="float", high=100.0, label="Schedule rho", link="rho", cli="--rho",
                                a1111="Schedule rho", a1111_when="schedule_rho",
                                help="Karras / Polyexponential rho (0: the schedule's own, 7 and 1)")
    # A1111's hires fix with a latent upscaler: a second pass at the larger size.
    hires_scale: float = _spec(0.0, kind="float", high=MAX_HIRES_SCALE, label="Hires upscale", link="hr",
                               cli="--hires-scale", a1111="Hires upscale", a1111_when="hires_scale",
                               help="hires fix: upscale the latents by this factor and denoise again (0: off)")
    hires_upscaler: str = _spec("Latent", kind="choice", choices=tuple(LATENT_UPSCALERS), label="Hires upscaler",
                                link="hrup", cli="--hires-upscaler", a1111="Hires upscaler", a1111_when="hires_scale",
                                help="how the latents are enlarged (A1111's latent upscalers)")
    hires_steps: int = _spec(0, kind="int", high=MAX_STEPS, label="Hires steps", link="hrsteps", cli="--hires-steps",
                             a1111="Hires steps", a1111_when="hires_steps", help="the second pass's steps (0: Steps)")
    denoising_strength: float = _spec(0.7, kind="float", high=1.0, label="Denoising strength", link="denoise",
                                      cli="--denoising-strength", a1111="Denoising strength", a1111_when="hires_scale",
                                      help="how much of the upscaled image the second pass changes")
    hires_sampler: str = _spec("", kind="text", high=300, label="Hires sampler", link="hrsampler",
                               cli="--hires-sampler", a1111="Hires sampler", a1111_when="hires_sampler",
                               help="the second pass's A1111 sampler (empty: the same)")
    hires_schedule: str = _spec("", kind="choice", choices=("", *SCHEDULES, *COMFY_SCHEDULES),
                                label="Hires schedule type", link="hrschedule", cli="--hires-schedule",
                                a1111="Hires schedule type", a1111_when="hires_schedule",
                                help="the second pass's schedule (empty: the same)")
    hires_cfg: float = _spec(0.0, kind="float", high=MAX_GUIDANCE, label="Hires CFG scale", link="hrcfg",
                             cli="--hires-cfg", a1111="Hires CFG Scale", a1111_when="hires_cfg",
                             help="the second pass's guidance scale (0: the same; Forge's Hires CFG Scale)")
    hires_seed: int = _spec(-1, kind="seed", low=-1, high=MAX_SEED, label="Hires seed", link="hrseed",
                            cli="--hires-seed", a1111="Hires seed", a1111_when="hires_seed",
                            help="the seed of the second pass's noise (-1: the seed; a ComfyUI graph's second "
                                 "KSampler may have its own)")

    # LoRA from the models folder (--models-dir): A1111's tags, also for prompts of any syntax (ComfyUI's loaders).
    loras: str = _spec("", kind="text", high=MAX_LORA_CHARS, label="LoRA", link="lora", cli="--lora", a1111="LoRA",
                       a1111_when="loras",
                       help='LoRAs from the models folder as A1111 tags: "<lora:NAME:WEIGHT>", "<lora:NAME:TE:UNET>" '
                            "for the text encoder's and the UNet's weights; an a1111-syntax prompt may hold them too")
    lora_hashes: str = _spec("", kind="text", high=MAX_LORA_CHARS, label="LoRA hashes", link="lorahash",
                             cli="--lora-hashes", a1111="Lora hashes", a1111_when="lora_hashes",
                             help='each LoRA\'s A1111 hash, "NAME: HASH, ...": the file with that hash is used '
                                  "(filled in when an image is made)")
    ti_hashes: str = _spec("", kind="text", high=MAX_LORA_CHARS, label="Embedding hashes", link="tihash",
                           cli="--ti-hashes", a1111="TI hashes", a1111_when="ti_hashes",
                           help='the A1111 hash of each textual-inversion embedding the prompts use, "NAME: HASH, '
                                '..." (filled in when an image is made; A1111\'s TI hashes)')

    # ComfyUI's KSamplerAdvanced: a part of the schedule (its start_at_step and end_at_step, the rest denoised).
    start_step: int = _spec(0, kind="int", high=MAX_STEPS, label="Start at step", link="start", cli="--start-step",
                            a1111="Start at step", a1111_when="start_step",
                            help="ComfyUI samplers: begin at this step of the schedule, its noise at that level "
                                 "(KSamplerAdvanced's start_at_step; 0: the first)")
    end_step: int = _spec(0, kind="int", high=MAX_STEPS, label="End at step", link="end", cli="--end-step",
                          a1111="End at step", a1111_when="end_step",
                          help="ComfyUI samplers: stop after this step and denoise fully there (KSamplerAdvanced's "
                               "end_at_step without leftover noise; 0: the last)")
    # The checkpoint file's A1111 hash (models folder): which file made the image, whatever its name here.
    model_hash: str = _spec("", kind="text", high=64, label="Model hash", link="mhash", cli="--model-hash",
                            a1111="Model hash", a1111_when="model_hash",
                            help="the A1111 hash of the checkpoint file (AutoV2: 10 hex digits; the old AutoV1: 8): "
                                 "the models folder's file with this hash is used "
                                 "(filled in when a checkpoint is used)")
    # A separate VAE of the models folder (A1111's VAE setting, ComfyUI's VAELoader): the image is decoded with it.
    vae: str = _spec("", kind="text", high=300, label="VAE", link="vae", cli="--vae", a1111="VAE", a1111_when="vae",
                     help="a VAE of the models folder (VAE/ or vae/) by its file name, NAME.safetensors, that decodes "
                          "the image instead of the checkpoint's own (empty: the checkpoint's own)")
    vae_hash: str = _spec("", kind="text", high=64, label="VAE hash", link="vaehash", cli="--vae-hash",
                          a1111="VAE hash", a1111_when="vae_hash",
                          help="the A1111 hash of the VAE file (10 hex digits of its SHA-256): the VAE named must be "
                               "that file; alone, it finds the file (filled in when a VAE is used)")
    to_8bit: str = _spec("round", kind="choice", choices=EIGHT_BIT_STEPS, label="8-bit step", link="q8",
                         cli="--to-8bit", a1111="8-bit step", a1111_when="to_8bit",
                         help="how the decoded image becomes 8-bit pixels: round (diffusers' numpy_to_pil) or "
                              "truncate (A1111 and ComfyUI: 255 * x, astype(uint8)); they differ by 1 level at most")
    comfyui_noise: str = _spec("seed+1", kind="choice", choices=COMFYUI_NOISE, label="ComfyUI noise",
                               link="cnoise", cli="--comfyui-noise", a1111="ComfyUI noise",
                               a1111_when="comfyui_noise", help="the generator ComfyUI's ancestral samplers draw "
                               "from: seeded with seed + 1 (ComfyUI since PR 11528) or the seed (ComfyUI before it)")
    # A preview (previews.py): the same recipe rendered in fewer steps, no hires pass; finished, it is the full image.
    preview_steps: int = _spec(0, kind="int", high=MAX_STEPS, label="Preview steps", link="preview",
                               cli="--preview-steps", a1111="Preview steps", a1111_when="preview_steps",
                               help="a preview: this many steps from the same noise, to be finished later to the "
                                    "full image's exact pixels (0: the full image)")
    eta_ddim: float = _spec(0.0, kind="float", high=1.0, label="Eta DDIM", link="etaddim", cli="--eta-ddim",
                            a1111="Eta DDIM", a1111_when="eta_ddim",
                            help="the noise A1111's own DDIM (DDIM (A1111), DDIM CFG++ (A1111)) adds back at each "
                                 "step: A1111's Eta DDIM setting (its default 0)")

    def __post_init__(self) -> None:
        values = check_fields({name: getattr(self, name) for name in SPECS_ORDER})
        for name, value in values.items():
            object.__setattr__(self, name, value)
        if self.hires_scale:
            check_hires(self)
        if self.model_hash and not A1111_HASH.fullmatch(self.model_hash):
            raise RecipeError([FieldError("model_hash", "must be empty or an A1111 checkpoint hash, 8 to 64 hex digits "
                                                        f"(AutoV2: 10), got {self.model_hash[:70]!r}")])
        if self.loras or self.lora_hashes or self.ti_hashes or (self.prompt_syntax == "a1111" and "<" in self.prompt):
            check_loras(self)
        if self.vae or self.vae_hash:
            vae_names.check(self.vae, self.vae_hash)
        if self.preview_steps:
            check_preview(self)
        if self.rng == "numpy-mt19937":
            check_uint32_seeds(self)

    def replace(self, **changes: Any) -> Recipe:
        """A copy with some fields changed (validated again)."""
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        """The fields as Python values (a seed is an int, a size a tuple)."""
        return {name: getattr(self, name) for name in SPECS_ORDER}

    def to_json(self) -> dict[str, Any]:
        """The fields as JSON values that survive any reader: seeds as decimal text, sizes as "WxH"."""
        return {name: SPECS[name].to_json(getattr(self, name)) for name in SPECS_ORDER}

    @classmethod
    def from_dict(cls, data: Any) -> Recipe:
        """Build a recipe from untrusted data (JSON, an API call): unknown fields are an error."""
        if not isinstance(data, dict):
            raise ValueError(f"a recipe must be a JSON object, got {type(data).__name__}")
        unknown = sorted(str(key)[:40] for key in set(data) - set(SPECS))
        if unknown:
            raise ValueError(f"unknown recipe field(s): {', '.join(unknown)}; allowed: {', '.join(SPECS_ORDER)}")
        if "prompt" not in data:
            raise RecipeError([FieldError("prompt", "is missing")])
        return cls(**{name: SPECS[name].coerce(value) for name, value in data.items()})

    @property
    def hires_size(self) -> tuple[int, int]:
        """Hires fix's second-pass size: A1111's int(size * Hires upscale)."""
        return int(self.width * self.hires_scale), int(self.height * self.hires_scale)

    @property
    def hires_noise_seed(self) -> int:
        """The second pass's seed: its own (a ComfyUI graph's second KSampler) or the image's (A1111)."""
        return self.seed if self.hires_seed < 0 else self.hires_seed

    @property
    def hires_sigma_count(self) -> int:
        """Noise levels the second pass computes to take its steps from: steps / strength (A1111, ComfyUI)."""
        return int((self.hires_steps or self.num_inference_steps) / self.denoising_strength) if self.hires_scale else 0

    @property
    def total_steps(self) -> int:
        """The denoising steps asked for, both passes of hires fix counted (a preview: its own steps)."""
        if self.preview_steps:
            return self.preview_steps
        return self.num_inference_steps + ((self.hires_steps or self.num_inference_steps) if self.hires_scale else 0)

    @property
    def rendered(self) -> Recipe:
        """The recipe whose pixels are computed: a preview's short render (its steps, no hires pass), else itself."""
        if not self.preview_steps:
            return self
        return self.replace(num_inference_steps=self.preview_steps, hires_scale=0.0, preview_steps=0)

    @property
    def noise_is_plain(self) -> bool:
        """True when the starting noise is the seed's own (no variation seed, no seed resize)."""
        return self.variation_strength == 0 and self.seed_resize_from in (None, (self.width, self.height))


SPECS: dict[str, Spec] = {field.name: field.metadata["spec"] for field in dataclasses.fields(Recipe)}
SPECS_ORDER = tuple(SPECS)


def check_fields(values: dict[str, Any]) -> dict[str, Any]:
    """Check every field's value; raise one RecipeError naming every bad field."""
    checked, errors = {}, []
    for name, value in values.items():
        try:
            checked[name] = SPECS[name].check(name, value)
        except FieldError as error:
            errors.append(error)
    if errors:
        raise RecipeError(errors)
    return checked


def join_prompt(base: str, variation: str) -> str:
    """Append a variation to a base prompt: ", artsy" is appended as written, "artsy" after ", "."""
    variation = variation.rstrip()
    if not variation.strip():
        return base
    if variation[0] in ",;.:!? " or not base:
        return base + variation
    return f"{base}, {variation}"
