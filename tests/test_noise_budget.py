"""The noise a request draws is priced by what it draws (issue 52): every value taken from a noise source during a real
generation is counted (torch's generator, numpy's PCG64, CUDA's Philox replayed, the other tools' sources), and the
budget's count (budget.noise_values) covers it, for every model family's latent layout, every source and each kind of
sampler, within 1.5 times where the count is exact; a sampler a source cannot drive is refused before anything
is drawn."""

import math

import numpy as np
import pytest
import torch

import seedlab
from seedlab import Recipe
from seedlab.engine import cpu_noise, philox, random_sources
from seedlab.engine import noise as noise_module
from seedlab.engine.latents import latent_shape
from seedlab.engine.models import ModelStore
from seedlab.engine.recipe import RecipeError
from seedlab.engine.samplers import a1111 as a1111_sampling
from seedlab.engine.samplers import sdcpp as sdcpp_sampling
from seedlab.engine.samplers.names import A1111_SAMPLERS, SDCPP_SAMPLERS, consumes_step_noise
from seedlab.serving.admission import Admission
from seedlab.serving.budget import MOST_NOISE_PER_PIXEL, NOISE_SECONDS, noise_values, noise_values_hires
from tests.tiny import tiny_pipeline
from tests.tiny_families import save_tiny_ddim, save_tiny_flux, save_tiny_sd3, save_tiny_sdxl


class Drawn:
    """Counts every noise value a generation takes from any source."""

    def __init__(self, monkeypatch):
        self.values = 0
        randn, gauss, stream, cuda, pcg = (torch.randn, random_sources.apple_gauss, random_sources.Stream.randn,
                                           philox.cuda_normal, noise_module._numpy_noise)

        def counted(function, size_of):
            def wrapper(*args, **kwargs):
                out = function(*args, **kwargs)
                self.values += size_of(out)
                return out
            return wrapper

        monkeypatch.setattr(torch, "randn", counted(randn, lambda out: out.numel()))
        # Where torch.randn does not give the AVX2 values (ARM), cpu_noise computes them from torch.rand's uniforms.
        cpu_noise.torch_is_avx2()  # its once-a-process check draws too: before counting starts
        monkeypatch.setattr(torch, "rand", counted(torch.rand, lambda out: out.numel()))
        monkeypatch.setattr(random_sources, "apple_gauss", counted(gauss, lambda out: out.size))  # numpy-mt19937
        monkeypatch.setattr(random_sources.Stream, "randn", counted(stream, lambda out: out.size))
        monkeypatch.setattr(noise_module, "_numpy_noise", counted(pcg, lambda out: out.numel()))
        for module in (noise_module, a1111_sampling, sdcpp_sampling, philox):
            if getattr(module, "cuda_normal", None) is cuda:
                monkeypatch.setattr(module, "cuda_normal", counted(cuda, lambda out: out.size))

    def of(self, model, recipe: Recipe) -> int:
        self.values = 0
        seedlab.generate(model, recipe)
        return self.values


@pytest.fixture(scope="module")
def sd(tmp_path_factory):
    return seedlab.describe("tiny", tiny_pipeline(tmp_path_factory.mktemp("tok")), torch.device("cpu"))


FAMILIES = {"sdxl": save_tiny_sdxl, "sd3": save_tiny_sd3, "flux": save_tiny_flux, "ddim": save_tiny_ddim}


@pytest.fixture(scope="module")
def families(tmp_path_factory):
    return {name: seedlab.load_model(str(build(tmp_path_factory.mktemp(name))), torch.device("cpu"))
            for name, build in FAMILIES.items()}


def priced(model, recipe: Recipe) -> int:
    per_pixel = model.info.noise_per_pixel
    return noise_values(recipe, per_pixel) + (noise_values_hires(recipe, per_pixel) if recipe.hires_scale else 0)


def test_every_family_knows_its_latent_values_per_pixel(sd, families):
    for name, model in {"sd": sd, **families}.items():
        width, height = model.native_size
        shape = latent_shape(model.pipeline, width, height) if name != "ddim" else (1, 3, height, width)
        assert model.info.noise_per_pixel * width * height == pytest.approx(math.prod(shape)), name
    assert max(model.info.noise_per_pixel for model in families.values()) <= MOST_NOISE_PER_PIXEL


SOURCES = ["cpu", "numpy-pcg64", "cuda-philox", "numpy-mt19937", "std-libstdc++", "std-libc++", "std-msvc"]
STARTS = {"plain": {}, "variation": {"variation_seed": 9, "variation_strength": 0.3},
          "resize": {"seed_resize_from": (96, 64)},
          "variation and resize": {"variation_seed": 9, "variation_strength": 0.3, "seed_resize_from": (48, 80)}}


