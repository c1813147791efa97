"""The compute budget: a request's price from measured speed, and each visitor's share of ten minutes."""

import pytest

from seedlab import Recipe
from seedlab.serving.budget import IMAGE_CALLS, MAX_VISITORS, WINDOW_SECONDS, Ledger, Speed, measure, noise_seconds
from seedlab.serving.limits import Limits
from tests.helpers import Clock


def test_the_speed_fit_passes_through_both_measurements():
    speed = measure(lambda w, h: 0.01 if w == 64 else 0.07, (64, 64))  # attention makes 4x pixels cost 7x
    for size, seconds in ((64, 0.01), (128, 0.07)):
        assert speed.step_seconds(size * size) == pytest.approx(seconds)
    assert speed.step_seconds(1024 * 1024) == pytest.approx(0.07 * 64**2)  # beyond 128x128: the square of the pixels


def test_beyond_the_sizes_measured_the_estimate_grows_with_the_square():
    """Measured on the embedded model here: a 1024x1024 step took 130 s; the estimate must not say seconds."""
    linear = Speed.fit((4096, 0.01), (16384, 0.04))  # no quadratic term visible at 64 and 128 px
    assert linear.b == 0 and linear.step_seconds(1024 * 1024) == pytest.approx(0.04 * 64**2)  # 164 s, not 2.6 s


def test_a_speed_never_goes_negative_or_cheaper_than_measured():
    speed = Speed.fit((100, 1.0), (400, 1.0))  # bigger was no slower: no negative quadratic term
    assert speed.b == 0 and speed.a > 0


def test_one_request_over_the_limit_is_refused_saying_what_to_reduce():
    ledger = Ledger(Limits(max_request_seconds=60))
    with pytest.raises(ValueError, match=r"about 2 min here; one request may take at most 60 s on this server: "
                                         r"ask for fewer images"):
        ledger.charge("visitor", 120)
    ledger.charge("visitor", 59)


def test_each_visitor_has_a_share_of_ten_minutes_and_gets_it_back():
    clock = Clock()
    ledger = Ledger(Limits(max_request_seconds=100, visitor_seconds=150), clock)
    ledger.charge("a", 100)
    with pytest.raises(ValueError, match=r"used about 2 min .* may use 2 min: wait a few minutes"):
        ledger.charge("a", 60)
    ledger.charge("b", 100)  # another visitor is not affected
    clock.now += WINDOW_SECONDS + 1
    ledger.charge("a", 100)  # the window moved on


def test_the_ledger_remembers_a_bounded_number_of_visitors():
    ledger = Ledger(Limits(max_request_seconds=10, visitor_seconds=10))
    for index in range(MAX_VISITORS + 10):
        ledger.charge(f"v{index}", 10)
    assert len(ledger.window) == MAX_VISITORS
    ledger.charge("v0", 10)  # forgotten first: the oldest visitor starts again


def test_a_request_is_priced_by_its_model_calls_its_images_and_its_noise():
    # Issue 34: Heun and KDPM2 call the model twice a step; an image costs its encoding and decoding besides its
    # steps; the noise of a 4096x4096 seed resize replayed as A1111's GPU noise costs seconds (priced at nothing).
    speed = Speed.fit((4096, 0.01), (16384, 0.04))
    euler = Recipe(prompt="x", num_inference_steps=10, width=64, height=64, scheduler="EulerDiscreteScheduler")
    step = speed.step_seconds(64 * 64)
    assert speed.seconds(euler) == pytest.approx((10 + IMAGE_CALLS) * step + noise_seconds(euler))
    heun = euler.replace(scheduler="HeunDiscreteScheduler")
    assert speed.seconds(heun) - speed.seconds(euler) == pytest.approx(10 * step)
    one_step = euler.replace(num_inference_steps=1)
    assert speed.seconds(one_step) >= 3 * step  # 34 one-step grids took 3x what their steps were priced at
    resized = one_step.replace(seed_resize_from=(4096, 4096), rng="cuda-philox", variation_seed=1,
                               variation_strength=0.5)
    assert speed.seconds(resized) > 1.0 > 100 * noise_seconds(one_step)  # 2 x 4M values of Philox: seconds
    assert noise_seconds(resized.replace(rng="cpu")) < noise_seconds(resized) / 10


def test_a_linked_image_past_the_visitors_share_says_so_in_the_verdict_instead_of_regenerating_forever():
    """The link's regeneration was refused with a toast while the verdict kept "Regenerating the linked image…"."""
    from seedlab.serving.reproduction import Original
    from webui.reproduction import Reproduction

    class Spent:  # an admission whose visitor has used up the share
        def charge_reproduction(self, original, visitor):
            raise ValueError("budget: this visitor's share of the server (300 s in 10 minutes) is used up; wait")

    class NoRecord:
        def find(self, recipe):
            return None

    reproduction = Reproduction(Spent(), None, NoRecord(), None)
    original = Original(Recipe(prompt="a cat", seed=3), "ab" * 32, None)
    updates = list(reproduction.reproduce_linked(original, None, None))
    assert updates == [{"verdict_text": "Not regenerated: budget: this visitor's share of the server (300 s in 10 "
                                        "minutes) is used up; wait"}]


def test_sdcpp_ancestral_step_noise_is_priced_with_its_source():
    """sd.cpp's euler_a draws a latent's worth of noise from the recipe's source at every step (issue 46): priced
    as drawn, beside the starting noise every recipe pays."""
    from seedlab import Recipe
    from seedlab.serving.budget import noise_seconds

    plain = Recipe(prompt="a", scheduler="euler (sd.cpp)", rng="std-msvc", width=512, height=512,
                   num_inference_steps=20)
    ancestral = plain.replace(scheduler="euler_a (sd.cpp)")
    # the starting latent, its call replayed to continue the stream, and a latent for each of 20 steps
    assert noise_seconds(ancestral) == pytest.approx(22 * noise_seconds(plain))
