"""The universal CPU baseline: float64 models, float32 interfaces, the same pixels whatever the kernels.

What it is called and recorded (CLI choices, environment, links, verdicts), what it refuses (a dtype it cannot
honour), the float64 stand-ins themselves (float32 out, equal at 1 and 2 threads), and a small subset of
bench/check_universal.py: one embedded-model recipe in fresh processes under other kernel settings and thread
counts, compared by the float output's hash and the fingerprint.
"""

import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from diffusers.models.embeddings import Timesteps, get_timestep_embedding

from seedlab import arguments, decode_link, encode_link, generate, load_model
from seedlab.engine import cpu, wide
from seedlab.engine.environment import Environment
from seedlab.engine.models import EMBEDDED_MODEL_DIR, ModelStore
from seedlab.engine.recipe import Recipe
from seedlab.serving.reproduction import Original, compare
from tests.helpers import torch_threads

ROOT = Path(__file__).resolve().parents[1]
HAS_MODEL = (EMBEDDED_MODEL_DIR / "model_index.json").exists()


@pytest.fixture
def universal(monkeypatch):
    """This process asks for the universal baseline (it sets no caps, so nothing else changes)."""
    monkeypatch.setenv(cpu.ENV_VAR, cpu.UNIVERSAL)


def test_universal_is_a_level_with_no_caps_and_a_name(universal):
    assert cpu.UNIVERSAL in cpu.LEVELS and cpu.BASELINES[cpu.UNIVERSAL] == {}
    assert cpu.in_force() == "universal" and cpu.level_for("universal") == "universal"
    assert "any" in cpu.describe("universal")
    with pytest.raises(ValueError, match=r"--cpu-isa must be one of avx2, portable, native, universal, got 'wide'"):
        cpu.check_level("wide", "--cpu-isa")


def test_the_cli_names_the_field_and_universal_among_the_allowed_values():
    parser = arguments.build_parser()
    assert parser.parse_args(["grid", "--seeds", "1", "--out", "x", "--cpu-isa", "universal"]).cpu_isa == "universal"
    with pytest.raises(arguments.UsageError, match=r"--cpu-isa: invalid choice: 'wide' \(choose from 'avx2', "
                                                    r"'portable', 'native', 'universal'\)"):
        parser.parse_args(["grid", "--seeds", "1", "--out", "x", "--cpu-isa", "wide"])


def _environment(isa: str, threads: int = 1, vendor: str = "AMD") -> Environment:
    switches = {name: False for name in ("deterministic_algorithms", "deterministic_warn_only", "cudnn_deterministic",
                                         "cudnn_benchmark", "matmul_tf32", "cudnn_tf32")}
    return Environment.from_dict({"seedlab": "0.1.0", "diffusers": "0.42.1", "torch": "2.13.0+cpu",
                                  "device": "cpu: x86_64", "dtype": "float32", "threads": threads,
                                  "cublas_workspace_config": ":16:8", "switches": switches, "cpu_isa": isa,
                                  "cpu_vendor": vendor})


def test_universal_round_trips_through_links_and_an_old_readers_check():
    environment = _environment("universal")
    assert Environment.from_dict(environment.to_dict()) == environment
    link = encode_link(Recipe(prompt="a red circle", seed=3), "ab" * 32, environment, "http://x")
    assert "~universal~AMD" in link
    assert decode_link(link)[2].cpu_isa == "universal"
    assert cpu.check_record("universal", "environment cpu_isa") == "universal"  # what readers before it check


def test_an_exact_match_under_universal_says_it_is_exact_on_any_machine():
    from PIL import Image

    from seedlab.engine.image import Result, fingerprint

    image = Image.new("RGB", (8, 8), (10, 20, 30))
    made = Result(recipe=Recipe(prompt="x"), image=image, fingerprint=fingerprint(image),
                  environment=_environment("universal", threads=2, vendor="Intel"))
    verdict = compare(made, Original(made.recipe, made.fingerprint, _environment("universal")))
    assert verdict.exact and "exact on any machine" in verdict.summary
    assert not any("vendor" in difference for difference in verdict.environment_differences)
    other = compare(made, Original(made.recipe, made.fingerprint, _environment("avx2")))
    assert other.exact and "any machine" not in other.summary


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_a_dtype_universal_cannot_honour_is_refused_naming_both(universal, dtype):
    with pytest.raises(ValueError, match=rf"dtype must be float32 under the universal CPU baseline.*got '{dtype}'"):
        load_model("embedded", torch.device("cpu"), dtype=dtype)
    with pytest.raises(ValueError, match=r"universal"):
        ModelStore(["embedded"], device=torch.device("cpu"), dtype=dtype)


def test_a_wide_module_computes_in_float64_and_answers_float32():
    torch.manual_seed(0)  # the test's own weights; nothing of SeedLab's draws from the global generator
    narrow = torch.nn.Sequential(torch.nn.Linear(40, 40), torch.nn.GELU(), torch.nn.Linear(40, 8))
    stand_in = wide.Wide(narrow, wide.wide_copy(narrow))
    x = torch.randn(5, 40)
    out = stand_in(x)
    assert out.dtype == torch.float32 and stand_in.wide[0].weight.dtype == torch.float64
    assert next(narrow.parameters()).dtype == torch.float32  # the original is left as it was
    assert torch.equal(out, copy.deepcopy(narrow).double()(x.double()).float())
    assert getattr(stand_in, "0")(x).dtype == torch.float32  # a part reached through the stand-in is one too


