"""Real ComfyUI graphs built with custom-node packs (tests/corpus/custom-nodes, sources in SOURCES.md).

Each file's expected values were worked out by reading its graph (the `prompt` API graph, or the `workflow`
UI graph where that is all the file has) and the node packs' own source: which node samples, which input
carries the seed, which loader holds the prompts and the latent size. They were not taken from SeedLab.

Conventions, as in tests/test_corpus.py: prompts are compared line by line with the spaces at line ends
stripped; None means the file does not say it unambiguously. Where a graph has a first txt2img pass and then
hires/upscale/detailer passes, the first pass (the one sampling the empty latent) is the recipe. Where a base
and a refiner share one schedule (refine_at_step, base_vs_refiner_ratio, refiner_steps), no single step
count says it (steps None). XY plots over seeds, prompt wildcards, random-line nodes, styler templates that
can't be resolved, SDXL text_g/text_l pairs that differ and area-composed conditioning are None. Img2img
passes state no size.
"""

from pathlib import Path

import pytest

from seedlab.files.metadata import read_metadata

CORPUS = Path(__file__).parent / "corpus"
EFF = "custom-nodes/jags111-efficiency-nodes-comfyui/"
SEARGE = "custom-nodes/SeargeDP-SeargeSDXL/"
RG = "custom-nodes/rgthree-rgthree-comfy/"
TTN = "custom-nodes/TinyTerra-ComfyUI_tinyterraNodes/"
LTD = "custom-nodes/ltdrdata-ComfyUI-extension-tutorials/"
EASY = "custom-nodes/yolain-ComfyUI-Yolain-Workflows/"
WYRDE = "custom-nodes/wyrde-wyrde-comfyui-workflows/"
CR = "custom-nodes/Suzie1-ComfyUI_Comfyroll_CustomNodes/"
CRYS = "custom-nodes/crystian-ComfyUI-Crystools/"
MTB = "custom-nodes/melMass-comfy_mtb/"
SYTAN = "custom-nodes/SytanSD-Sytan-SDXL-ComfyUI/"
CUBIQ = "custom-nodes/cubiq-ComfyUI_Workflows/"

