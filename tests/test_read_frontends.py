"""Diffusers front ends' own text layouts, each as its writer builds it (the writer's repository, path and commit
in each test), and Draw Things' sampler labels."""

import pytest

from seedlab.files.drawthings import read_drawthings
from seedlab.files.metadata import read_chunks

FOX, BLUR = "a red fox in the snow, golden light", "blurry, lowres"


def _fields(chunks):
    return read_chunks(chunks).fields


def _settings(fields):
    keys = ("prompt", "negative_prompt", "seed", "num_inference_steps", "guidance_scale", "width", "height",
            "scheduler")
    return tuple(fields.get(key) for key in keys)


def test_stable_cascade_webui_glues_its_settings_to_the_negative_prompt():
    """DenOfEquity/StableCascade-for-webUI scripts/stablecascade_diffusers.py create_infotext (commit
    81f1db8f179d805fbfe6b93afdc24a0172fe0a44): the negative prompt and the settings have no newline between them,
    steps are "prior/decoder", the scheduler "prior/decoder : Karras"."""
    text = (f"{FOX}\nNegative prompt: {BLUR}Size: 1024x1536, Seed: 42, Scheduler(Prior/Decoder): DPM++ 2M/default "
            ": Karras, Steps(Prior/Decoder): 20/10, CFG: 4.0, CLIP skip: 1, Model (StableCascade): "
            "(stage_c_bf16/stage_b_lite_bf16/default)")
    fields = _fields({"parameters": text})
    assert _settings(fields) == (FOX, BLUR, 42, 20, 4.0, 1024, 1536, "DPMSolverMultistepScheduler")
    text = (f"{FOX}Size: 1024x1024, Seed: 7, Scheduler(Prior/Decoder): default/default, Steps(Prior/Decoder): 30/10, "
            "CFG: 4")
    assert _settings(_fields({"parameters": text}))[:5] == (FOX, "", 7, 30, 4.0)


def test_stable_cascade_webui_first_release():
    """DenOfEquity/StableCascade-for-webUI example.png (commit fde9235219c9fa1afa91ed5a5d5c64e5d3596b0f): Model and
    Prompt lines, "Negative:", a blank line, then the settings."""
    text = (f"Model: StableCascade\nPrompt: {FOX}\nNegative: {BLUR}\n\nSize: 1280x896, Seed: 3096972072, Scheduler: "
            "DPM++ 2M, Steps(Prior/Decoder): 20/10, CFG: 2.5")
    fields = _fields({"parameters": text})
    assert _settings(fields) == (FOX, BLUR, 3096972072, 20, 2.5, 1280, 896, "DPMSolverMultistepScheduler")
    assert fields["model"] == "StableCascade"


def test_hunyuan_dit_webui_cfg_with_rescale_and_cutoff():
    """DenOfEquity/Hunyuan-DiT-for-webUI scripts/hunyuan_DiT_diffusers.py create_infotext (commit
    e2f0ea223d5fae2140e4d2af32f32b6a06ab4348): "CFG: scale (rescale) [cutoff]", its scheduler labels."""
    text = (f"{FOX}\nNegative prompt: {BLUR}\nSize: 896x1152, Seed: 964127841, Scheduler: SA-solver, Steps: 20, "
            "CFG: 5.0 (0.0) [1.0], T5: ✓, center latents: ✗, zSNR: ✗, Model (Hunyuan): "
            "Tencent-Hunyuan/HunyuanDiT-v1.2-Diffusers-Distilled")
    fields = _fields({"parameters": text})
    assert _settings(fields) == (FOX, BLUR, 964127841, 20, 5.0, 896, 1152, "SASolverScheduler")
    assert fields["model"] == "Tencent-Hunyuan/HunyuanDiT-v1.2-Diffusers-Distilled"


def test_hunyuan_dit_webui_first_release():
    """DenOfEquity/Hunyuan-DiT-for-webUI example.png (commit c2fbc42e5b1fd895253fd4003e87a0af48a969fc)."""
    text = (f"Model: Hunyuan-DiT\nPrompt: {FOX}\nSize: 896x1152, Seed: 964127841, Scheduler: DPM++ 2M SDE, Steps: 20, "
            "CFG: 1")
    assert _settings(_fields({"parameters": text})) == (FOX, "", 964127841, 20, 1.0, 896, 1152,
                                                         "DPMSolverMultistepScheduler")


def test_sd3_webui_three_prompts_and_initial_noise():
    """DenOfEquity/StableDiffusion3-for-webUI example2.png (commit c9e564dfbb75970158767692947717f1079a5c50): one
    prompt per text encoder joined by " | \\n", an "Initial noise" line after the settings."""
    text = (f"Model: StableDiffusion3m (base)\nPrompt: {FOX} | \n{FOX} | \n{FOX}\nNegative:  | \n | \n\n"
            "Size: 832x1248, Seed: 14641, Steps: 20, CFG: 5 (0.66) [1], Shift: 3.7, Clip skip: 0, CLIP-L: ✓, T5: ✗\n"
            "Initial noise: [0.33, 0.52, 0, 0.012]")
    assert _settings(_fields({"parameters": text}))[:7] == (FOX, "", 14641, 20, 5.0, 832, 1248)


@pytest.mark.parametrize("tail", ["Model (SD3m): stabilityai/stable-diffusion-3-medium-diffusers",
                                  "Sampler: Euler, Model (StableDiffusion3.5): stabilityai/stable-diffusion-3.5-large"])
