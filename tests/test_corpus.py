"""Real files written by other tools (tests/corpus, sources in SOURCES.md): every field against what the file says.

The expected values below were typed by reading each file's metadata text (not by running SeedLab's
readers). Prompts are compared the way A1111 reads them back: line by line with the spaces at line
ends stripped. A prompt ending in "…" is checked as a prefix (long ComfyUI prompts). None means the
file does not say it unambiguously (no Sampler key, an img2img pass, an area-composed prompt).
"""

from pathlib import Path

import pytest

from seedlab.files.metadata import read_metadata

CORPUS = Path(__file__).parent / "corpus"
E, EA, DPM, DDIM = ("EulerDiscreteScheduler", "EulerAncestralDiscreteScheduler", "DPMSolverMultistepScheduler",
                    "DDIMScheduler")
UNI, LMS, LCM, DEFAULT = "UniPCMultistepScheduler", "LMSDiscreteScheduler", "LCMScheduler", "default"
A_UNI, A_LCM, BH2 = "UniPC (A1111)", "LCM (A1111)", "uni_pc_bh2"  # A1111's own, ComfyUI's: run as they run them
# Samplers run as their tool runs them: ComfyUI's names from tools built on ComfyUI (its savers, SwarmUI, Stability
# Matrix, Fooocus); NovelAI's k-diffusion names run as A1111's sampler of the same function (K_EA).
C_E, C_EA, C_SDE = "euler", "euler_ancestral", "dpmpp_2m_sde_gpu"
# A1111's own samplers, run as A1111 runs them (engine/samplers/a1111.py), where A1111, Forge or Civitai wrote the text.
K_E, K_EA, K_DPM = "Euler", "Euler a", "DPM++ 2M"
SQ, TALL = (1024, 1024), (1536, 1536)
Q = "general, masterpiece, best quality, amazing quality,\n1girl, solo, hatsune miku,"
M1, M2, M3, M4 = Q + " テスト", Q, Q + " #テスト", Q + " テスト,"
ADETAILER = Q + " cowboy shot, dutch angle, テスト"
N1 = "bad quality, worst quality, worst detail, sketch, censor,"
INVOKE = ("professional full body photo of young woman, hyper long brunette hair, elegant hair, wearing a bikini top "
          "and asymmetric short skirt, curvy body, long legs, (imperfect skin), detailed skin, intense freckles, super "
          "long eye lashes, at night, outside, city background, 8k ultra detailed, realistic, high quality, "
          "film grain, low contrast")
NAI_UC = ("nsfw, lowres, artistic error, film grain, scan artifacts, worst quality, bad quality, jpeg artifacts, very "
          "displeasing, chromatic aberration, dithering, halftone, screentone, multiple views, logo, too many "
          "watermarks, negative space, blank page")
NAI_CURATED_UC = ("blurry, lowres, upscaled, artistic error, scan artifacts, jpeg artifacts, logo, too many "
                  "watermarks, negative space, blank page")
NAI_OLD_UC = ", ".join(["lowres, bad anatomy, bad hands, text, error, missing fingers, extra digit, fewer digits, "
                        "cropped, worst quality, low quality, normal quality, jpeg artifacts, signature, watermark, "
                        "username, blurry"] * 2)
NAI_CURATED = "1girl, solo, hatsune miku, #テスト, very aesthetic, masterpiece, no text, -0.8::feet::, rating:general"
NAI_3CHAR = "2girls, 1boy, dancing, #テスト\nwhite background, , very aesthetic, masterpiece, no text"
DUCK = ("photo of a duck", "monochrome")
CAT = ("wide shot, photo of a cat with mixed black and white fur, sitting in the middle of an open roadway, holding a "
       "cardboard sign that says \"Meow I'm a Cat\". In the distance behind is a green road sign that says \"Model "
       "Testing Street\".")
GIRL = ("masterpiece best quality girl", "bad hands")
TW = "text, watermark"
SUNSET = "evening sunset scenery blue sky nature, glass bottle with a galaxy in it"
MIKU = ("1girl, solo, hatsune miku, vocaloid, white dress, cowboy shot, wind, floating hair, looking at viewer, smile, "
        "beach, sunset, sky, cloud, (safe)")
COUPLE = ("masterpiece, best quality, high quality, screencap, anime screenshot,\n2girls, blonde twintails, cyan eyes, "
          "white serafuku, standing, waving, looking at viewer, smile,\n2girls, black long hair, red eyes, dark school "
          "uniform, crossed arms, looking away")
COUPLE_UC = "(signature), worst quality, bad quality, low quality, simple background, text, name, watermark, loli"
CG = "comfyanonymous-ComfyUI_examples/"
SW = "mcmonkeyprojects-SwarmUI/"
SIWM = "nkchocoai-ComfyUI-SaveImageWithMetaData/"

DE = "DenOfEquity-"
IMA, INV, LCTL = "brycedrennan-imaginAIry/", "invoke-ai-InvokeAI/", "cheald-sd-webui-loractl/"
IMA_NEG = "Ugly, duplication, duplicates, mutilation, deformed, mutilated, mutation, twisted body, disfigured…"
RED = ("portrait photograph, woman with red hair, wearing green blazer over yellow tshirt and blue trousers, on sunny "
       "beach with dark clouds on horizon")
