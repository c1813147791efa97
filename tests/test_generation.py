"""Properties of generation: grid cell == solo, SeedLab == plain diffusers, no shared RNG state."""

import threading

import numpy as np
import pytest
import torch

import seedlab
from seedlab import Recipe
from tests.helpers import pixels

# Deterministic and ancestral (noise drawn at every step) schedulers, multistep and single-step.
SCHEDULERS = [
    "EulerDiscreteScheduler",
    "EulerAncestralDiscreteScheduler",
    "DPMSolverMultistepScheduler",
    "DDIMScheduler",
    "KDPM2AncestralDiscreteScheduler",
]


def plain_diffusers(model, recipe):
    """What a user gets calling the same pipeline directly, the way diffusers' docs show."""
    pipe = model.pipeline
    pipe.scheduler = model.schedulers[recipe.scheduler].from_config(model.info.scheduler_config)
    return pipe(
        recipe.prompt,
        negative_prompt=recipe.negative_prompt or None,
        num_inference_steps=recipe.num_inference_steps,
        guidance_scale=recipe.guidance_scale,
        width=recipe.width,
        height=recipe.height,
        generator=torch.Generator("cpu").manual_seed(recipe.seed),
    ).images[0]


@pytest.mark.parametrize("scheduler", SCHEDULERS)
@pytest.mark.parametrize("guidance", [0.0, 7.5])
def test_grid_cell_equals_solo_regeneration(model, scheduler, guidance):
    recipe = Recipe(prompt="a red circle", scheduler=scheduler, num_inference_steps=6, guidance_scale=guidance)
    seeds = [7, 0, 4294967295, 2**63 + 12345]
    grid = seedlab.generate_grid(model, recipe, seeds)
    assert [r.recipe.seed for r in grid] == seeds
    for cell in reversed(grid):  # solo runs in another order: no state carries over between images
        solo = seedlab.generate(model, recipe.replace(seed=cell.recipe.seed))
        assert np.array_equal(pixels(solo), pixels(cell))
        assert solo.fingerprint == cell.fingerprint
    assert len({r.fingerprint for r in grid}) == len(seeds), "different seeds must give different images"


@pytest.mark.parametrize("scheduler", SCHEDULERS)
@pytest.mark.parametrize("guidance", [0.0, 5.0])
def test_seedlab_equals_plain_diffusers(model, scheduler, guidance):
    recipe = Recipe(
        prompt="a blue square",
        negative_prompt="red" if guidance else "",
        seed=42,
        scheduler=scheduler,
        num_inference_steps=5,
        guidance_scale=guidance,
    )
    ours = seedlab.generate(model, recipe)
    theirs = plain_diffusers(model, recipe)
    assert np.array_equal(pixels(ours), pixels(theirs))


SEED_FIELDS = [
    {"variation_seed": 99, "variation_strength": 0.3},
    {"seed_resize_from": (96, 48)},
    {"variation_seed": 2**63 + 5, "variation_strength": 0.7, "seed_resize_from": (32, 80)},
    {"rng": "numpy-pcg64", "scheduler": "DPMSolverMultistepScheduler"},
    {"rng": "numpy-pcg64", "variation_seed": 3, "variation_strength": 0.5, "scheduler": "EulerDiscreteScheduler"},
]


@pytest.mark.parametrize("fields", SEED_FIELDS, ids=lambda f: "-".join(f))
def test_grid_cell_equals_solo_for_every_seed_field(model, fields):
    recipe = Recipe(prompt="a red circle", num_inference_steps=4, **{"scheduler": "EulerAncestralDiscreteScheduler",
                                                                     **fields})
    grid = seedlab.generate_grid(model, recipe, [5, 2**64 - 2])
    for cell in reversed(grid):
        assert seedlab.generate(model, recipe.replace(seed=cell.recipe.seed)).fingerprint == cell.fingerprint
    plain = seedlab.generate(model, Recipe(prompt="a red circle", num_inference_steps=4, seed=5,
                                           scheduler=recipe.scheduler))
    assert grid[0].fingerprint != plain.fingerprint, "the seed field must change the image"


