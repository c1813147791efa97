import pytest

from seedlab import Recipe
from seedlab.serving.limits import Limits


def test_defaults_suit_a_public_space_and_allow_the_default_recipe():
    limits = Limits()
    limits.check_recipe(Recipe(prompt="a red circle"))
    limits.check_count(limits.max_images, "seeds")
    assert limits.concurrency == 1


@pytest.mark.parametrize(
    ("field", "allowed", "refused", "words"),
    [
        ("num_inference_steps", 50, 51, "must be at most 50 on this server, got 51"),
        ("width", 1024, 1032, "must be at most 1024 pixels a side on this server, got 1032"),
        ("height", 1024, 2048, "must be at most 1024 pixels a side on this server, got 2048"),
        ("prompt", "x" * 500, "x" * 501, "must be at most 500 characters on this server, got 501"),
        ("negative_prompt", "x" * 500, "x" * 501, "must be at most 500 characters on this server, got 501"),
    ],
)
def test_each_recipe_limit_allows_its_boundary_and_names_field_and_limit(field, allowed, refused, words):
    limits = Limits()
    limits.check_recipe(Recipe(prompt="ok").replace(**{field: allowed}))
    with pytest.raises(ValueError) as error:
        limits.check_recipe(Recipe(prompt="ok").replace(**{field: refused}))
    assert str(error.value).startswith(field) and words in str(error.value)
    assert "SEEDLAB_" not in str(error.value)  # the host's setting is in the docs and the server's log


@pytest.mark.parametrize(("what", "unit", "limit"), [("seeds", "images per grid", 16),
                                                    ("variations", "variations per request", 8)])
def test_count_limits(what, unit, limit):
    Limits().check_count(limit, what)
    with pytest.raises(ValueError, match=f"^{what}: this server makes at most {limit} {unit}, got {limit + 1}$"):
        Limits().check_count(limit + 1, what)


def test_the_host_reads_every_limit_with_its_setting():
    described = Limits(max_steps=8).describe()
    assert "SEEDLAB_MAX_STEPS=8" in described and "SEEDLAB_VISITOR_UPLOADS=20" in described


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
    assert "width must be a whole number from 32 to 4096 and a multiple of 8, got 5000 (this server: at most " \
           "1024)" in message
    assert "got 500 (this server: at most 50)" in message
    assert "guidance_scale" in message and message.count("this server") == 2  # no server limit: as it was
    assert "this server" not in str(Limits(max_size=4096, max_steps=200).narrowed(error.value)), "no narrower limit"
