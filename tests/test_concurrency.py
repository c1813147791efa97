"""Several users at once: each gets exactly the images they would get alone."""

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import torch
from gradio_client import Client
from PIL import Image

from seedlab import Recipe, generate
from tests.conftest import APP_THREADS

CLIENTS = 4
REQUESTS_PER_CLIENT = 3
STEPS = 3


def request_for(client_index: int, request_index: int) -> dict:
    """Every request differs in prompt, seeds, scheduler and determinism, so a mix-up would show."""
    schedulers = ["EulerAncestralDiscreteScheduler", "DDIMScheduler", "default"]
    first = 100 * client_index + 10 * request_index
    return {
        "prompt": f"a red circle {client_index}-{request_index}",
        "seeds": f"{first}-{first + 1}",
        "num_inference_steps": STEPS,
        "scheduler": schedulers[(client_index + request_index) % 3],
        "deterministic": bool((client_index + request_index) % 2),
    }


def run_client(url: str, client_index: int) -> list[tuple[dict, list, list]]:
    client = Client(url, verbose=False)
    out = []
    for request_index in range(REQUESTS_PER_CLIENT):
        arguments = request_for(client_index, request_index)
        gallery, results = client.predict(**arguments, api_name="/grid")
        out.append((arguments, gallery, results))
    return out


def test_concurrent_clients_get_the_images_they_would_get_alone(app_url, reference_model):
    with ThreadPoolExecutor(CLIENTS) as pool:
        answers = [a for f in [pool.submit(run_client, app_url, i) for i in range(CLIENTS)] for a in f.result()]
    assert len(answers) == CLIENTS * REQUESTS_PER_CLIENT

    before = torch.get_num_threads()
    torch.set_num_threads(APP_THREADS)
    try:
        for arguments, gallery, results in answers:
            first = int(arguments["seeds"].split("-")[0])
            assert [r["seed"] for r in results] == [str(first), str(first + 1)]
            for cell, record in zip(gallery, results, strict=True):
                recipe = Recipe.from_dict(record["recipe"])
                assert recipe.prompt == arguments["prompt"]
                assert recipe.deterministic == arguments["deterministic"]
                serial = generate(reference_model, recipe)
                with Image.open(cell["image"]) as image:
                    assert np.array_equal(np.asarray(image.convert("RGB")), np.asarray(serial.image))
                assert record["fingerprint"] == serial.fingerprint
    finally:
        torch.set_num_threads(before)