# file: (seed, steps, cfg, (width, height), prompt, negative prompt)
EXPECTED = {
    EFF + "EFF_TiledscriptWorkflow.png": (1046036195170979, 30, 6, (768, 512),
        ("Large Moss beast redwood forest landscape realistic painting 8k resolution deviantart oil on "
         "canvas Unreal Engine volumetric lighting detailed painting trending on art station"),
        ("embedding:EasyNegative.pt, , lowres, low quality, worst quality, people, watermarks, white space, "
         "embedding:bad-image-v2-39000.pt")),
    EFF + "Eff_animatediff_script_wf001.png": (17, 25, 7, (512, 512),
        None,
        "text, watermark, embedding:EasyNeagtive,  embedding:an10"),
    EFF + "HiResfix_workflow.png": (1106939166727686, 20, 7.5, (768, 768),
        ("masterpiece, best quality, movie still, 1girl, floating in the sky, cloud girl, cloud, "
         "(close-up:1.1), bright, happy, fun, soft lighting, closeup"),
        ("embedding:EasyNegative.pt, embedding:bad-artist-anime.pt, lowres, low quality, worst quality, "
         "duplicate, morbid, mutilated, out of frame, extra fingers, mutated hands, poorly drawn hands, "
         "poorly drawn face, mutation, deformed, ugly, blurry, bad anatomy, bad proportions, extra limbs, "
         "cloned face, disfigured, out of frame, ugly, extra limbs, bad anatomy, gross proportions, "
         "malformed limbs, missing arms, missing legs, extra arms, extra legs, mutated hands, fused "
         "fingers, too many fingers, long neck, kid, teenage, badhandv4, EasyNegative, child, kid, teenage")),
    EFF + "SDXL-refining-noise-control-script.png": (None, None, 9, (1024, 1024),
        ("perfect mix between Carnage from Marvel and Godzilla, with Carnage's red tentacles protruding "
         "from his entire body, destroying city, blood, epic, (cataclysmic, white eyes like venom, "
         "gargantuan, taller than buildings, oversized, gigantic:1.9), absurdres, best quality, fantasy "
         "style ,(intricate details), (hyperdetailed), 8k hdr, high detailed, lot of details, high quality, "
         "soft cinematic light, dramatic atmosphere, atmospheric perspective"),
        ("3d, low quality, worst quality, mutation, deformed hands, ( three arms or more, three hands or "
         "more, three legs or more, three feet or more, comics style:1.6)")),
    EFF + "SDXL_base_refine_noise_workflow.png": (238710419612190, None, 9, (1216, 832),
        ("award winning character concept art of, a cute mechanical witch, light brown hair, blue eyes, "
         "pink and white dress, blurry_ background, bewitching, smile, stunning, witch hat, natural "
         "lighting, buxom, lips, short hair, looking_ at_ viewer, solo, from side, highly detailed 8k "
         "character concept portrait studio lighting by Annie Leibovitz and Steve McCurry octane render "
         "trending on art station made in Maya 4K high quality digital painting dramatic lighting"),
        ("3d, low quality, worst quality, mutation, deformed hands, ( three arms or more, three hands or "
         "more, three legs or more, three feet or more, comics style:1.6), NSFW, nudes , signature, "
         "artefacts")),
    EFF + "image-overlay.png": (1046036195170327, 30, 6, (768, 512),
        "forest road, pixel, scenery, pokemon",
        ("embedding:EasyNegative.pt, embedding:bad-artist-anime.pt, lowres, low quality, worst quality, "
         "people, watermarks, white space, ")),
    EFF + "tiled-upscaler-script.png": (980056807522009, 20, 7.5, (1024, 512),
        "beach, ocean, (cumulonimbus clouds:1.3), islands, sailboat,",
        "(worst quality, low quality:1.3), embedding:easynegative"),
    EFF + "xy-plot-node.png": (None, 24, 7, (704, 704),
        ("masterpiece, best quality, haunted theme park, haunted by chibi ghosts, cute, whimsical, glow, "
         "glowing, fun, silly, mystical, closeup"),
        ("embedding:EasyNegative.pt, embedding:bad-artist-anime.pt, lowres, NSFW, (worst quality, low "
         "quality), open_mouth, ")),
    EFF + "xyplot-seeds-vs-checkpoints.png": (None, 24, 7, (512, 512),
        ("masterpiece, best quality, haunted theme park, haunted by chibi ghosts, cute, whimsical, glow, "
         "glowing, fun, silly, mystical, closeup"),
        ("embedding:EasyNegative.pt, embedding:bad-artist-anime.pt, lowres, NSFW, (worst quality, low "
         "quality)")),
    SEARGE + "example-1-quick-iteration.png": (56421668217, None, 5, (1344, 768),
        None,
        None),
    SEARGE + "example-4-albert-einstein.png": (56421668308, None, 7, (896, 1152),
        None,
        None),
    SEARGE + "example-5-dragon.png": (56421668327, None, 4, (832, 1216),
        None,
        None),
    RG + "rgthree_advanced_metadata.png": (172653301405912, 25, 3, (512, 512),
        ("full body portrait RAW photo of rugged man with scruffy face, inspired by fallout, Mad Max and "
         "Waterworld, detailed face, post apocalyptic atmosphere in 1930', a man in rugged power armor, "
         "((junkyard)), (debris), ((trash)), ((junk)), (((cars))) fill up the streets, rust, corrosion, "
         "sense of scale, sublime beauty of the grandiose environment, epic, cinematic composition, "
         "volumetric lighting, defined lines, blurred background, saturated colors, strong bloom, "
         "((photorealistic)) realism, beautiful and detailed lighting, shadows, Detailed portrait "
         "cyberpunk, futuristic neon reflective wear, sci-fi, robot parts, fine details, realistic shaded, "
         "intricate, elegant, detailed film still of portrait neon operator in the movie blade runner, "
         "messy ponytail, cyberpunk futuristic, neon, fine details, realistic shaded"),
        ("render, illustration, painting, blurry, 3d, sweaty, disfigured, ugly, oversaturated, grain, "
         "low-res, Deformed, bad anatomy, disfigured, poorly drawn face, mutation, mutated, extra limb, "
         "ugly, old, poorly drawn hands, missing limb, floating limbs, disconnected limbs, malformed hands, "
         "out of focus, long neck, long body, disgusting, creepy, poorly drawn, childish, mutilated, "
         "mangled, surreal, ((duplicates)), ((companions)), text, bad proportions, humans merged with "
         "items, weapons attached to fingers, concrete buildings, similar cars,, text, b&w, cartoon, bad "
         "art, poorly drawn, close up, blurry, disfigured, deformed, extra limbs:1.5, extra heads:1.5, noise")),
    RG + "rgthree_context_metadata.png": (883703990502425, 25, 3, (512, 512),
        ("full body portrait RAW photo of rugged man with scruffy face, inspired by fallout, Mad Max and "
         "Waterworld, detailed face, post apocalyptic atmosphere in 1930', a man in rugged power armor, "
         "((junkyard)), (debris), ((trash)), ((junk)), (((cars))) fill up the streets, rust, corrosion, "
         "sense of scale, sublime beauty of the grandiose environment, epic, cinematic composition, "
         "volumetric lighting, defined lines, blurred background, saturated colors, strong bloom, "
         "((photorealistic)) realism, beautiful and detailed lighting, shadows, Detailed portrait "
         "cyberpunk, futuristic neon reflective wear, sci-fi, robot parts, fine details, realistic shaded, "
         "intricate, elegant, detailed film still of portrait neon operator in the movie blade runner, "
         "messy ponytail, cyberpunk futuristic, neon, fine details, realistic shaded"),
        ("render, illustration, painting, blurry, 3d, sweaty, disfigured, ugly, oversaturated, grain, "
         "low-res, Deformed, bad anatomy, disfigured, poorly drawn face, mutation, mutated, extra limb, "
         "ugly, old, poorly drawn hands, missing limb, floating limbs, disconnected limbs, malformed hands, "
         "out of focus, long neck, long body, disgusting, creepy, poorly drawn, childish, mutilated, "
         "mangled, surreal, ((duplicates)), ((companions)), text, bad proportions, humans merged with "
         "items, weapons attached to fingers, concrete buildings, similar cars,, text, b&w, cartoon, bad "
         "art, poorly drawn, close up, blurry, disfigured, deformed, extra limbs:1.5, extra heads:1.5, noise")),
    TTN + "tinyterra_pipeSDXL.png": (None, None, 8, (1024, 1024),
        ("A serene sunset, with a glass bottle containing a miniature cozy cabin nestled in a snowy alpine "
         "forest inside."),
        "text, watermark"),
    TTN + "tinyterra_trueHRFix.png": (None, 24, 7, (768, 512),
        ("majestic leucistic lion, surrounded by a swirling mist of color, vibrant, celestial, explosion, "
         "chatter, lion, majestic, regal, mist, color, energy, excitement, diffusion, explosive"),
        "disconnected, merged, weird, ugly, text, signature, watermark, blurry, blurred"),
    TTN + "tinyterra_xyPlot.png": (None, 20, 8, (768, 768),
        None,
        "text, watermark"),
    LTD + "TwoAdvancedSamplers-original.png": (1107040072933066, 20, 8, (768, 1024),
        "photorealistic:1.4, best quality:1.4, masterpiece, 1girl is walks in the streets",
        "text, watermark, low quality:1.4, worst quality:1.4, drawings, paintings, cartoon, anime"),
    LTD + "interactive-sam-original.png": (825529567532934, 20, 8, (704, 1024),
        ("photorealistic:1.4, (masterpiece:1.2), (best quality:1.2), (intricate details:1.1), (detailed "
         "face:1.2), highres, cinematic light, A young Korean idol actress, 20 years old, skateboarding "
         "down a busy street, wearing a casual and edgy outfit with ripped jean skirt and a leather jacket, "
         "with a confident and carefree expression, surrounded by colorful street art and graffiti on the "
         "walls, captured in a dynamic and gritty urban art style with spray paints and markers on a large "
         "wall, (full body:0.8)"),
        ("nsfw, (worst quality, low quality:1.3), (depth of field, blurry:1.2), (greyscale, "
         "monochrome:1.1), 3D face, nose, cropped, lowres, text, jpeg artifacts, signature, watermark, "
         "username, blurry, artist name, trademark, watermark, title, (tan, muscular, loli, petite, child, "
         "infant, toddlers, chibi, sd character:1.1), multiple view, Reference sheet, ")),
    LTD + "upscale-original.png": (497844439624915, 20, 8, (304, 512),
        ("photorealistic:1.4, best quality, realistic, masterpiece, high quality, UHD, shadow, taken by "
         "Canon EOS, SIGMA Art Lens 35mm F1.4, ISO 200 Shutter Speed 2000 / 😊, light blue hair, pink hair / "
         "t-shirt with print, jeans shorts, casual fashion / 🌸, blooming all around, (limited palette), "
         "colourful, bright colors, pink bag"),
        "(low quality:1.4), (worst quality:1.4), bad anatomy"),
    LTD + "extreme-upscale-original.png": (497844439624916, 20, 8, (304, 512),
        ("photorealistic:1.4, best quality, realistic, masterpiece, high quality, UHD, shadow, taken by "
         "Canon EOS, SIGMA Art Lens 35mm F1.4, ISO 200 Shutter Speed 2000 / 😊, light blue hair, pink hair / "
         "t-shirt with print, jeans shorts, casual fashion / 🌸, blooming all around, (limited palette), "
         "colourful, bright colors, pink bag"),
        "(low quality:1.4), (worst quality:1.4), bad anatomy"),
    LTD + "hair-restyle-result.png": (None, 20, 8, None,
        "blond curly hair",
        ""),
    LTD + "simple-original.png": (431433362471142, 20, 8, (296, 512),
        ("(photorealistic:1.4), best quality, masterpiece, 1girl, (detailed eyes), perfect anatomy, smile, "
         "details, perfect eyes, perfect face, (SpringGreen+letter_printed_sleeveless_turtleneck), "
         "((white_low_waist_jeans)), (thigh_gap:1.2), at_the_top_of_mountain, snow, daytime, windy, path, "
         "mountain_villa, sky_view, slender, looking_away, (small breast:1.2)"),
        ("embedding:easynegative, embedding:badhandv4, paintings, sketches, (worst quality:1.4, low "
         "quality, normal quality), lowres, normal quality, (monochrome), (grayscale), skin spots, acnes, "
         "skin blemishes, age spot, glans, nsfw, watermark, signature, text, bikini,  bad anatomy, "
         "(six_fingers), (nail_art), nail polish, blush, fruit,")),
    LTD + "1pass-sdxl_base_only.png": (721234146413045, 20, 8, (1400, 1200),
        None,
        "Deformed, unrealistic, bad quality, grainy, noisy, plastic, hazy, low contrast, "),
    LTD + "2pass-sdxl_sd15.png": (721234146413045, 20, 8, (1400, 1200),
        None,
        "Deformed, unrealistic, bad quality, grainy, noisy, plastic, hazy, low contrast, "),
    # SDXLPromptStyler's "sai-analog film" template adds its own negative text: not stated by the graph itself
    LTD + "wildcard-prompt-styler.png": (90270367058767, 20, 6, (832, 1216), None, None),
    LTD + "wildcard-lbw.png": (944516346096519, 20, 8, (512, 768),
        ("<lora:SD1.5/cloth/2b leotardV2:1.0:1.0:LBW=0,0,0,0,0,0,0,A,A,B,B,0,0,0,0,0,0;A=2.0;B=1.5>, 2b "
         "leotard, (covered eyes:1.1), hair over eyes"),
        "text, watermark"),
    LTD + "flux-ksampler-inspire.png": (364796916966557, 20, 3.5, (768, 1200),
        "A picture of a girl skating on clouds. The words \"FLUX is AWESOME\" are drawn with clouds.",
        None),
    LTD + "Scheduled_CFGGuider.png": (40012, 20, None, (768, 1104),
        ("A photograph of a robot cowboy is walking, dust, red scarf, from front, , steam city, cloud, "
         "cactus,"),
        "deformed, blurry"),
    LTD + "reproduce-a1111.png": (1286079241, 30, 3.5, (1024, 1400),
        ("photo of a cute goth girl, hacker, sit a desk,  working at pc, skirt, clutter metro, night, neon "
         "lights, nerd outfit, cinematic, cyberpunk, clutter large room, cables"),
        "makeup"),
    LTD + "seed-explorer.png": (None, 20, 8, (832, 1216),
        ("a closeup photograph of a super girl wear mechanic armor, broken building, red cape, upper waist, "
         "tactical suit"),
        "blur, deformed"),
    LTD + "cache-workflow1.png": (630921104207501, 20, 8, (512, 512),
        "galaxy bottle",
        ""),
    LTD + "latent-batch-splitter.png": (195438957771997, 25, 6.5, (1024, 768),
        ("a cinematic photograph of a small tree made of cloud in the ball on the wooden table, intricate "
         "detail, cinematic lighting,"),
        "leaf, green"),
    LTD + "sdxl-detailer.png": (None, None, 8, None,
        None,
        "noise, grit, dull, washed out, low contrast, blurry, deep-fried, hazy, malformed, warped, deformed"),
    LTD + "flux-efficient-negative-prompt.png": (101, 20, 3.5, (1040, 1200),
        "photograph of a street",
        None),
    LTD + "ksampler-progress.png": (95071294128444, 20, 8, (640, 864),
        ("photorealistic:1.4, best quality, realistic, masterpiece, high quality, UHD, shadow, taken by "
         "Canon EOS, SIGMA Art Lens 35mm F1.4, ISO 200 Shutter Speed 2000 / 😊, light blue hair, pink "
         "hair / t-shirt with print, (torn:0.5, jeans shorts), casual fashion / 🌸, blooming all around, "
         "(limited palette), colourful, bright colors, (smile:0.5), perfect anatomy, (pink bag), upper knee"),
        "text, watermark"),
    EASY + "1-1-txt2img.png": (236370671715313, 20, 8, (512, 768),
        ("1girl sitting on a bus, (school uniform:1.3), park, head portrait, real photo, realistic, "
         "masterpiece, best quality,"),
        " text, watermark, nsfw"),
    EASY + "1-2-img2img.png": (714212648112245, 20, 8, None,
        ("a woman detailed face in a white sweater posing for a photo, open mounth, teeth, smile, black "
         "eyes, gorgeous chinese model, wenfei ye, yanjun chengt, pengzhen zhang, dilraba dilmurat, jiyun "
         "chae, cute korean actress, female actress from chinese, photo of slim girl model, yang qi, "
         "beautiful south chinese woman, popular korean makeup, sea background, inspire by monet"),
        "text, watermark, worst quality, bad hands, embedding:badhandv4, "),
    EASY + "1-3-pipe-edit.png": (848721622412845, 20, 5, (768, 768),
        None,
        "text, watermark"),
    EASY + "1-4-wildcards-styles.png": (198021618824289, 20, 8, (768, 1024),
        None,
        None),
    EASY + "1-8-prompt-line.png": (849987078927832, 25, 7, (768, 768),
        "girl hugging (one pig), cute, painting",
        "text,watermark, embedding:badhandv4, "),
    WYRDE + "example-prefix_00010_.png": (224713950115468, 20, 8, (512, 768),
        None,
        ("embedding:EasyNegative, embedding:bad-hands-5, cloud, mist, fog, (artist name), sketch, "
         "grayscale, deformed, ugly, mutilated, disfigured, text, writing, extra legs, extra arms, extra "
         "fingers, over saturated, nsfw")),
    WYRDE + "compare-prompt-diff-x4_00009_.png": (8008580085, 20, 8, (576, 384),
        None,
        ("embedding:EasyNegative, embedding:bad-hands-5, (artist name), deformed, ugly, mutilated, "
         "disfigured, text, writing, extra legs, extra arms, extra fingers, over saturated,")),
    WYRDE + "preview-example_00012_.png": (3, 20, 8, (512, 512),
        "beautiful scenery nature glass bottle landscape, purple galaxy bottle,\n",
        "text, watermark"),
    WYRDE + "wyrde-was-node-basic.png": (904019488781965, 12, 8, None,
        ("adorable cat girl wearing a striped bikini, detailed eyes, detailed hair, pastel "
         "hair,\n\nabsurdres, vibrant, photograph, photographic photo, photogenic, rule of thirds, anime, "
         "illustration, medium shot, Azulejo, finely detailed, realistic, masterpiece, best quality, "
         "illustration, soft focus, HDR 8K, artstation, pixv, unreal engine 5, SFW, "),
        "bad hands, NSFW, nude"),
    WYRDE + "checkpoint-test_00069_.png": (None, 12, 8, (512, 768),
        ("adorable faerie girls wearing a striped bikini and striped stockings, hands behind her back, "
         "pastel hair, (slim, skinny, thin, petite), \nstriped stockings, shoulder length striped gloves, "
         "extra strings, extra knots, extra bows, sandals,  \nphotograph, photographic photo, photogenic, "
         "rule of thirds, anime, illustration, medium shot, \nAzulejo, finely detailed, realistic, "
         "masterpiece, best quality, illustration, soft focus, HDR 8K, artstation, pixv, unreal engine 5, "),
        ("embedding:EasyNegative, embedding:bad-hands-5,\nnude, naked, pubic hair, fat, chubby, thick, "
         "lowres, error, cropped, worst quality, low quality, jpeg artifacts, out of frame, watermark, "
         "signature, deformed, ugly, mutilated, disfigured, text, extra limbs, face cut, head cut, extra "
         "fingers, extra arms, poorly drawn face, mutation, missing limbs, misplaced limbs, bad "
         "proportions, cropped head, malformed limbs, mutated hands, fused fingers, long neck, sketch, bad "
         "hands,  ")),
    CR + "CR_SDXL_MultiModelMerge_demo1.png": (0, None, 7, (896, 1152),
        "A beautiful young woman staring into the abyss of infinity",
        ""),
    CR + "CR_XY_Revised_FreeU_demo1.png": (5465151, 25, 8, (1024, 1024),
        None,
        None),
    CRYS + "pipe-1.png": (156680208700286, 20, 8, (512, 512),
        "beautiful scenery nature glass bottle landscape, , purple galaxy bottle,",
        "text, watermark"),
    CRYS + "switch.png": (156680208700286, 20, 8, (512, 512),
        ("beautiful scenery nature glass bottle landscape, in the bottle should be a cat (seen the "
         "camera:1.2), purple galaxy bottle,"),
        "text, watermark"),
    MTB + "02-film_interpolation.png": (1682, 45, 8, (768, 320),
        None,
        ("embedding:EasyNegative, embedding:EasyNegativeV2, watermark, text, deformed, bad anatomy, "
         "disfigured")),
    SYTAN + "Sytan-SDXL-Workflow-v0.5.png": (69, None, 7.5, (1024, 1024),
        None,
        "Deformed, unrealistic, bad quality, grainy, noisy, plastic, hazy, low contrast"),
    CUBIQ + "basic_parametrized.png": (6, 20, 7, (512, 512),
        "a photo of a cat wearing a spacesuit inside a spaceship\n\nhigh resolution, detailed, 4k",
        "blurry, illustration"),
}
FIELDS = ("seed", "num_inference_steps", "guidance_scale", "size", "prompt", "negative_prompt")


