import pytest

from seedlab import Recipe
from seedlab.serving.limits import Limits


def test_defaults_suit_a_public_space_and_allow_the_default_recipe():
    limits = Limits()
    limits.check_recipe(Recipe(prompt="a red circle"))
    limits.check_count(limits.max_images, "seeds")
    assert limits.concurrency == 1


@pytest.mark.parametrize(
    ("field", "allowed", "refused", "setting"),
    [
        ("num_inference_steps", 50, 51, "SEEDLAB_MAX_STEPS"),
        ("width", 1024, 1032, "SEEDLAB_MAX_SIZE"),
        ("height", 1024, 2048, "SEEDLAB_MAX_SIZE"),
        ("prompt", "x" * 500, "x" * 501, "SEEDLAB_MAX_PROMPT_CHARS"),
        ("negative_prompt", "x" * 500, "x" * 501, "SEEDLAB_MAX_PROMPT_CHARS"),
    ],
)
def test_each_recipe_limit_allows_its_boundary_and_names_field_and_setting(field, allowed, refused, setting):
    limits = Limits()
    limits.check_recipe(Recipe(prompt="ok").replace(**{field: allowed}))
    with pytest.raises(ValueError) as error:
        limits.check_recipe(Recipe(prompt="ok").replace(**{field: refused}))
    assert str(error.value).startswith(field) and setting in str(error.value)


@pytest.mark.parametrize(("what", "setting", "limit"), [("seeds", "SEEDLAB_MAX_IMAGES", 16),
                                                       ("variations", "SEEDLAB_MAX_VARIATIONS", 8)])
def test_count_limits(what, setting, limit):
    Limits().check_count(limit, what)
    with pytest.raises(ValueError, match=f"^{what}: .*at most {limit} .*{setting}.*got {limit + 1}"):
        Limits().check_count(limit + 1, what)


def test_from_env_reads_each_setting_and_rejects_bad_values():
    limits = Limits.from_env({"SEEDLAB_MAX_STEPS": "8", "SEEDLAB_MAX_IMAGES": " 4 ", "SEEDLAB_QUEUE_SIZE": ""})
    assert (limits.max_steps, limits.max_images, limits.queue_size) == (8, 4, Limits().queue_size)
    with pytest.raises(ValueError, match="SEEDLAB_MAX_STEPS must be a positive integer, got 'many'"):
        Limits.from_env({"SEEDLAB_MAX_STEPS": "many"})
    with pytest.raises(ValueError, match="SEEDLAB_CONCURRENCY must be a positive integer, got 0"):
        Limits.from_env({"SEEDLAB_CONCURRENCY": "0"})


@pytest.mark.parametrize(("setting", "ceiling"), [("SEEDLAB_MAX_IMAGES", 64), ("SEEDLAB_MAX_STEPS", 200),
                                                  ("SEEDLAB_MAX_SIZE", 4096), ("SEEDLAB_MAX_PROMPT_CHARS", 2000)])
def test_a_setting_above_what_a_recipe_accepts_is_refused_not_silently_capped(setting, ceiling):
    Limits.from_env({setting: str(ceiling)})
    with pytest.raises(ValueError, match=f"{setting} must be at most {ceiling}"):
        Limits.from_env({setting: str(ceiling + 1)})


def test_a_range_refusal_names_this_servers_narrower_limit_beside_the_recipes():
    """Issue 47: the page's width error names this server's limit (1024) beside the recipe's range (32 to 4096)."""
    from seedlab.engine.recipe import Recipe, RecipeError

    with pytest.raises(RecipeError) as error:
        Recipe(prompt="a", width=5000, num_inference_steps=500, guidance_scale=99)
    message = str(Limits().narrowed(error.value))
    assert "width must be a whole number from 32 to 4096 and a multiple of 8, got 5000 (this server: at most 1024, " \
           "SEEDLAB_MAX_SIZE)" in message
    assert "got 500 (this server: at most 50, SEEDLAB_MAX_STEPS)" in message
    assert "guidance_scale" in message and message.count("this server") == 2  # no server limit: as it was
    assert "this server" not in str(Limits(max_size=4096, max_steps=200).narrowed(error.value)), "no narrower limit"