PEAKS = ("cinematic photo breathtaking natural landscape with majestic snowcapped mountain range in background, with "
         "crystal clear blue lake in foreground, golden light sunrise, warm glow, verdant plants and colorful wild "
         "flowers . 35mm photograph, film, bokeh, professional, 4k, highly detailed")
PEAKS_UC = ("drawing, painting, crayon, sketch, graphite, impressionist, noisy, blurry, soft, deformed, uglycartoon, "
            "drawing, sketch, 2d")
WITCH = "cinematic photo a dark figure, dressed in a black gown and a red bow tie, stands in front of a magical…"
ANDROID = "cinematic still The image is a close-up portrait of a female android's face and upper body…"
ANDROID_UC = ("airbrushed, makeup, blurred background, anime, cartoon, graphic, text, painting, crayon, graphite, "
              "abstract, glitch, deformed, mutated, ugly, disfigured")
# file: (format, seed, steps, cfg, (width, height), scheduler, prompt, negative prompt)
EXPECTED = {
    "sd-parsers/automatic1111_cropped.png": ("A1111", 235284042, 15, 5, (512, 400), A_UNI, *DUCK),
    "sd-parsers/automatic1111_cropped.jpg": ("A1111", 235284042, 15, 5, (512, 400), A_UNI, *DUCK),
    "sd-parsers/text_after_idat.png": ("A1111", 235284042, 15, 5, (512, 400), A_UNI, *DUCK),
    "sd-metadata/civitai.jpg": ("A1111 (Civitai)", 1311178179, 25, 5, SQ, K_EA, M3, N1),
    "sd-metadata/comfyui-comfy-image-saver.jpg": ("A1111 (ComfyUI saver)", 0, 20, 8, (512, 512), C_E,
                                                  "unknown", "unknown"),
    "sd-metadata/comfyui-comfy-image-saver.png": ("A1111 (ComfyUI saver)", 0, 20, 8, (512, 512), C_E,
                                                  "unknown", "unknown"),
    "sd-metadata/comfyui-comfy-image-saver.webp": ("A1111 (ComfyUI saver)", 0, 20, 8, (512, 512), C_E, "unknown",
                                                   "unknown"),
    "sd-metadata/comfyui-saveimagewithmetadata.jpg": ("A1111", 347382230306562, 20, 5, SQ, C_EA, M2, N1),
    "sd-metadata/comfyui-saveimagewithmetadata.png": ("A1111", 38802053347333, 20, 5, SQ, C_EA, M2, N1),
    "sd-metadata/comfyui-saveimagewithmetadata.webp": ("A1111", 827555711811618, 20, 5, SQ, K_EA, M2, N1),
    "sd-metadata/easy-reforge.png": ("A1111 (Forge)", 2582194946, 4, 1, SQ, A_LCM, "1girl, solo, hatsune miku, "
                                     "テスト,\n<lora:NoobV065sHyperDmd:1> masterpiece, best quality, very aesthetic, "
                                     "absurdres, newest, safe", "bad anatomy, worst quality, low quality"),
    "sd-metadata/forge-classic-adetailer.png": ("A1111 (Forge)", 4179307297, 24, 4, SQ, K_EA, ADETAILER, N1),
    "sd-metadata/forge-classic-en.png": ("A1111 (Forge)", 1239240392, 20, 6, SQ, K_DPM, M2, N1),
    "sd-metadata/forge-classic-hires.jpg": ("A1111 (Forge)", 3452054396, 20, 6, SQ, K_DPM, M1, N1),
    "sd-metadata/forge-classic-hires.png": ("A1111 (Forge)", 2301589892, 20, 6, SQ, K_DPM, M1, N1),
    "sd-metadata/forge-classic-hires.webp": ("A1111 (Forge)", 2991931972, 20, 6, SQ, K_DPM, M1, N1),
    "sd-metadata/forge-classic.jpg": ("A1111 (Forge)", 2547514258, 20, 6, SQ, K_DPM, M1, N1),
    "sd-metadata/forge-classic.png": ("A1111 (Forge)", 1239240392, 20, 6, SQ, K_DPM, M1, N1),
    "sd-metadata/forge-classic.webp": ("A1111 (Forge)", 2630661657, 20, 6, SQ, K_DPM, M1, N1),
    "sd-metadata/forge-neo-adetailer.png": ("A1111 (Forge)", 4179307297, 24, 4, SQ, K_EA, M1, N1),
    "sd-metadata/forge-neo-hires.png": ("A1111 (Forge)", 449383496, 24, 6, SQ, K_EA, M2, N1),
    "sd-metadata/forge-neo.jpg": ("A1111 (Forge)", 2417156106, 24, 6, SQ, K_EA, M2, N1),
    "sd-metadata/forge-neo.png": ("A1111 (Forge)", 4179307297, 24, 6, SQ, K_EA, M1, N1),
    "sd-metadata/forge-neo.webp": ("A1111 (Forge)", 2056443400, 24, 6, SQ, K_EA, M2, N1),
    "sd-metadata/forge.png": ("A1111 (Forge)", 747066619, 25, 5, SQ, K_E, M1, N1),
    "sd-metadata/reforge-hires.jpg": ("A1111 (Forge)", 3494396176, 20, 6, SQ, K_DPM, M1, N1),
    "sd-metadata/reforge-hires.png": ("A1111 (Forge)", 879759072, 20, 6, SQ, K_DPM, M1, N1),
    "sd-metadata/reforge-hires.webp": ("A1111 (Forge)", 1010990389, 20, 6, SQ, K_DPM, M1, N1),
    "sd-metadata/reforge.jpg": ("A1111 (Forge)", 584157617, 20, 6, SQ, K_DPM, M1, N1),
    "sd-metadata/reforge.png": ("A1111 (Forge)", 270740395, 20, 6, SQ, K_DPM, M1, N1),
    "sd-metadata/sd-next-en.png": ("A1111 (SD.Next)", 2251068289, 20, 6, SQ, None, M2, N1),
    "sd-metadata/sd-next-hires.jpg": ("A1111 (SD.Next)", 3970581939, 20, 6, SQ, DDIM, M3, N1),
    "sd-metadata/sd-next-hires.png": ("A1111 (SD.Next)", 1968293115, 20, 6, SQ, DDIM, M3, N1),
    "sd-metadata/sd-next-hires.webp": ("A1111 (SD.Next)", 1755251313, 20, 6, SQ, EA, M3, N1),
    "sd-metadata/sd-next.jpg": ("A1111 (SD.Next)", 899700607, 20, 6, SQ, EA, M3, N1),
    "sd-metadata/sd-next.png": ("A1111 (SD.Next)", 2427651458, 20, 6, SQ, DDIM, M3, N1),
    "sd-metadata/sd-next.webp": ("A1111 (SD.Next)", 3014033436, 20, 6, SQ, DDIM, M3, N1),
    "sd-metadata/sd-webui-hires.png": ("A1111", 3888671826, 20, 5.5, SQ, K_DPM, M1, N1),
    "sd-metadata/sd-webui.jpg": ("A1111", 3623174757, 20, 5.5, SQ, K_DPM, M1, N1),
    "sd-metadata/sd-webui.png": ("A1111", 3782896554, 20, 7, SQ, K_DPM, M1, N1),
    "sd-metadata/sd-webui.webp": ("A1111", 1028435836, 20, 5.5, SQ, K_DPM, M1, N1),
    "sd-metadata/stability-matrix-hires.png": ("A1111", 2073041550, 20, 5, TALL, C_EA, M3, N1),
    "sd-metadata/stability-matrix-upscale.png": ("A1111", 963022979, 20, 5, TALL, C_EA, M3, N1),
    "sd-metadata/stability-matrix.png": ("A1111", 395309383, 20, 5, SQ, C_EA, M3, N1),
    "sd-metadata/swarmui-hires.png": ("SwarmUI", 733776228, 20, 7, (768, 768), C_EA, M3, N1),
    "sd-metadata/swarmui-upscale.png": ("SwarmUI", 1741309074, 20, 7, TALL, C_EA, M3, N1),
    "sd-metadata/swarmui.jpg": ("SwarmUI", 697543491, 20, 7, SQ, C_EA, M3, N1),
    "sd-metadata/swarmui.png": ("SwarmUI", 2083100758, 20, 7, SQ, C_EA, M3, N1),
    "sd-metadata/swarmui.webp": ("SwarmUI", 830680752, 20, 7, SQ, C_EA, M3, N1),
    "sd-metadata/huggingface-space-upscale.png": ("diffusers-style JSON", 1971450810, 20, 5.5, SQ, DPM, M1, N1),
    "sd-metadata/huggingface-space.png": ("diffusers-style JSON", 443800072, 24, 5.5, SQ, DPM, M1, N1),
    "sd-metadata/invokeai-en.png": ("InvokeAI", 1860920704, 24, 6, SQ, EA, M2, N1),
    "sd-metadata/invokeai.png": ("InvokeAI", 3951921344, 24, 6, SQ, EA, M3, N1),
    "sd-parsers/invokeai_imeta1.png": ("InvokeAI", 3293022630, 35, 8, SQ, E, "digital artwork, oil painting. painterly "
                                       "brushstrokes, holidays,", "grainy+, photo, oversaturated, overexposed, blurry, "
                                       "compressed jpg+, noisy++, unfocused , black and white"),
    "sd-parsers/invokeai_sdmeta1.png": ("InvokeAI 2", 2980747362, 50, 5, (512, 768), LMS, INVOKE,
                                        "rendering, glowing eyes, skinny"),
    "sd-parsers/invokeai_dream1.png": ("InvokeAI (dream)", 2980747362, 50, 5, (512, 768), LMS, INVOKE,
                                       "rendering, glowing eyes, skinny"),
    "sd-parsers/fooocus1_cropped.png": ("Fooocus", 6952411511246973023, 30, 4, (768, 1280), C_SDE,
                                        "a smiling goldfish", ""),
    "sd-metadata/ruined-fooocus.png": ("RuinedFooocus", 2020047614, 30, 8, SQ, C_SDE, M3, N1),
    "sd-parsers/novelai1_cropped.png": ("NovelAI", 2253955223, 50, 10, None, K_EA, "masterpiece, best quality,  cat, "
                                        "space, icon", NAI_OLD_UC),
    "sd-metadata/novelai-curated.png": ("NovelAI", 2156638429, 23, 5, SQ, K_EA, NAI_CURATED, NAI_CURATED_UC),
    "sd-metadata/novelai-curated.webp": ("NovelAI", 880673757, 23, 5, SQ, K_EA, NAI_CURATED, NAI_CURATED_UC),
    "sd-metadata/novelai-full-3char.png": ("NovelAI", 1702945580, 28, 5, SQ, K_EA, NAI_3CHAR, NAI_UC),
    "sd-metadata/novelai-full-3char.webp": ("NovelAI", 447042893, 28, 5, SQ, K_EA, NAI_3CHAR, NAI_UC),
    "sd-metadata/novelai-full.png": ("NovelAI", 2043807047, 28, 5, (832, 1216), K_EA, "1girl, solo, hatsune miku, "
                                     "#テスト, very aesthetic, masterpiece, no text", NAI_UC),
    "sd-metadata/novelai-ref.png": ("NovelAI", 949223552, 28, 5, SQ, K_EA, "1girl, solo, dancing, , very aesthetic, "
                                    "masterpiece, no text", NAI_UC),
    "sd-metadata/comfyui.png": ("ComfyUI", 422847914351919, 20, 5, SQ, "euler_ancestral", M4, N1),
    "sd-metadata/comfyui-animated-webp.webp": ("ComfyUI", 270932924124066, 20, 5, SQ, "euler_ancestral", M4, N1),
    "sd-metadata/comfyui-group-nodes.png": ("ComfyUI", 1038684211150939, 20, 5, SQ, "euler_ancestral", M4, N1),
    "sd-metadata/comfyui-rgthree.png": ("ComfyUI", 963381484256655, 20, 5, SQ, "euler_ancestral", M4, N1),
    "sd-metadata/comfyui-hires.png": ("ComfyUI", 1116526567339338, 20, 5, SQ, "euler_ancestral", M2, N1),
    "sd-metadata/comfyui-upscale.png": ("ComfyUI", 511796159331902, 20, 5, SQ, "euler_ancestral", M2, N1),
    "sd-metadata/comfyui-save-image-extended.jpg": ("ComfyUI", 813617545434765, 20, 5, SQ, "euler_ancestral", M2, N1),
    "sd-metadata/comfyui-save-image-extended.png": ("ComfyUI", 779742380066441, 20, 5, SQ, "euler_ancestral", M2, N1),
    "sd-metadata/comfyui-save-image-extended.webp": ("ComfyUI", 602057552457611, 20, 5, SQ, "euler_ancestral", M2, N1),
    "sd-metadata/comfyui-saveimage-plus.jpg": ("ComfyUI", 577723948579568, 20, 5, SQ, "euler_ancestral", M2, N1),
    "sd-metadata/comfyui-saveimage-plus.png": ("ComfyUI", 434067965194649, 20, 5, SQ, "euler_ancestral", M2, N1),
    "sd-metadata/comfyui-saveimage-plus.webp": ("ComfyUI", 453851843419278, 20, 5, SQ, "euler_ancestral", M2, N1),
    "sd-metadata/comfyui-low-denoise.png": ("ComfyUI", 667022537790957, 40, 5, SQ, "euler_ancestral",
                                            "general, masterpiece, best quality, amazing quality, 4k, very aesthetic, "
                                            "ultra-detailed, (pixel art…",
                                            "modern, recent, old, oldest, anime, illustration, cartoon, graphic…"),
    "sd-metadata/comfyui-comfyroll.png": ("ComfyUI", 942975376742792, 30, 6, SQ, "euler_ancestral", M3, N1),
    "sd-metadata/comfyui-anima.png": ("ComfyUI", 662066908990052, 24, 5, (1216, 832), "euler",
                                      Q + " holding sign, cowboy shot, looking at…", N1),
    "sd-metadata/tensorart.png": ("ComfyUI", 3036459311, 25, 7, SQ, "euler_ancestral", M3,
                                  "bad quality, worst quality, worst detail, sketch, censor"),
    "sd-metadata/civitai-hires.jpg": ("ComfyUI", 1311178179, 25, 5, None, "euler_ancestral", M3, N1),
    "sd-metadata/krea2.png": ("ComfyUI", 371644226245214, 8, 1, None, "euler", None, None),
    "sd-parsers/img2img_cropped.png": ("ComfyUI", 280823642470253, 20, 8, None, DPM, "photograph of victorian woman "
                                       "with wings, sky clouds, meadow grass", "watermark, text"),
    "sd-parsers/night_evening_day_morning_cropped.png": ("ComfyUI", 335608130539327, 13, 8.5, (704, 1280), "dpmpp_sde",
                                                         None, "(hands), text, error, cropped, (worst quality:1.2)…"),
    "sd-parsers/noisy_latents_3_subjects_cropped.png": ("ComfyUI", None, 16, 7, None, DEFAULT, None,
                                                         "(hands), text, error, cropped, (worst quality:1.2)…"),
    "sd-parsers/unclip_2pass_cropped.png": ("ComfyUI", 1106257833005336, 26, 8, (1280, 704), BH2,
                                            "(waifu, anime, exceptional, best aesthetic, new, newest, best quality, "
                                            "masterpiece, extremely detailed:1.2)",
                                            "lowres, (bad anatomy), (bad hands), text, missing finger…"),
    # Ten more repositories (SOURCES.md): ComfyUI's own examples, custom nodes', A1111/Forge extensions' and
    # SwarmUI's documentation images, and two PNG-info tools' fixtures.
    CG + "aura_flow_0.2_example.png": ("ComfyUI", 274576428651941, 20, 3.48, SQ, "euler", "a glass filled with glowing "
                                       "fizzy rainbow drink and a small red toy car on top of a table beside a juicy "
                                       "burger in the middle of a dark forest at night with a bear in the shadows in "
                                       "the background with the full moon", "ugly jpeg"),
    CG + "controlnet_example.png": ("ComfyUI", 1002496614778823, 16, 6, (512, 512), "uni_pc",
                                    "(solo) girl (flat chest:0.9), (fennec ears:1.1)\u00a0 (fox ears:1.1), (blonde "
                                    "hair:1.0), messy hair, sky clouds, standing in a grass field, (chibi), blue eyes",
                                    "(hands), text, error, cropped, (worst quality:1.2)…"),
    CG + "embedding_example.png": ("ComfyUI", 193694018275622, 20, 8, (768, 768), BH2, "photograph in the style of "
                                   "embedding:SDA768.pt girl with blonde hair\nlandscape scenery view", "bad hands"),
    CG + "flux_dev_example.png": ("ComfyUI", 219670278747233, 20, None, SQ, "euler",
                                  "cute anime girl with massive fluffy fennec ears and a big fluffy tail blonde messy "
                                  "long hair blue eyes wearing a maid…", None),
    CG + "flux_schnell_example.png": ("ComfyUI", 112298569477003, 4, None, SQ, "euler",
                                      "a bottle with a beautiful rainbow galaxy inside it on top of a wooden table in "
                                      "the middle of a modern kitchen beside a plate of vegetables and mushrooms and a "
                                      "wine glasse that contains a planet earth with a plate with a half eaten apple "
                                      "pie on it", None),
    CG + "hiresfix_latent_workflow.png": ("ComfyUI", 89848141647836, 12, 8, (768, 768), "dpmpp_sde",
                                          "masterpiece HDR victorian portrait painting of woman, blonde hair, mountain "
                                          "nature, blue sky", "bad hands, text, watermark"),
    CG + "hunyuan_dit_1.2_example.png": ("ComfyUI", 137656229034231, 30, 6, SQ, "euler",
                                         "a bottle with a 彩虹星系 inside it on top of a wooden table on a snowy "
                                         "mountain top with the ocean and clouds in the background", ""),
    CG + "hypernetwork_example_output.png": ("ComfyUI", 572636856966402, 20, 8, (512, 512), BH2, "woman (fennec ears "
                                             "fox ears:1.1), marble statue, museum", TW),
    CG + "inpaint_example.png": ("ComfyUI", 1040111309094545, 20, 8, None, BH2, "closeup photograph of maine coon "
                                 "(cat:1.2) in the yosemite national park mountains nature", "watermark, text"),
    CG + "lcm_basic_example.png": ("ComfyUI", 167055194337639, 5, 1.8, SQ, "lcm", SUNSET, TW),  # ComfyUI's own lcm
    CG + "lora.png": ("ComfyUI", 851616030078638, 20, 8, (512, 512), "euler", *GIRL),
    CG + "lora_multiple.png": ("ComfyUI", 513173432917412, 20, 8, (512, 512), "euler", *GIRL),
    CG + "model_merging_basic.png": ("ComfyUI", 156680208700286, 20, 8, (512, 512), "euler",
                                     "beautiful scenery nature glass bottle landscape, , purple galaxy bottle,", TW),
    CG + "sd3.5_simple_example.png": ("ComfyUI", 585483408983215, 20, 4.01, SQ, "euler",
                                      "a bottle with a pink and red galaxy inside it on top of a wooden table on a "
                                      "table in the middle of a modern kitchen with a window to the outdoors mountain "
                                      "range bright sun clouds forest", ""),
    # Base and refiner share one 25-step schedule, the base stopping at step 20: no single step count says it.
    CG + "sdxl_refiner_prompt_example.png": ("ComfyUI", 6767725640732, None, 8, SQ, "euler",
                                             "daytime sky nature dark blue galaxy bottle", TW),
    CG + "sdxl_simple_example.png": ("ComfyUI", 721897303308196, None, 8, SQ, "euler", SUNSET, TW),
    CG + "sdxlturbo_example.png": ("ComfyUI", 0, 1, 1, (512, 512), "euler_ancestral",
                                   "beautiful landscape scenery glass bottle with a galaxy inside cute fennec fox snow "
                                   "HDR sunset", TW),
    CG + "stable_cascade__text_to_image.png": ("ComfyUI", 314307448448003, 20, 4, SQ, "euler_ancestral",
                                               "evening sunset scenery blue sky nature, glass bottle with a fizzy ice "
                                               "cold freezing rainbow liquid in it", TW),
    # An SDXL image made first, then animated by SVD: the text-to-image pass is the one with a prompt.
    CG + "txt_to_image_to_video.webp": ("ComfyUI", 144698910769133, 15, 8, (1024, 576), BH2, "photograph beautiful "
                                        "scenery nature mountains alps river rapids snow sky cumulus clouds", TW),
    CG + "z_image_turbo_example.png": ("ComfyUI", 47447417949230, 9, 1, SQ, "euler",
                                       "cute anime style girl with massive fluffy fennec ears and a big fluffy tail…",
                                       "blurry ugly bad"),
    # Cutoff splits the prompt into regions: no single prompt says it.
    "BlenderNeko-ComfyUI_Cutoff/ComfyUI_00671_.png": ("ComfyUI", 0, 35, 10, (512, 512), "dpmpp_2m", None,
                                                      "(low quality, worst quality:1.4)"),
    "Haoming02-comfyui-diffusion-cg/on.png": ("ComfyUI", 1337, 32, 6, (512, 512), "dpmpp_2m",
                                              "high quality, a photo of a woman in white dress, standing at the beach, "
                                              "facing away, wind, sunset, twilight, sky, cloud, lens flare",
                                              "low quality, worst quality"),
    "Haoming02-comfyui-resharpen/0.5.png": ("ComfyUI", 1337, 32, 6, (512, 512), "euler",
                                            "high quality, a photo of a man in suit, standing in front of a brick "
                                            "wall, looking at viewer, smile", "low quality, worst quality"),
    # Workflow chunk only. Where "Anything Everywhere" nodes carry the prompts, the graph has no link to follow.
    SIWM + "extra_metadata.png": ("ComfyUI (workflow)", 0, 20, 8, (832, 1216), "euler_ancestral",
                                  "1girl, hatsune miku, vocaloid, aqua hair, aqua eyes, twintails, aqua necktie, cyan "
                                  "shirt, sleeveless, detached sleeves, black sleeves, upper body, smile, looking at "
                                  "viewer, waving, masterpiece, best quality, very aesthetic, absurdres",
                                  "lowres, (bad), text, error, fewer, extra, missing, worst quality, jpeg artifacts, "
                                  "low quality, watermark, unfinished, displeasing, oldest, early, chromatic "
                                  "aberration, signature, extra digits, artistic error, username, scan, [abstract]"),
    SIWM + "sd3.png": ("ComfyUI (workflow)", 0, 28, 4.5, SQ, "dpmpp_2m",
                       "Chibi figure of a wizard girl with a big wand. She wears a wizard's hat and a blue robe. The "
                       "wand is based on a clock. A magic circle is deployed on the underside.", None),
    SIWM + "filename_format.png": ("ComfyUI (workflow)", 123, 20, 8, (512, 768), "dpmpp_2m", None, None),
    SIWM + "lora_embedding_vae.png": ("ComfyUI (workflow)", 123, 20, 8, (512, 768), "dpmpp_2m", None, None),
    SIWM + "everywhere_prompt_utilities.png": ("ComfyUI (workflow)", 12345, 20, 8, (832, 1216), "euler_ancestral", None,
                                               None),
    SW + "auraflow-02.jpg": ("SwarmUI", 1, 20, 3.5, SQ, None, CAT, None),
    SW + "cascade.jpg": ("SwarmUI", 1, 20, 3.5, SQ, None, CAT, None),
    SW + "flux-dev.jpg": ("SwarmUI", 1, 20, 1, SQ, None, CAT, None),
    SW + "flux-schnell.jpg": ("SwarmUI", 1, 4, 1, SQ, None, CAT, None),
    SW + "pixart-sigma-xl-2.jpg": ("SwarmUI", 1, 20, 3.5, SQ, None, CAT, None),
    SW + "sd15.jpg": ("SwarmUI", 1, 20, 4.5, (512, 512), None, CAT, None),
    SW + "sd35l.jpg": ("SwarmUI", 1, 20, 4.5, SQ, None, CAT, None),
    SW + "sd35m.jpg": ("SwarmUI", 1, 20, 4.5, SQ, None, CAT, None),
    SW + "sd3m.jpg": ("SwarmUI", 1, 20, 4.5, SQ, None, CAT, None),
    SW + "sdxl.jpg": ("SwarmUI", 1, 20, 4.5, SQ, None, CAT, None),
    # <setvar>, <random> and <break> are SwarmUI prompt syntax: the prompt that ran is not written down.
    SW + "setmacro-cat.jpg": ("SwarmUI", 1974039850, 30, 7, (512, 512), C_EA, None, None),
    "shenjinti-pnginfo/00002-2416382472.png": ("A1111", 2416382472, 40, 7, SQ, K_DPM, "draw a beautiful woman swimming "
                                               "in the water,", None),
    "bluelovers-auto1111-pnginfo/tmp46c8k1iv.png": ("A1111 (Forge)", 557152045, 20, 7, (512, 512), K_DPM, "highly "
                                                    "insanely detailed, masterpiece, top quality, best quality, "
                                                    "highres, 4k, 8k, RAW photo, (very aesthetic, beautiful and "
                                                    "aesthetic), 1girl, solo", "EasyNegative, (normal quality, low "
                                                    "quality, worst quality:1.4), jpeg artifacts…"),
    "Haoming02-sd-webui-diffusion-cg/off.webp": ("A1111 (Forge)", 1234, 20, 4.5, (896, 1152), K_EA, MIKU,
                                                 "old, oldest, text, glitch, deformed, mutated, ugly, disfigured…"),
    "Haoming02-sd-webui-diffusion-cg/on.webp": ("A1111 (Forge)", 1234, 20, 4.5, (896, 1152), K_EA, MIKU,
                                                "old, oldest, text, glitch, deformed, mutated, ugly, disfigured…"),
    "Haoming02-All-in-One-Stable-Diffusion-Guide/fc_off.webp": ("A1111 (Forge)", 5678, 24, 6, SQ, K_EA, COUPLE,
                                                                COUPLE_UC),
    # Forge Couple on: each line of the prompt is a region of the image.
    "Haoming02-All-in-One-Stable-Diffusion-Guide/fc_on.webp": ("A1111 (Forge)", 5678, 24, 6, SQ, K_EA, None, COUPLE_UC),
    # Diffusers front ends' own layouts (DenOfEquity's webUI extensions) and Draw Things' XMP.
    DE + "StableCascade-for-webUI/example-fde9235.png": ("diffusers web UI", 3096972072, 20, 2.5, (1280, 896), DPM,
                                                         PEAKS, PEAKS_UC),
    DE + "StableCascade-for-webUI/example-30097f8.png": ("diffusers web UI", 225546544, 30, 4, (640, 896), None, RED,
                                                         "shallow focus, blurry"),
    DE + "Hunyuan-DiT-for-webUI/example.png": ("diffusers web UI", 964127841, 20, 1, (896, 1152), "SASolverScheduler",
                                               "photograph of a kintsugi bowl of steaming dumplings on a rustic wooden "
                                               "table", None),
    DE + "StableDiffusion3-for-webUI/example2.png": ("diffusers web UI", 14641, 20, 5, (832, 1248), None, WITCH, ""),
    DE + "PixArt-Sigma-for-webUI/example.png": ("diffusers web UI", 1869352392, 20, 2.5, (896, 1152), None, RED,
                                                "low angle"),
    DE + "Sana-for-webUI/example-3ebfbdf.png": ("diffusers web UI", 1326363512, 11, 8, (1280, 768), None, ANDROID,
                                                ANDROID_UC),
    DE + "Sana-for-webUI/example-f20955c.png": ("diffusers web UI", 2110661715, 20, 4, (832, 1216), None, RED, None),
    "Ktiseos-Nyx-Dataset-Tools/w1z_m4ch1n4_2050777441.png": ("Draw Things", 2050777441, 26, 3.5, (768, 1024), EA,
                                                             "w1z_m4ch1n4. gentleman cyborg robot with a fish bowl "
                                                             "head, with a small goldfish", ""),
    # imaginAIry: EXIF IFD0 UserComment JSON and ImageDescription (its summary), in a JPEG or a PNG's eXIf chunk.
    IMA + "pearl_firefighter.png": ("imaginAIry", 339535990, 40, 7.5, (512, 512), "PNDMScheduler",
                                    "a female firefighter", None),
    # The JSON of early 2023 leaves the seed out: only the summary says it (seed:521829407; seed:1 in the next).
    IMA + "pearl_anime_019537_521829407_kdpmpp2m30_PS9.0_img2img-0.jpg": ("imaginAIry", 521829407, 30, 9.0,
                                                                          (512, 512), K_DPM, "make it anime", ""),
    IMA + "fairytale-treehouse-openjourney-v1.jpg": ("imaginAIry", 1, 60, 7.5, (512, 512), K_DPM, "valley, fairytale "
                                                     "treehouse village covered, , matte painting, highly detailed…",
                                                     IMA_NEG),
    IMA + "028374_1_ddim50_PS7.jpg": ("imaginAIry", 1, 50, 7.5, (1280, 720), DDIM,
                                      "wide shot of sun setting on a green valley", IMA_NEG),
    # InvokeAI 1.15: the prompt as the Dream line typed it (sd-metadata holds the weights normalised); a !fix line
    # names its source image where the prompt goes, and sd-metadata stored that path as the prompt.
    INV + "prompt-blending__blue-sphere-0.25-red-cube-0.75-hybrid_v2dream.png": (
        "InvokeAI 2", 3575531754, 50, 7.5, (512, 512), LMS, "blue sphere:0.25 red cube:0.75 hybrid", ""),
    INV + "outpainting__elven_princess.outpainted.png": ("InvokeAI 2", 1432851274, 50, 7.5, (512, 512), DDIM, None,
                                                         None),
    # A1111 with the loractl extension: LoRA weights scheduled over the steps (weight@step), in the prompt as written.
    LCTL + "00009-1449410826.png": ("A1111", 1449410826, 20, 7, (512, 512), K_EA, "<lora:st4rw4ar5at4t:0@0,1@0.4> "
                                    "<lora:MechanicalBird:1@0,0.5@0.5> mechanical bird,  st4rw4ar5at4t", ""),
    LCTL + "00016-1449410826.png": ("A1111", 1449410826, 20, 7, (512, 512), K_EA, "<lora:pixel:te=1:unet=0@0,1@1> "
                                    "pixelart, mecha on the beach, beautiful sunset, epic lighting", ""),
}
# Files SeedLab does not yet read as they say: what is missing, checked to stay missing (strict xfail).
GAPS = {
    CG + "stable_cascade__text_to_image.png": "Stable Cascade: stage B's sampler starts from the same empty latent as "
                                              "stage C's and is restored instead of it (seed, steps, cfg of stage B)",
}
REFUSED = {"sd-metadata/civitai-upscale.jpg": "no sampler", "sd-metadata/empty.png": "no recipe",
           INV + "inpainting__000019.curly.hair.masked.png": "!mask", INV + "img2img__000030.step-0.png": "no switches"}