def test_sd3_webuis(tail):
    """DenOfEquity/StableDiffusion3-for-webUI scripts/sd3_diffusers.py (commit
    ba1f8f3cbfb3a46304c93ac6e0d6828c208e1198) and StableDiffusion3.5-for-webUI scripts (commit
    21aa91896c6d1cb9fbcf91c1470fc1e1184d33d2) create_infotext: Steps first, "CFG: 5.0 (0.0)", the model last."""
    key = "CFG scale" if "3.5" in tail else "CFG"
    text = (f"{FOX}\nNegative prompt: {BLUR}\nSteps: 28, Size: 1024x1024, Seed: 7, {key}: 4.5 (0.0), PAG: 0.0 (0.0), "
            f"Shift: 3.0, CLIP skip: 0, CLIP-L: ✓, CLIP-G: ✓, T5: ✓, zero negative: ✗, {tail}")
    fields = _fields({"parameters": text})
    assert _settings(fields)[:7] == (FOX, BLUR, 7, 28, 4.5, 1024, 1024)
    assert fields["model"] == tail.rpartition(": ")[2]


@pytest.mark.parametrize("text, scheduler", [
    (f"{FOX}\nSteps: 25, CFG scale: 5.0, CFG rescale: 0.0, Seed: 9, Size: 1024x1024, PAG: 0.0 (0.0), Sampler: Euler A "
     ": Karras, Model (Kolors): Kwai-Kolors/Kolors-diffusers", "EulerAncestralDiscreteScheduler"),
    (f"{FOX}\nSteps: 25, CFG scale: 5.0, CFG rescale: 0.0, Seed: 9, Size: 1024x1024, PAG: 0.0 (0.0), Shift: 3.0, "
     "Sampler: DPM++ 2M, Model (Sana): Efficient-Large-Model/Sana_1600M_1024px_BF16_diffusers",
     "DPMSolverMultistepScheduler"),
    ("Model: Efficient-Large-Model/Sana_1600M_1024px_BF16_diffusers\nPrompt: " + FOX + "\nParameters: Size: 1024x1024, "
     "Seed: 9, Steps: 25, CFG: 5", None),
])
def test_kolors_and_sana_webuis(text, scheduler):
    """DenOfEquity/Kolors-for-webUI (commit da03226745c99a02b4527f01b58ccaf14072ba3a) and Sana-for-webUI (commit
    31e055cbdb2783b03bad4cfeee3a72503a52ade4) create_infotext, and Sana's first example.png (commit
    f20955cb0f0cdee3d4ca1c2c288cd1a2db00b5dd): "Parameters: " before the settings."""
    assert _settings(_fields({"parameters": text})) == (FOX, "", 9, 25, 5.0, 1024, 1024, scheduler)


def test_hunyuan_dit_app_writes_a_chunk_per_setting():
    """Tencent/HunyuanDiT app/hydit_app.py generate_metadata (commit 368280ec35119ed2741a30cc5b40aafde34f8a8a): each
    key its own text chunk, `parameters` only "Power by HunYun"; infer_steps, imgW, imgH; its samplers ddpm, ddim,
    dpmms."""
    chunks = {"parameters": "Power by HunYun", "prompt": FOX, "negative_prompt": BLUR, "seed": "42", "cfg_scale": "6.0",
              "infer_steps": "100", "sampler": "dpmms", "imgW": "1280", "imgH": "768", "controlnet_module": "canny",
              "control_weight": "1.0", "lora_ctrls": "[]", "model_name": "DiT-g/2"}
    assert _settings(_fields(chunks)) == (FOX, BLUR, 42, 100, 6.0, 1280, 768, "DPMSolverMultistepScheduler")


def test_ppdiffusers_webui_writes_a_setting_per_line():
    """The ppdiffusers web UI's png_info_helper.serialize_to_pnginfo (PaddleNLP AI Studio notebook code, the
    [PaddleLikeWebUI] layout): the prompt, then "Label: value" lines in its label order, lower-case width and
    height, its other arguments as "name: value", and Software: PaddleNLP."""
    text = (f"{FOX}\nNegative prompt: {BLUR}\nSteps: 50\nSampler: DPMSolver\nCFG scale: 7.5\nSeed: 42\nwidth: 512\n"
            "height: 768\nnum_images_per_prompt: 1\neta: 0.0\nmax_embeddings_multiples: 3\nmodel_name: "
            "MoososCap/NOVEL-MODEL\nepoch_time: 1670000000.0\n")
    fields = _fields({"parameters": text, "Software": "PaddleNLP"})
    assert _settings(fields) == (FOX, BLUR, 42, 50, 7.5, 512, 768, "DPMSolverMultistepScheduler")


@pytest.mark.parametrize("label, scheduler", [
    ("Euler A Trailing", "EulerAncestralDiscreteScheduler"), ("DPM++ SDE Karras", "DPMSolverSDEScheduler"),
    ("UniPC Trailing", "UniPCMultistepScheduler"), ("TCD", "TCDScheduler"), ("DDIM Trailing", "DDIMScheduler"),
])
def test_drawthings_sampler_labels(label, scheduler):
    """drawthingsai/draw-things-community Libraries/DataModels/Sources/Defaults.swift SamplerType descriptions and
    Libraries/LocalImageGenerator/Sources/ImageConverter.swift (commit bfafc68cf2c105319f8a5fe7e12bb9bd6f2b3a09):
    json["sampler"] is the description."""
    data = {"c": FOX, "uc": "", "seed": 7, "steps": 8, "scale": 3.5, "size": "768x1024", "sampler": label,
            "seed_mode": "Scale Alike", "strength": 1, "model": "flux_1_dev_q8p.ckpt"}
    assert read_drawthings(data)[1]["scheduler"] == scheduler
