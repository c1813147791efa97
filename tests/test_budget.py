"""The compute budget: a request's price from measured speed, and each visitor's share of ten minutes."""

import pytest

from seedlab import Recipe
from seedlab.serving.budget import MAX_VISITORS, WINDOW_SECONDS, Ledger, Speed, measure
from seedlab.serving.limits import Limits
from tests.helpers import Clock


def test_the_speed_fit_passes_through_both_measurements():
    speed = measure(lambda w, h: 0.01 if w == 64 else 0.07, (64, 64))  # attention makes 4x pixels cost 7x
    for size, seconds in ((64, 0.01), (128, 0.07)):
        assert speed.seconds(Recipe(prompt="x", num_inference_steps=1, width=size, height=size)) == pytest.approx(seconds)
    big = Recipe(prompt="x", num_inference_steps=50, width=1024, height=1024)
    assert speed.seconds(big) == pytest.approx(50 * 0.07 * 64**2)  # beyond 128x128: the square of the pixels


def test_beyond_the_sizes_measured_the_estimate_grows_with_the_square():
    """Measured on the embedded model here: a 1024x1024 step took 130 s; the estimate must not say seconds."""
    linear = Speed.fit((4096, 0.01), (16384, 0.04))  # no quadratic term visible at 64 and 128 px
    one_step = Recipe(prompt="x", num_inference_steps=1, width=1024, height=1024)
    assert linear.b == 0 and linear.seconds(one_step) == pytest.approx(0.04 * 64**2)  # 164 s, not 2.6 s


def test_a_speed_never_goes_negative_or_cheaper_than_measured():
    speed = Speed.fit((100, 1.0), (400, 1.0))  # bigger was no slower: no negative quadratic term
    assert speed.b == 0 and speed.a > 0


def test_one_request_over_the_limit_is_refused_saying_what_to_reduce():
    ledger = Ledger(Limits(max_request_seconds=60))
    with pytest.raises(ValueError, match=r"about 2 min here; one request may take at most 60 s "
                                         r"\(SEEDLAB_MAX_REQUEST_SECONDS\): ask for fewer images"):
        ledger.charge("visitor", 120)
    ledger.charge("visitor", 59)


def test_each_visitor_has_a_share_of_ten_minutes_and_gets_it_back():
    clock = Clock()
    ledger = Ledger(Limits(max_request_seconds=100, visitor_seconds=150), clock)
    ledger.charge("a", 100)
    with pytest.raises(ValueError, match=r"used about 2 min .* may use 2 min \(SEEDLAB_VISITOR_SECONDS\)"):
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