@pytest.mark.parametrize("scheduler", ["EulerAncestralDiscreteScheduler", "DDIMScheduler"])
def test_variation_strength_zero_is_the_plain_seed_bit_for_bit(model, scheduler):
    plain = Recipe(prompt="a red circle", seed=11, num_inference_steps=5, scheduler=scheduler)
    for changes in ({"variation_seed": 12345}, {"seed_resize_from": (64, 64)}):  # off: strength 0, the same size
        assert np.array_equal(pixels(seedlab.generate(model, plain.replace(**changes))),
                              pixels(seedlab.generate(model, plain)))


def test_variation_seed_at_strength_one_is_the_variation_seeds_composition(model):
    """Strength 1 starts from the variation seed's noise; the per-step generator stays the main seed's."""
    recipe = Recipe(prompt="a red circle", seed=1, num_inference_steps=5, scheduler="DDIMScheduler")
    blended = seedlab.generate(model, recipe.replace(variation_seed=2, variation_strength=1.0))
    other = seedlab.generate(model, recipe.replace(seed=2))
    assert np.abs(pixels(blended).astype(int) - pixels(other).astype(int)).max() <= 2  # float32 slerp rounding


def test_torch_cpu_seeds_keep_only_their_low_32_bits_and_numpy_seeds_all_64(model):
    """torch's CPU generator (mt19937) seeds from the low 32 bits: 2**32 + 5 is seed 5, as in plain diffusers
    and ComfyUI. SeedLab keeps that behaviour (it is what those tools' seeds mean) and says so in the README."""
    recipe = Recipe(prompt="a red circle", seed=5, num_inference_steps=3, scheduler="EulerDiscreteScheduler")
    high = recipe.replace(seed=2**32 + 5)
    assert seedlab.generate(model, high).fingerprint == seedlab.generate(model, recipe).fingerprint
    numpy = {"rng": "numpy-pcg64"}
    assert (seedlab.generate(model, high.replace(**numpy)).fingerprint
            != seedlab.generate(model, recipe.replace(**numpy)).fingerprint)


def test_numpy_noise_with_a_scheduler_that_draws_is_refused(model):
    with pytest.raises(ValueError, match="numpy-pcg64 cannot drive EulerAncestralDiscreteScheduler"):
        seedlab.generate(model, Recipe(prompt="x", rng="numpy-pcg64", scheduler="EulerAncestralDiscreteScheduler"))


def test_variations_keep_the_anchor_seed_and_start_with_the_base_prompt(model):
    anchor = Recipe(prompt="a red circle", seed=99, scheduler="EulerAncestralDiscreteScheduler", num_inference_steps=4)
    results = seedlab.generate_variations(model, anchor, [", highly realistic", "artsy"])
    assert [r.recipe.prompt for r in results] == ["a red circle", "a red circle, highly realistic",
                                                  "a red circle, artsy"]
    assert {r.recipe.seed for r in results} == {99}
    assert np.array_equal(pixels(results[0]), pixels(seedlab.generate(model, anchor)))
    direct = plain_diffusers(model, anchor.replace(prompt="a red circle, artsy"))
    assert np.array_equal(pixels(results[2]), pixels(direct))


def test_global_rng_neither_used_nor_consulted(model):
    recipe = Recipe(prompt="a red circle", seed=5, scheduler="EulerAncestralDiscreteScheduler", num_inference_steps=4)
    torch.manual_seed(1)  # the test itself may touch the global RNG to prove generation ignores it
    state = torch.random.get_rng_state()
    first = seedlab.generate(model, recipe)
    assert torch.equal(torch.random.get_rng_state(), state), "generation consumed torch's global RNG"
    torch.manual_seed(2)
    assert seedlab.generate(model, recipe).fingerprint == first.fingerprint


def test_reusing_one_generator_is_the_pitfall_seedlab_avoids(model):
    recipe = Recipe(prompt="a red circle", seed=3, num_inference_steps=4)
    shared = torch.Generator("cpu").manual_seed(3)
    pipe = model.pipeline
    pipe.scheduler = model.make_scheduler("default")
    first = pipe("a red circle", num_inference_steps=4, width=64, height=64, generator=shared).images[0]
    second = pipe("a red circle", num_inference_steps=4, width=64, height=64, generator=shared).images[0]
    assert not np.array_equal(pixels(first), pixels(second)), "a used generator must have moved on"
    assert seedlab.generate(model, recipe).fingerprint == seedlab.generate(model, recipe).fingerprint
    assert np.array_equal(pixels(seedlab.generate(model, recipe)), pixels(first))


