"""Issue 33: travel and plot labels read plainly and whole (captions, the animation's name, the sheet's labels, the
Selected image title of a plot cell)."""

import json
import re
from types import SimpleNamespace

from PIL import Image, ImageDraw

from seedlab import Recipe
from seedlab.explore.axes import parse_axis
from seedlab.files.sheets import save_plot_sheet
from tests.helpers import PROMPT


def updates(app, handler, **values):
    return list(handler({"prompt": PROMPT, "num_inference_steps": 1, **values}, None, lambda *a, **k: None))


def merged(steps: list[dict]) -> dict:
    final: dict = {}
    for step in steps:
        final.update(step)
    return final


def test_travel_captions_read_plainly_and_the_animation_is_named_after_the_travel(seedlab_app):
    """Frame 0 was "frame 0 · seed 2 → None at 0" and every download `travel.webp`."""
    final = merged(updates(seedlab_app, seedlab_app.travel, seeds="2, 0", frames=5, curve="linear"))
    assert [caption for _, caption in final["travel"]] == [
        "seed 2", "seed 2 → 0, 25%", "seed 2 → 0, 50%", "seed 2 → 0, 75%", "seed 0"]
    path = final["travel_animation"].value["path"]
    assert path.endswith("/travel-seed-2-to-0-5-frames.webp")
    assert Image.open(path).n_frames == 5


def test_an_animations_name_says_its_seeds_and_frames_in_safe_characters():
    from seedlab.explore.travel import animation_name

    def frames(*pairs):
        return [Recipe(prompt="x", seed=seed, variation_seed=other, variation_strength=strength)
                for seed, other, strength in pairs]

    assert animation_name(frames((2, 0, 0), (2, 0, 0.5), (0, 0, 0))) == "travel-seed-2-to-0-3-frames"
    chain = frames((3, 0, 0), (3, 7, 0.5), (7, 0, 0), (7, 12, 0.5), (12, 0, 0))
    assert animation_name(chain) == "travel-seed-3-to-7-to-12-5-frames"
    many = frames(*[(seed, 0, 0) for seed in range(6)], (5, 2**64 - 1, 0.5), (2**64 - 1, 0, 0))
    name = animation_name(many)
    assert name == "travel-7-seeds-0-to-18446744073709551615-8-frames"
    assert re.fullmatch(r"[a-z0-9-]+", name)


def test_a_plot_cells_title_names_its_axis_values_and_the_sheet_labels_them_as_typed(seedlab_app):
    """A plot cell's Selected image title names its axis values (not only "Seed 6 · prompt …"), and the sheet labels
    a value as the user typed it ("DDIM", not "DDIMScheduler")."""
    steps = updates(seedlab_app, seedlab_app.plot, x="seed: 5, 6", y="Sampler: Euler a, DDIM", z=None)
    streamed = [step["plot_results"] for step in steps if step.get("plot_results")]
    assert streamed, steps
    title = seedlab_app.select_plot(streamed[0], SimpleNamespace(index=0))["cell_title"]  # while the plot runs
    assert title.startswith("Seed 5 · Scheduler Euler a · prompt 'a red circle'"), title
    final = merged(steps)
    title = seedlab_app.select_plot(final["plot_results"], SimpleNamespace(index=3))["cell_title"]
    assert title.startswith("Seed 6 · Scheduler DDIM · prompt 'a red circle'"), title
    sheet = Image.open(final["plot_sheet"].value["path"])
    assert json.loads(sheet.text["seedlab-plot"])["rows"] == ["Scheduler: Euler a", "Scheduler: DDIM"]


def test_a_sampler_axis_is_labelled_as_typed_and_runs_as_before():
    axis = parse_axis("Sampler: Euler a, DDIM, UniPC, DDIMScheduler")
    assert axis.texts == ("Euler a", "DDIM", "UniPC", "DDIMScheduler")
    assert axis.values == ("Euler a", "DDIMScheduler", "UniPCMultistepScheduler", "DDIMScheduler")


def test_the_plot_sheets_labels_are_drawn_whole(tmp_path, monkeypatch):
    """Column and row labels longer than a thumbnail were cut with "..."; they wrap onto more lines instead."""
    drawn: list[str] = []
    text = ImageDraw.ImageDraw.text
    monkeypatch.setattr(ImageDraw.ImageDraw, "text", lambda self, xy, line, *a, **k: (drawn.append(line),
                                                                                        text(self, xy, line, *a, **k)))
    image = tmp_path / "cell.png"
    Image.new("RGB", (64, 64), (200, 30, 30)).save(image)
    columns = ["Scheduler: DPM++ 2M Karras", "Scheduler: EulerAncestralDiscreteScheduler"]
    rows = ["Prompt S/R: a blue square at night", "Seed: 18446744073709551615"]
    cells = [{"fingerprint": "ab" * 32} for _ in range(4)]
    save_plot_sheet(cells, [image] * 4, columns, rows, "a red circle", tmp_path / "sheet.png")
    assert not [line for line in drawn if line.endswith("...")], drawn
    joined = "".join(drawn).replace(" ", "")  # a label's lines are drawn one after the other
    for label in columns + rows:
        assert label.replace(" ", "") in joined, (label, drawn)
