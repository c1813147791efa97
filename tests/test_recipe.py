import pytest

from seedlab import MAX_SEED, Recipe, join_prompt


def test_defaults_are_valid_and_immutable():
    recipe = Recipe(prompt="a red circle")
    assert recipe.seed == 0 and recipe.rng == "cpu" and recipe.model == "embedded"
    with pytest.raises(AttributeError):
        recipe.seed = 3


@pytest.mark.parametrize(
    ("changes", "field", "allowed"),
    [
        ({"seed": -1}, "seed", "0 to 18446744073709551615"),
        ({"seed": MAX_SEED + 1}, "seed", "0 to 18446744073709551615"),
        ({"seed": 1.5}, "seed", "whole number"),
        ({"seed": True}, "seed", "whole number"),
        ({"seed": "7"}, "seed", "whole number"),
        ({"num_inference_steps": 0}, "num_inference_steps", "1 to 200"),
        ({"width": 65}, "width", "multiple of 8"),
        ({"height": 8}, "height", "32 to 4096"),
        ({"guidance_scale": -1}, "guidance_scale", "0 to 50"),
        ({"guidance_scale": float("nan")}, "guidance_scale", "number"),
        ({"guidance_scale": "7"}, "guidance_scale", "number"),
        ({"rng": "gpu"}, "rng", "cpu, device, numpy-pcg64, cuda-philox, numpy-mt19937, std-libstdc++, std-libc++"),
        ({"dtype": "float64"}, "dtype", "float32"),
        ({"deterministic": "yes"}, "deterministic", "true or false"),
        ({"prompt": "x" * 2001}, "prompt", "2000 characters"),
        ({"prompt": 5}, "prompt", "text"),
        ({"model": ""}, "model", "non-empty"),
    ],
)
def test_bad_values_name_the_field_and_the_allowed_range(changes, field, allowed):
    with pytest.raises(ValueError) as error:
        Recipe(**{"prompt": "ok", **changes})
    assert str(error.value).startswith(field) and allowed in str(error.value)


def test_replace_validates_again():
    with pytest.raises(ValueError, match="seed"):
        Recipe(prompt="x").replace(seed=-5)


def test_dict_round_trip_and_untrusted_dicts():
    recipe = Recipe(prompt="a red circle", seed=MAX_SEED, guidance_scale=3, deterministic=True, dtype="bfloat16")
    assert Recipe.from_dict(recipe.to_dict()) == recipe
    assert isinstance(Recipe.from_dict(recipe.to_dict()).guidance_scale, float)
    with pytest.raises(ValueError, match="unknown recipe field.*colour"):
        Recipe.from_dict({"prompt": "x", "colour": "red"})
    with pytest.raises(ValueError, match="prompt is missing"):
        Recipe.from_dict({"seed": 1})
    with pytest.raises(ValueError, match="JSON object"):
        Recipe.from_dict(["prompt"])


@pytest.mark.parametrize(
    ("variation", "expected"),
    [
        (", highly realistic", "a cat, highly realistic"),
        ("artsy", "a cat, artsy"),
        (" at night", "a cat at night"),
        ("   ", "a cat"),
        (", colorful  ", "a cat, colorful"),
    ],
)
def test_join_prompt(variation, expected):
    assert join_prompt("a cat", variation) == expected


def test_new_images_are_made_with_embedded_v2_where_its_weights_are_here_else_the_first(monkeypatch, tmp_path):
    from seedlab.engine import recipe as recipes

    present, absent = tmp_path / "present", tmp_path / "absent"
    present.mkdir()
    (present / "model_index.json").write_text("{}")
    monkeypatch.setitem(recipes.EMBEDDED_FOLDERS, "embedded", present)
    monkeypatch.setitem(recipes.EMBEDDED_FOLDERS, "embedded-v2", present)
    assert recipes.new_image_model() == "embedded-v2" and recipes.embedded_here() == ["embedded-v2", "embedded"]
    monkeypatch.setitem(recipes.EMBEDDED_FOLDERS, "embedded-v2", absent)
    assert recipes.new_image_model() == "embedded" and recipes.embedded_here() == ["embedded"]
    assert recipes.Recipe(prompt="a star").model == "embedded"  # a link naming no model: the first