def test_device_rng_on_cpu_is_the_cpu_rng(model):
    recipe = Recipe(prompt="a red circle", seed=11, num_inference_steps=3)
    assert (seedlab.generate(model, recipe.replace(rng="device")).fingerprint
            == seedlab.generate(model, recipe).fingerprint)


def test_full_determinism_is_scoped_and_recorded(model):
    before = seedlab.engine.determinism.current_switches()
    result = seedlab.generate(model, Recipe(prompt="a red circle", num_inference_steps=3, deterministic=True))
    assert seedlab.engine.determinism.current_switches() == before
    assert result.environment.switches == seedlab.engine.determinism.FULLY_DETERMINISTIC
    loose = seedlab.generate(model, Recipe(prompt="a red circle", num_inference_steps=3))
    assert loose.environment.switches == before
    assert loose.fingerprint == result.fingerprint  # on CPU the switches change no kernel here


def test_progress_counts_every_step_of_every_image(model):
    seen = []
    seedlab.generate_grid(model, Recipe(prompt="x", num_inference_steps=3), [1, 2],
                          progress=lambda d, t: seen.append((d, t)))
    assert seen == [(i, 6) for i in range(1, 7)]


def test_cancel_stops_within_a_step(model):
    cancel = threading.Event()
    seen = []

    def progress(done, total):
        seen.append(done)
        if done == 2:
            cancel.set()

    recipe = Recipe(prompt="x", num_inference_steps=10)
    with pytest.raises(seedlab.Cancelled):
        seedlab.generate_grid(model, recipe, [1, 2, 3], progress=progress, cancel=cancel)
    assert seen == [1, 2], "no step may run after the cancel was seen"
    cancel.clear()
    assert seedlab.generate(model, recipe.replace(seed=1)).recipe.seed == 1  # the model still works


def test_recipe_in_result_is_resolved(model):
    result = seedlab.generate(model, Recipe(prompt="x", num_inference_steps=2))
    assert result.recipe.scheduler == "EulerDiscreteScheduler"
    assert result.recipe.model == "tiny"
    assert result.image.size == (64, 64)


def test_unknown_scheduler_and_wrong_dtype_are_refused(model):
    with pytest.raises(ValueError, match="scheduler must be one of .*DDIMScheduler"):
        seedlab.generate(model, Recipe(prompt="x", scheduler="NoSuchScheduler"))
    with pytest.raises(ValueError, match="dtype"):
        seedlab.generate(model, Recipe(prompt="x", dtype="bfloat16"))


def test_fingerprint_is_sha256_of_rgb_pixels(model):
    import hashlib

    result = seedlab.generate(model, Recipe(prompt="x", num_inference_steps=2))
    array = np.asarray(result.image)
    assert result.fingerprint == hashlib.sha256(array.tobytes()).hexdigest()
    changed = array.copy()
    changed[0, 0, 0] ^= 1
    assert seedlab.fingerprint(changed) != result.fingerprint


def test_threads_sharing_one_model_get_their_own_images(model):
    """The pipeline's scheduler and torch's switches are shared state: concurrent calls must not mix."""
    from concurrent.futures import ThreadPoolExecutor

    recipes = [
        Recipe(prompt=f"a red circle {i}", seed=i, scheduler=SCHEDULERS[i % len(SCHEDULERS)],
               num_inference_steps=4 + i % 3, deterministic=bool(i % 2))
        for i in range(8)
    ]
    serial = [seedlab.generate(model, r).fingerprint for r in recipes]
    with ThreadPoolExecutor(4) as pool:
        concurrent = list(pool.map(lambda r: seedlab.generate(model, r).fingerprint, recipes))
    assert concurrent == serial


