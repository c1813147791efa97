import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from seedlab import MAX_SEED, format_seeds, parse_seeds, random_seeds


@pytest.mark.parametrize(
    ("spec", "seeds"),
    [
        ("42", [42]),
        ("0-7", list(range(8))),
        ("3, 17, 99", [3, 17, 99]),
        ("3 17 99", [3, 17, 99]),
        ("1, 5 - 7, 2", [1, 5, 6, 7, 2]),
        (f"{MAX_SEED}", [MAX_SEED]),
        ("0,", [0]),
    ],
)
def test_parse(spec, seeds):
    assert parse_seeds(spec) == seeds


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("-1", "not a seed"),
        (str(MAX_SEED + 1), "out of range"),
        ("abc", "not a seed"),
        ("1.5", "not a seed"),
        ("٣", "not a seed"),  # a non-ASCII digit
        ("9" * 5000, "not a seed"),
        ("7-3", "backwards"),
        ("0-64", "at most 64"),
        ("", "such as"),
        (" , ", "such as"),
    ],
)
def test_parse_rejects_with_a_clear_message(spec, message):
    with pytest.raises(ValueError, match=message) as error:
        parse_seeds(spec)
    assert str(error.value).startswith("seeds")


def test_max_count_is_enforced():
    assert len(parse_seeds("0-3", max_count=4)) == 4
    with pytest.raises(ValueError, match="at most 4"):
        parse_seeds("0-4", max_count=4)


@given(st.lists(st.integers(0, MAX_SEED), min_size=1, max_size=64))
def test_format_is_the_inverse_of_parse(seeds):
    assert parse_seeds(format_seeds(seeds)) == seeds


def test_random_seeds_are_distinct_in_range_and_reproducible_with_an_rng():
    seeds = random_seeds(16)
    assert len(set(seeds)) == 16 and all(0 <= s <= MAX_SEED for s in seeds)
    assert random_seeds(4, random.Random(1)) == random_seeds(4, random.Random(1))
    with pytest.raises(ValueError, match="Random seeds to draw"):
        random_seeds(0)


def test_minus_one_draws_a_seed_where_random_seeds_are_allowed():
    import random

    drawn = parse_seeds("-1, 5, -1", random_allowed=True, rng=random.Random(7))
    assert drawn[1] == 5 and all(0 <= seed <= MAX_SEED for seed in drawn)
    assert drawn == parse_seeds("-1, 5, -1", random_allowed=True, rng=random.Random(7))  # from the rng given
    with pytest.raises(ValueError, match="not a seed"):
        parse_seeds("-1")  # where a seed must be stated (a link, the command line's seeds)