def test_a_wide_stand_in_shows_the_float32_module():
    narrow = torch.nn.Linear(4, 4)
    stand_in = wide.Wide(narrow, wide.wide_copy(narrow))
    assert stand_in.weight is narrow.weight  # attributes are the float32 module's
    assert stand_in.training is narrow.training
    assert isinstance(stand_in.forward(torch.ones(4)), torch.Tensor) and stand_in.forward(torch.ones(4)).dtype == \
        torch.float32


def test_wide_timesteps_build_the_sinusoid_in_float64():
    narrow = Timesteps(64, flip_sin_to_cos=True, downscale_freq_shift=0)
    module = wide.wide_copy(torch.nn.Sequential(narrow))[0]
    assert isinstance(module, wide.WideTimesteps)
    t = torch.tensor([999.0, 1.0, 500.5])
    embedded = module(t)
    assert embedded.dtype == torch.float64
    assert torch.allclose(embedded.float(), get_timestep_embedding(t, 64, flip_sin_to_cos=True,
                                                                   downscale_freq_shift=0), atol=1e-3)


@pytest.mark.skipif(not HAS_MODEL, reason="the embedded model is not trained here")
def test_the_embedded_unet_through_its_stand_in_is_float32_and_equal_at_1_and_2_threads(universal):
    model = load_model("embedded", torch.device("cpu"))
    pipe = model.computing()
    assert pipe is not model.pipeline and pipe.unet.dtype == torch.float32 and pipe.dtype == torch.float32
    generator = torch.Generator().manual_seed(3)
    size = pipe.unet.config.sample_size
    sample = torch.randn((2, pipe.unet.config.in_channels, size, size), generator=generator)
    context = torch.randn((2, 77, pipe.unet.config.cross_attention_dim), generator=generator)
    outputs = []
    for threads in (1, 2):
        with torch_threads(threads), torch.inference_mode():
            outputs.append(pipe.unet(sample, torch.tensor(500), encoder_hidden_states=context, return_dict=False)[0])
    assert outputs[0].dtype == torch.float32 and torch.equal(outputs[0], outputs[1])
    result = generate(model, Recipe(prompt="a red circle", seed=1, num_inference_steps=2))
    assert result.environment.cpu_isa == "universal" and result.environment.dtype == "float32"


def _image_in_a_fresh_process(settings: dict[str, str], threads: int) -> list[str]:
    """One embedded-model image made by bench/check_universal.py's child, under `settings` and `threads`."""
    environment = {**os.environ, "MKL_CBWR": "AVX2", "ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2",
                   **settings, cpu.ENV_VAR: "universal"}
    environment.pop(cpu.FOUND_VAR, None)
    code = ("import sys, json; sys.path.insert(0, 'bench'); import check_universal as c, torch; "
            f"torch.set_num_threads({threads}); "
            "c.EMBEDDED = {'Euler a': {'scheduler': 'Euler a', 'num_inference_steps': 6}}; "
            "print(json.dumps(c.child({'embedded': 'embedded'}, [5])))")
    done = subprocess.run([sys.executable, "-c", code], env=environment, cwd=ROOT, capture_output=True, text=True,
                          timeout=120, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])["embedded: Euler a, seed 5"]


@pytest.mark.skipif(not HAS_MODEL or not cpu.is_x86(), reason="the embedded model and x86 kernel settings")
def test_universal_images_do_not_depend_on_mkls_code_path_or_the_thread_count():
    first = _image_in_a_fresh_process({}, threads=1)
    other = _image_in_a_fresh_process({"MKL_CBWR": "COMPATIBLE", "ONEDNN_MAX_CPU_ISA": "SSE41"}, threads=2)
    assert other == first  # the fingerprint and the float output's hash


@pytest.mark.parametrize("mode, antialias", [("bilinear", False), ("bicubic", False), ("bilinear", True),
                                             ("area", False), ("nearest-exact", False)])
def test_the_universal_upscaler_is_torchs_interpolation_rounded_once(mode, antialias):
    from torch.nn import functional

    from seedlab.engine.samplers import upscale

    latents = torch.randn((1, 4, 8, 8), generator=torch.Generator().manual_seed(2))
    exact = functional.interpolate(latents.double(), size=(12, 13), mode=mode, antialias=antialias)
    made = upscale.separable(latents, 12, 13, mode, antialias)
    assert made.dtype == torch.float32
    assert torch.equal(made, exact.float()) or (made.double() - exact).abs().max() <= 1.2e-7  # within a float32 step


def test_schedules_and_expm1_compute_wide_under_universal_only(universal, monkeypatch):
    from seedlab.engine.samplers import kdiffusion, sigmas

    h = torch.tensor(-0.3)
    assert torch.equal(kdiffusion.expm1(h), h.double().expm1().float())
    wide_karras = sigmas.karras(20, 0.03, 14.6)
    monkeypatch.setenv(cpu.ENV_VAR, "avx2")
    assert torch.equal(kdiffusion.expm1(h), h.expm1())
    narrow_karras = sigmas.karras(20, 0.03, 14.6)
    assert wide_karras.dtype == narrow_karras.dtype == torch.float32
    assert torch.allclose(wide_karras, narrow_karras, rtol=1e-6)