FIELDS = ("seed", "num_inference_steps", "guidance_scale", "size", "scheduler", "prompt", "negative_prompt")


def normal(text: str) -> str:
    return "\n".join(line.strip() for line in text.replace("\r\n", "\n").split("\n")).strip()


def field_results(name: str) -> dict[str, bool]:
    """For each field the file states: whether SeedLab restored it as the file says."""
    expected = dict(zip(("format", *FIELDS), EXPECTED[name]))
    reading = read_metadata(CORPUS / name)
    got = dict(reading.fields)
    got["size"] = (got["width"], got["height"]) if "width" in got and "height" in got else None
    results = {"format": reading.format == expected["format"]}
    for field in FIELDS:
        want = expected[field]
        if want is None:
            continue
        value = got.get(field)
        if field in ("prompt", "negative_prompt") and isinstance(value, str):
            value = normal(value)
            if want.endswith("…"):
                results[field] = value.startswith(want[:-1])
                continue
        results[field] = value == want
    return results


def test_the_corpus_has_at_least_40_files_from_other_tools():
    files = {str(path.relative_to(CORPUS)) for path in CORPUS.glob("*/*") if path.suffix in (".png", ".jpg", ".webp")}
    assert files == set(EXPECTED) | set(REFUSED)
    assert len(EXPECTED) >= 40
    sources = (CORPUS / "SOURCES.md").read_text()
    assert all(Path(name).name in sources for name in files)


