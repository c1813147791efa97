"""LoRA on the page (issue 29): the app started with a models folder lists its LoRAs, and a prompt that names
one in A1111's syntax makes the image with it; the link records the LoRA's hash and rebuilds the same image."""

import pytest

from tests.browser.pages import CHROMIUM
from tests.browser.settle import open_settled, ready, settle, value
from tests.conftest import AppServer

pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), reason=f"no Chromium at {CHROMIUM} to drive the UI with")


@pytest.fixture(scope="module")
def lora_server(app_model, tmp_path_factory):
    """The app serving `app_model` with an A1111 models folder that holds one kohya LoRA, "ink"."""
    from diffusers import StableDiffusionPipeline

    from seedlab.engine.models import EMBEDDED_MODEL_DIR
    from tests.reference.a1111_lora import write_kohya_lora

    folder = tmp_path_factory.mktemp("lora-app")
    (folder / "models" / "Lora").mkdir(parents=True)
    pipe = StableDiffusionPipeline.from_pretrained(EMBEDDED_MODEL_DIR if app_model == "embedded" else app_model)
    write_kohya_lora(folder / "models" / "Lora" / "ink.safetensors", pipe.unet, pipe.text_encoder, relative_std=0.3)
    server = AppServer(app_model, folder, {"SEEDLAB_MODELS_DIR": str(folder / "models"),
                                           "SEEDLAB_CACHE_DIR": str(folder / "cache")})
    server.start()
    try:
        yield server
    finally:
        server.stop()


def test_a_prompt_naming_a_lora_of_the_models_folder_makes_its_image_and_the_link_keeps_its_hash(browser, lora_server):
    from gradio_client import Client

    from seedlab.engine.weights.library import addnet_hash
    from seedlab.files.links import decode_link

    page = open_settled(browser, lora_server.url)
    page.get_by_text("LoRA, embeddings and VAE", exact=True).click()
    page.locator("#loras textarea").wait_for()
    assert "in the models folder: ink" in page.locator("#loras").inner_text()
    page.locator("#prompt textarea").fill("a red circle <lora:ink:1>")
    page.locator("#seeds textarea").fill("5")
    page.locator("#num-inference-steps input").fill("3")
    page.locator("#generate").click()
    settle(page)
    assert ready(page)
    page.locator("#grid .thumbnail-item").nth(0).click()  # the cell's link shows under the grid
    settle(page)
    recipe, fingerprint, _ = decode_link(value(page, "grid-link"))
    expected_hash = addnet_hash(lora_server.folder / "models" / "Lora" / "ink.safetensors")[:12]
    assert (recipe.prompt, recipe.lora_hashes) == ("a red circle <lora:ink:1>", f"ink: {expected_hash}")
    client = Client(lora_server.url, verbose=False)
    _, without = client.predict(prompt="a red circle", seeds="5", num_inference_steps=3, api_name="/grid")
    assert without[0]["fingerprint"] != fingerprint  # the LoRA changed the image
    _, verdict = client.predict(link_or_recipe=value(page, "grid-link"), api_name="/reverify")  # regenerated now
    assert verdict["exact"] is True and verdict["fingerprint"] == fingerprint
    page.context.close()