def test_stream_yields_every_step_and_the_same_images(model):
    recipe = Recipe(prompt="a red circle", num_inference_steps=3)
    recipes = seedlab.grid_recipes(recipe, [4, 5])
    events = list(seedlab.stream(model, recipes))
    steps = [e for e in events if isinstance(e, seedlab.Progress)]
    results = [e for e in events if isinstance(e, seedlab.Result)]
    assert [(s.done, s.total) for s in steps] == [(i, 6) for i in range(1, 7)]
    assert events.index(results[0]) == 3, "the first image arrives right after its last step"
    assert [r.fingerprint for r in results] == [seedlab.generate(model, r).fingerprint for r in recipes]


def test_closing_a_stream_stops_the_worker_within_a_step(model):
    steps_run, unet_calls = [], []
    hook = model.pipeline.unet.register_forward_hook(lambda *args: unet_calls.append(1))
    try:
        recipe = Recipe(prompt="x", num_inference_steps=50)
        events = seedlab.stream(model, seedlab.grid_recipes(recipe, [1, 2, 3]))
        for event in events:
            steps_run.append(event.done)
            if event.done == 2:
                break
        events.close()  # what Gradio does when the tab is closed or the API call is cancelled
    finally:
        hook.remove()
    assert not any(t.name == "seedlab-generation" and t.is_alive() for t in threading.enumerate())
    assert steps_run == [1, 2]
    assert len(unet_calls) <= 4, f"the worker ran {len(unet_calls)} denoising steps of 150 after the close"


def test_stream_raises_worker_errors_in_the_consumer(model):
    with pytest.raises(ValueError, match="scheduler"):
        list(seedlab.stream(model, [Recipe(prompt="x", scheduler="Nope")]))


def test_lanes_make_every_image_exactly_as_a_solo_run_and_in_order(model):
    """Images side by side on shallow pipeline copies: same pixels, same order, every step counted."""
    recipes = [
        Recipe(prompt="a red circle", seed=i, scheduler=SCHEDULERS[i % len(SCHEDULERS)], num_inference_steps=3 + i % 2,
               guidance_scale=(1.0, 5.0)[i % 2], negative_prompt="blue" if i % 3 == 0 else "",
               deterministic=i >= 5, variation_seed=i + 100, variation_strength=0.3 * (i % 2))
        for i in range(7)
    ]
    solo = [seedlab.generate(model, r).fingerprint for r in recipes]
    before = seedlab.engine.determinism.current_switches()
    model.lanes = 3
    try:
        events = list(seedlab.stream(model, recipes))
    finally:
        model.lanes = 1
    results = [e for e in events if isinstance(e, seedlab.Result)]
    assert [r.fingerprint for r in results] == solo
    assert [r.recipe.seed for r in results] == [r.seed for r in recipes]
    done = [e.done for e in events if isinstance(e, seedlab.Progress)]
    assert done == sorted(done) and done[-1] == sum(r.num_inference_steps for r in recipes)
    assert seedlab.engine.determinism.current_switches() == before  # the deterministic chunk's switches were restored


def test_a_grid_encodes_its_prompt_once_with_the_same_pixels(model):
    calls = []
    hook = model.pipeline.text_encoder.register_forward_hook(lambda *args: calls.append(1))
    try:
        recipe = Recipe(prompt="a red circle", num_inference_steps=2, guidance_scale=5.0)
        grid = seedlab.generate_grid(model, recipe, [1, 2, 3, 4])
    finally:
        hook.remove()
    assert len(calls) == 2, "the prompt and the empty negative prompt, once each for four images"
    for result in grid:
        assert np.array_equal(pixels(result), pixels(plain_diffusers(model, result.recipe)))


def test_loading_a_model_again_builds_no_scheduler_to_list_them(model, monkeypatch):
    from seedlab.engine.weights import model_info

    config = dict(model.info.scheduler_config)
    first = model_info.compatible_schedulers(type(model.pipeline.scheduler), config)
    built = []
    for cls in first.values():
        monkeypatch.setattr(cls, "from_config", classmethod(lambda *args, **kwargs: built.append(1)))
    again = model_info.compatible_schedulers(type(model.pipeline.scheduler), config)
    assert again == first and len(first) > 3 and not built
    assert again is not first, "each caller gets its own dict"
    changed = {**config, "beta_end": config["beta_end"] * 2}
    model_info.compatible_schedulers(type(model.pipeline.scheduler), changed)
    assert built, "another config is checked again"