@pytest.mark.parametrize("name", [pytest.param(name, marks=pytest.mark.xfail(reason=GAPS[name], strict=True))
                                  if name in GAPS else name for name in sorted(EXPECTED)])
def test_every_field_is_restored_as_the_file_says(name):
    results = field_results(name)
    assert all(results.values()), {field: ok for field, ok in results.items() if not ok}


def test_restored_fraction_per_format_is_at_least_98_percent():
    per_format: dict[str, list[int]] = {}
    for name in EXPECTED:
        tally = per_format.setdefault(EXPECTED[name][0].split(" (")[0], [0, 0])
        results = field_results(name)
        tally[0] += sum(results.values())
        tally[1] += len(results)
    restored, total = sum(t[0] for t in per_format.values()), sum(t[1] for t in per_format.values())
    assert restored / total >= 0.98, per_format


@pytest.mark.parametrize(("name", "reason"), sorted(REFUSED.items()))
def test_files_without_a_usable_recipe_are_refused_with_one_line(name, reason):
    with pytest.raises(ValueError, match=reason) as error:
        read_metadata(CORPUS / name)
    assert "\n" not in str(error.value) and "/" not in str(error.value)


def test_several_sampling_passes_restore_the_first_and_say_so():
    notes = read_metadata(CORPUS / "sd-metadata/comfyui-hires.png").notes
    assert any("2 sampling passes" in note and "first pass (node Sampler" in note for note in notes)
    notes = read_metadata(CORPUS / "sd-parsers/noisy_latents_3_subjects_cropped.png").notes
    assert any("sampling passes" in note for note in notes)


def pass_rates() -> dict[str, tuple[int, int]]:
    """Per format (the name before any parenthesis): files with every field restored, files."""
    rates: dict[str, tuple[int, int]] = {}
    for name in sorted(EXPECTED):
        tool = EXPECTED[name][0].split(" (")[0]
        good, count = rates.get(tool, (0, 0))
        rates[tool] = (good + all(field_results(name).values()), count + 1)
    return rates


if __name__ == "__main__":  # the table at the end of SOURCES.md: python -m tests.test_corpus
    print("| format | files read correctly | files |\n| --- | --- | --- |")
    for tool, (good, count) in sorted(pass_rates().items(), key=lambda item: -item[1][1]):
        print(f"| {tool} | {good} ({100 * good / count:.0f}%) | {count} |")
