"""Previews through the app's public API (the real `python app.py`): /preview's cells are previews, and /finish
turns their links into the full images, equal to /grid's."""

import numpy as np
import pytest
from gradio_client.exceptions import AppError

from tests.helpers import pixels


def test_preview_then_finish_equals_the_grid(client):
    grid, grid_results = client.predict(prompt="a red circle", seeds="3, 9", num_inference_steps=8, api_name="/grid")
    gallery, results = client.predict(prompt="a red circle", seeds="3, 9", num_inference_steps=8,
                                      api_name="/preview")
    assert [cell["caption"] for cell in gallery] == ["seed 3 · preview", "seed 9 · preview"]
    assert all(record["recipe"]["preview_steps"] == 5 and "preview=5" in record["link"] for record in results)
    assert not {r["fingerprint"] for r in results} & {r["fingerprint"] for r in grid_results}
    links = "\n".join(record["link"] for record in results)
    done, done_results = client.predict(links=links, api_name="/finish")
    assert [cell["caption"] for cell in done] == ["seed 3", "seed 9"]
    assert [r["fingerprint"] for r in done_results] == [r["fingerprint"] for r in grid_results]
    assert [r["link"] for r in done_results] == [r["link"] for r in grid_results]
    for finished, full in zip(done, grid):
        assert np.array_equal(pixels(finished["image"]), pixels(full["image"]))


def test_bad_previews_and_links_are_refused_by_name(client):
    with pytest.raises(AppError, match="Preview steps"):
        client.predict(prompt="a", seeds="1", num_inference_steps=1, preview_steps=3, api_name="/preview")
    with pytest.raises(AppError, match="links: give at least one preview link"):
        client.predict(links="  \n", api_name="/finish")
    with pytest.raises(AppError, match="link"):
        client.predict(links="http://127.0.0.1/?v=1&seed=zz", api_name="/finish")


def test_finish_all_shows_only_while_the_grid_holds_a_preview():
    from webui.previews import finish_all_shown

    preview, full = {"recipe": {"preview_steps": 5}}, {"recipe": {"preview_steps": 0}}
    assert finish_all_shown([full, preview])["finish_all"].visible is True
    assert finish_all_shown([full, full])["finish_all"].visible is False
    assert finish_all_shown(None)["finish_all"].visible is False
    assert finish_all_shown({"0": preview})["finish_all"].visible is False  # not the page's records: nothing shown