def normal(text: str) -> str:
    return "\n".join(line.rstrip() for line in text.replace("\r\n", "\n").split("\n")).strip()


def field_results(name: str) -> dict[str, tuple[bool, object, object]]:
    """For each field the file states: (restored as the file says, expected, got)."""
    expected = dict(zip(FIELDS, EXPECTED[name]))
    try:
        got = dict(read_metadata(CORPUS / name).fields)
    except ValueError as error:  # refused: every stated field is missing
        got = {"error": str(error)}
    got["size"] = (got["width"], got["height"]) if got.get("width") and got.get("height") else None
    results = {}
    for field in FIELDS:
        want = expected[field]
        if want is None:
            continue
        value = got.get(field)
        if field in ("prompt", "negative_prompt") and isinstance(value, str):
            value, want = normal(value), normal(want)
        results[field] = (value == want, want, value)
    return results


def test_every_file_is_in_the_table_and_in_sources():
    folder = CORPUS / "custom-nodes"
    files = {str(path.relative_to(CORPUS)) for path in folder.glob("*/*") if path.suffix in (".png", ".webp")}
    assert files == set(EXPECTED)
    sources = (CORPUS / "SOURCES.md").read_text()
    assert all(name in sources for name in files)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_every_stated_field_is_restored(name):
    results = field_results(name)
    wrong = {field: (want, got) for field, (ok, want, got) in results.items() if not ok}
    assert not wrong, wrong


def test_restored_fraction_is_at_least_98_percent():
    outcomes = [ok for name in EXPECTED for ok, _, _ in field_results(name).values()]
    assert sum(outcomes) / len(outcomes) >= 0.98, f"{sum(outcomes)} of {len(outcomes)} stated fields"
