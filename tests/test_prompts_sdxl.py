"""A1111's prompt syntax on SDXL against A1111 1.10's own steps (tests/reference/a1111_sdxl.py, written from A1111's
and sgm's sources): both encoders' hidden states and the pooled vector equal bit for bit, the time ids' embedding
equals A1111's vector, an image through generation equals diffusers' pipeline given the reference's tensors pixel
for pixel, SDXL textual inversion pairs, and admission keeping the syntax for SDXL while A1111's samplers stay
SD 1.x / 2.x's.

The tiny SDXL has two encoders of different widths and depths (CLIP-L: 16 wide, 2 layers; OpenCLIP-G: 12 wide,
3 layers, projection 12), tokenizer_2 padding with "!" (id 0) as stabilityai's SDXL ships, chunks of 14 tokens.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from diffusers import AutoencoderKL, EulerDiscreteScheduler, StableDiffusionXLPipeline, UNet2DConditionModel
from safetensors.torch import save_file
from transformers import CLIPTextConfig, CLIPTextModel, CLIPTextModelWithProjection

from seedlab.engine.generation import generate
from seedlab.engine.models import ModelStore, describe
from seedlab.engine.prompts import sdxl, text_inversion
from seedlab.engine.prompts.embeddings import Embeddings
from seedlab.engine.recipe import FieldError, Recipe, RecipeError
from seedlab.serving.admission import Admission
from seedlab.serving.limits import Limits
from seedlab.serving.reproduction import Original
from tests.helpers import torch_threads, use_models_folder
from tests.reference.a1111_sdxl import a1111_sdxl_conditioning, diffusers_vector, sdxl_database
from training.tokenizer import write_clip_tokenizer

CPU = torch.device("cpu")
WORDS = ["a", "red", "blue", "circle", "square", "on"]
LONG = "a red, circle, on, a, (blue:1.2), square, " * 3  # 3 chunks of 14, broken after commas


def build(folder) -> StableDiffusionXLPipeline:
    torch.manual_seed(7)
    tokenizers = [write_clip_tokenizer(folder / f"t{i}", WORDS, max_length=16) for i in (1, 2)]
    tokenizers[1].pad_token = "!"  # stabilityai's tokenizer_2: id 0, A1111's id_pad for OpenCLIP-G

    def encoder(cls, tokenizer, width, layers, **extra):
        return cls(CLIPTextConfig(vocab_size=len(tokenizer), hidden_size=width, intermediate_size=2 * width,
                                  num_hidden_layers=layers, num_attention_heads=2, max_position_embeddings=16,
                                  bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                                  pad_token_id=tokenizer.pad_token_id, hidden_act="gelu", **extra)).eval()
    unet = UNet2DConditionModel(
        sample_size=8, block_out_channels=(16, 32), layers_per_block=1, norm_num_groups=8, attention_head_dim=(2, 4),
        down_block_types=("DownBlock2D", "CrossAttnDownBlock2D"), up_block_types=("CrossAttnUpBlock2D", "UpBlock2D"),
        use_linear_projection=True, addition_embed_type="text_time", addition_time_embed_dim=8,
        transformer_layers_per_block=(1, 1), projection_class_embeddings_input_dim=6 * 8 + 12, cross_attention_dim=28)
    vae = AutoencoderKL(block_out_channels=(8, 16), latent_channels=4, down_block_types=("DownEncoderBlock2D",) * 2,
                        up_block_types=("UpDecoderBlock2D",) * 2, norm_num_groups=8, layers_per_block=1, sample_size=32)
    pipe = StableDiffusionXLPipeline(
        vae=vae.eval(), unet=unet.eval(), tokenizer=tokenizers[0], tokenizer_2=tokenizers[1],
        text_encoder=encoder(CLIPTextModel, tokenizers[0], 16, 2),
        text_encoder_2=encoder(CLIPTextModelWithProjection, tokenizers[1], 12, 3, projection_dim=12),
        scheduler=EulerDiscreteScheduler(beta_schedule="scaled_linear", beta_start=0.00085, beta_end=0.012,
                                         steps_offset=1, timestep_spacing="leading"))
    pipe.set_progress_bar_config(disable=True)
    return pipe


@pytest.fixture(scope="module")
def pipe(tmp_path_factory):
    return build(tmp_path_factory.mktemp("xl"))


@pytest.fixture(autouse=True)
def models(tmp_path, monkeypatch):
    monkeypatch.setattr(text_inversion, "_kept", type(text_inversion._kept)())
    return use_models_folder(tmp_path, monkeypatch, "embeddings")


def reference(pipe, text, **options):
    return a1111_sdxl_conditioning(pipe, text, width=32, height=32, **options)


def assert_a1111s(pipe, text, emphasis="Original", db=None, found=None):
    with torch.no_grad():
        hidden, pooled = sdxl.encode(pipe, text, emphasis=emphasis, embeddings=found)
    theirs = reference(pipe, text, emphasis=emphasis, embedding_db=db)
    assert hidden.shape == theirs["crossattn"].shape and hidden.shape[2] == 16 + 12
    assert torch.equal(hidden, theirs["crossattn"])
    assert torch.equal(pooled, theirs["vector"][:, :12])
    return hidden, pooled


@pytest.mark.parametrize("text, emphasis", [
    ("a red circle", "Original"), ("a (red:1.3) circle", "Original"), ("a ((red)) circle (on a [blue] square:1.2)",
                                                                       "Original"),
    ("a [blue] circle", "Original"), ("a red circle BREAK on a blue square", "Original"), (LONG, "Original"),
    ("", "Original"), ("a (red:1.3) circle, [blue]", "No norm"), ("a (red:1.3) circle, [blue]", "None"),
    (LONG, "No norm"),
])
def test_the_conditioning_is_a1111s_bit_for_bit(pipe, text, emphasis):
    hidden, _ = assert_a1111s(pipe, text, emphasis)
    chunks = {"a red circle BREAK on a blue square": 2, LONG: 3}.get(text, 1)
    assert hidden.shape[1] == 16 * chunks


def test_a_prompt_without_a1111s_syntax_is_what_diffusers_encodes_and_weights_change_it(pipe):
    with torch.no_grad():
        plain = pipe.encode_prompt("a red circle", device=CPU, num_images_per_prompt=1,
                                   do_classifier_free_guidance=False)
        mine = sdxl.encode(pipe, "a red circle")
        weighted = sdxl.encode(pipe, "a (red:1.3) circle")
    assert torch.equal(plain[0], mine[0]) and torch.equal(plain[2], mine[1])
    assert not torch.equal(weighted[0], mine[0]) and torch.equal(weighted[1], mine[1])  # the pooled is not weighted


def test_diffusers_time_ids_are_a1111s_vector(pipe):
    theirs = a1111_sdxl_conditioning(pipe, "a red circle", width=48, height=32)
    assert torch.equal(diffusers_vector(pipe, theirs["vector"][:, :12], width=48, height=32), theirs["vector"])


def test_an_empty_negative_prompt_is_zeros_as_in_a1111_and_diffusers(pipe):
    theirs = reference(pipe, "", is_negative_prompt=True)
    assert not theirs["crossattn"].any() and not theirs["vector"][:, :12].any() and theirs["vector"][:, 12:].any()
    mine = sdxl.conditioning(pipe, LONG, "", guided=True)
    assert mine["negative_prompt_embeds"].shape == mine["prompt_embeds"].shape  # zeros padded with zeros
    assert not mine["negative_prompt_embeds"].any() and not mine["negative_pooled_prompt_embeds"].any()
    with torch.no_grad():
        diffusers = pipe.encode_prompt("a red circle", device=CPU, num_images_per_prompt=1)  # negative None
    assert pipe.config.force_zeros_for_empty_prompt and not diffusers[1].any() and not diffusers[3].any()
    assert reference(pipe, "")["crossattn"].any()  # an empty prompt is encoded


def test_clip_skip_is_not_applied_as_in_a1111s_default(pipe):
    model = describe("xl", pipe, CPU)
    recipe = Recipe(prompt="a (red:1.2) circle", negative_prompt="blue", prompt_syntax="a1111", guidance_scale=3.0)
    one, two = (Embeddings(model).arguments(recipe.replace(clip_skip=skip)) for skip in (1, 2))
    assert all(torch.equal(one[name], two[name]) for name in one)
    theirs = reference(pipe, "a (red:1.2) circle", clip_skip=2)
    assert torch.equal(one["prompt_embeds"], theirs["crossattn"])
    # A1111's "Clip skip SDXL" setting reads CLIP-L's hidden_states[-N]: at 2 the same penultimate layer, at 3 another
    assert torch.equal(reference(pipe, "a (red:1.2) circle", clip_skip=2, sdxl_clip_l_skip=True)["crossattn"],
                       theirs["crossattn"])
    assert not torch.equal(reference(pipe, "a (red:1.2) circle", clip_skip=3, sdxl_clip_l_skip=True)["crossattn"],
                           theirs["crossattn"])


def pixels(pipe, theirs_cond, theirs_uncond, seed):
    image = pipe(prompt_embeds=theirs_cond["crossattn"], pooled_prompt_embeds=theirs_cond["vector"][:, :12],
                 negative_prompt_embeds=theirs_uncond["crossattn"],
                 negative_pooled_prompt_embeds=theirs_uncond["vector"][:, :12], num_inference_steps=2,
                 guidance_scale=3.0, width=32, height=32, generator=torch.Generator("cpu").manual_seed(seed)).images[0]
    return np.asarray(image)


def test_an_image_is_diffusers_given_a1111s_conditioning_pixel_for_pixel(pipe):
    model = describe("xl", pipe, CPU)
    base = Recipe(prompt=LONG, prompt_syntax="a1111", num_inference_steps=2, guidance_scale=3.0, width=32, height=32,
                  seed=5)
    cond = reference(pipe, LONG)
    # a shorter negative prompt is padded with the empty prompt's chunks (A1111's "Pad conds")
    uncond = reference(pipe, "(blue:1.1) square", is_negative_prompt=True)
    empty = reference(pipe, "")["crossattn"]
    uncond["crossattn"] = torch.cat([uncond["crossattn"], empty, empty], dim=1)
    zeros = reference(pipe, "", is_negative_prompt=True)  # the empty negative prompt: zeros, padded with zeros
    zeros["crossattn"] = torch.zeros_like(cond["crossattn"])
    with torch_threads(1):
        made = [generate(model, base.replace(negative_prompt=negative)) for negative in ("(blue:1.1) square", "")]
        expected = [pixels(pipe, cond, theirs, 5) for theirs in (uncond, zeros)]
    for result, theirs in zip(made, expected, strict=True):
        assert np.array_equal(np.asarray(result.image), theirs)
    assert result.recipe.prompt_syntax == "a1111"
    assert not np.array_equal(np.asarray(made[1].image),
                              np.asarray(generate(model, base.replace(prompt_syntax="plain")).image))


def test_sdxl_textual_inversion_pairs_go_to_their_encoders(pipe, models):
    gen = torch.Generator().manual_seed(3)
    save_file({"clip_l": torch.randn(2, 16, generator=gen), "clip_g": torch.randn(2, 12, generator=gen)},
              models / "embeddings" / "glow.safetensors")
    save_file({"emb_params": torch.randn(1, 16, generator=gen)}, models / "embeddings" / "sdone.safetensors")
    text = "a glow (circle:1.2), glow"
    found = text_inversion.for_prompts(pipe.tokenizer, pipe.text_encoder, {"prompt": text},
                                       text_encoder_2=pipe.text_encoder_2)
    assert set(found) == {"glow"} and found["glow"]["clip_g"].shape == (2, 12)
    hidden, _ = assert_a1111s(pipe, text, db=sdxl_database(pipe, models / "embeddings"), found=found)
    assert not torch.equal(hidden, sdxl.encode(pipe, text)[0])
    model = describe("xl", pipe, CPU)
    recipe = Recipe(prompt=text, prompt_syntax="a1111", guidance_scale=3.0)
    assert torch.equal(Embeddings(model).arguments(recipe)["prompt_embeds"], hidden)
    assert text_inversion.with_ti_hashes(model, recipe).ti_hashes.startswith("glow: ")
    with pytest.raises(FieldError, match=r"negative_prompt.*sdone.*one text encoder's \(16 wide, SD 1.x / 2.x\)"):
        Embeddings(model).arguments(recipe.replace(negative_prompt="sdone"))


def test_admission_keeps_a1111s_syntax_on_sdxl_and_its_samplers_on_sd(tmp_path, pipe):
    folder = tmp_path / "xl"
    pipe.save_pretrained(folder)
    admission = Admission(ModelStore([str(folder)], device=CPU), Limits())
    info = admission.store.info(str(folder))
    assert info.a1111_prompts and not info.a1111 and info.reads("a1111") and not info.reads("comfyui")
    size = {"width": 32, "height": 32}
    assert admission.recipe({"prompt": "a (red:1.2) circle", "prompt_syntax": "a1111", **size}).prompt_syntax == "a1111"
    for fields, refusal in (({"prompt_syntax": "comfyui"}, "comfyui is read for Stable Diffusion 1.x and 2.x"),
                            ({"scheduler": "Euler a"}, "A1111's samplers run on Stable Diffusion 1.x and 2.x")):
        with pytest.raises(RecipeError, match=refusal):
            admission.recipe({"prompt": "x", **size, **fields})
    dropped = Original(Recipe(prompt="a (red:1.2) circle", prompt_syntax="a1111", clip_skip=3, model=str(folder),
                              **size), None, None)
    admitted = admission.admit_file(dropped).original
    assert (admitted.recipe.prompt_syntax, admitted.recipe.clip_skip) == ("a1111", 3)
    assert any("Clip skip 3 is written by A1111 on SDXL" in note for note in admitted.notes)
    two = admission.admit_file(Original(dropped.recipe.replace(clip_skip=2), None, None)).original
    assert two.recipe.clip_skip == 2 and two.notes == ()  # the same layer with A1111's setting on or off
    comfy = admission.admit_file(Original(dropped.recipe.replace(prompt_syntax="comfyui", clip_skip=1), None,
                                          None)).original
    assert comfy.recipe.prompt_syntax == "plain" and "for Stable Diffusion 1.x and 2.x only" in comfy.notes[0]