@pytest.mark.parametrize("rng", SOURCES)
@pytest.mark.parametrize("start", list(STARTS))
def test_the_starting_noise_is_priced_as_drawn(sd, monkeypatch, rng, start):
    drawn = Drawn(monkeypatch)
    recipe = Recipe(prompt="a red circle", seed=4, num_inference_steps=2, model="tiny", scheduler="DPM++ 2M",
                    rng=rng, width=64, height=64, **STARTS[start])
    count = drawn.of(sd, recipe)
    assert count <= priced(sd, recipe) <= 1.5 * count


@pytest.mark.parametrize("family", list(FAMILIES))
@pytest.mark.parametrize("rng", ["cpu", "std-msvc"])
def test_each_familys_noise_is_priced_as_drawn(families, monkeypatch, family, rng):
    model = families[family]
    width, height = model.native_size
    drawn = Drawn(monkeypatch)
    recipe = Recipe(prompt="" if family == "ddim" else "a red circle", seed=4, num_inference_steps=2,
                    model=model.name, rng=rng, width=width, height=height, guidance_scale=model.default_guidance)
    if family == "ddim" and rng != "cpu":
        pytest.skip("an unconditional pipeline draws its own noise with torch's generator")
    count = drawn.of(model, recipe)
    # a diffusers class may draw a latent a step (its generator); DDIM's and flow matching's draw none
    assert count <= priced(model, recipe) <= count * (1 + recipe.num_inference_steps) * 1.5


STEPPING = [*(name for name in A1111_SAMPLERS if consumes_step_noise(name)), "euler_ancestral", "dpmpp_2m_sde",
            "dpmpp_sde", "er_sde", "seeds_3", "sa_solver_pece", "DDPMScheduler", "EulerAncestralDiscreteScheduler",
            *(name for name in SDCPP_SAMPLERS if consumes_step_noise(name))]


@pytest.mark.parametrize("scheduler", STEPPING)
@pytest.mark.parametrize("steps", [3, 12])
def test_step_noise_is_priced_for_every_sampler_that_draws(sd, monkeypatch, scheduler, steps):
    drawn = Drawn(monkeypatch)
    rng = "std-msvc" if scheduler.endswith("(sd.cpp)") else "cpu"
    recipe = Recipe(prompt="a red circle", seed=4, num_inference_steps=steps, model="tiny", scheduler=scheduler,
                    rng=rng, width=32, height=32)
    count = drawn.of(sd, recipe)
    assert count <= priced(sd, recipe), f"{scheduler} drew {count} values, priced {priced(sd, recipe)}"


def test_hires_fixs_second_pass_is_priced_as_drawn(sd, monkeypatch):
    drawn = Drawn(monkeypatch)
    recipe = Recipe(prompt="a red circle", seed=4, num_inference_steps=3, model="tiny", scheduler="DPM++ 2M",
                    hires_scale=2.0, hires_steps=3, hires_sampler="Euler a", denoising_strength=0.5, width=32,
                    height=32, rng="cuda-philox")
    count = drawn.of(sd, recipe)
    assert count <= priced(sd, recipe) <= 1.5 * count


def test_a_seed_resize_with_a_slow_source_is_priced_by_the_models_channels(sd):
    """The embedded model draws 14 channels at 1/4: 16 images from a 4096x4096 seed resize with numpy-mt19937 took
    190 s of CPU and were priced 60 s when the count assumed 4 channels at 1/8."""
    recipe = Recipe(prompt="a", seed=1, num_inference_steps=1, rng="numpy-mt19937", width=64, height=64,
                    seed_resize_from=(4096, 4096))
    seconds = 16 * noise_values(recipe, 14 / 16) * NOISE_SECONDS["numpy-mt19937"]
    assert seconds > 120  # over the default per-request limit: refused, not run


def test_a_sampler_a_source_cannot_drive_is_refused_at_admission_naming_those_that_can(sd):
    store = ModelStore(["tiny"], device=torch.device("cpu"))
    store.add(sd)
    admission = Admission(store)
    for rng in ("numpy-mt19937", "std-msvc", "numpy-pcg64"):
        for scheduler in ("Euler", "Euler a", "Heun"):  # A1111's Euler draws its churn noise at every step
            with pytest.raises(RecipeError) as refused:
                admission.recipe({"prompt": "a", "scheduler": scheduler, "rng": rng})
            message = str(refused.value)
            assert message.startswith("rng cannot be used here") and "DPM++ 2M" in message
            assert "Euler," not in message and "Euler)" not in message
        with pytest.raises(RecipeError, match="eta_ddim|DDIM"):
            admission.recipe({"prompt": "a", "scheduler": "DDIM (A1111)", "eta_ddim": 0.5, "rng": rng})
        with pytest.raises(RecipeError, match="hires_sampler is Euler a: rng"):
            admission.recipe({"prompt": "a", "scheduler": "DPM++ 2M", "hires_scale": 1.5, "hires_sampler": "Euler a",
                              "rng": rng})
        recipe = admission.recipe({"prompt": "a", "scheduler": "DPM++ 2M", "rng": rng, "width": 32, "height": 32,
                                   "num_inference_steps": 2})
        assert np.asarray(seedlab.generate(sd, recipe).image).shape == (32, 32, 3)  # the samplers named do run
