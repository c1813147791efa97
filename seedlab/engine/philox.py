"""CUDA's `torch.randn` noise computed on any machine: Philox4x32-10 counters and curand's Box-Muller.

On a CUDA device, torch draws normal floats with curand's Philox4x32-10 generator: the key is the
64-bit seed, each element i of a small tensor has its own counter [offset, 0, i, 0] (curand's
subsequence i, skipped ahead by the generator's offset, which rises by one per draw of a small
tensor), and the element is the sine branch of the Box-Muller pair made from the first two 32-bit
words of that counter's block (curand_normal4's x). This is AUTOMATIC1111's "NV" source.

The Box-Muller step uses curand's constants (2**-32 and 2**-32 * float32(2 pi)) but, as A1111's
"NV" source does, computes in float64 and rounds once to float32: the same steps as A1111's, so
images made with its NV source start from the same noise. The GPU itself computes in float32 with
a fast sine (__sincosf), so real CUDA noise differs from this in the last bits of its values (a few
float32 steps; published values agree to 4 to 6 decimals, see tests/test_philox.py). Rounding once
also keeps the result off the CPU's kernels: a libm that is an ulp off in float64 moves a float32
value only when it lies that close to a rounding boundary.

The layout holds while every element gets its own GPU thread: up to 256 x SMs x (max threads per SM
/ 256) elements (CUDA_CARDS). A larger tensor is spread over the card's threads, so real CUDA noise
then depends on the card; this always computes the one-thread-per-element layout, as A1111 does.
"""

from __future__ import annotations

import numpy as np

PHILOX_MULTIPLIERS = (0xD2511F53, 0xCD9E8D57)
PHILOX_KEY_BUMPS = (0x9E3779B9, 0xBB67AE85)
PHILOX_ROUNDS = 10
_CHUNK = 2**20
# Elements a card gives one thread each (256 x SMs x max threads per SM / 256): past this, its noise is its own.
CUDA_CARDS = {"T4": 40_960, "L4": 89_088, "A10G": 122_880, "H100 PCIe": 233_472}
_LOW = np.uint64(0xFFFFFFFF)
_TWO_POW_MINUS_32 = 2.0**-32
_STEP_2PI = _TWO_POW_MINUS_32 * float(np.float32(2 * np.pi))  # curand's 2**-32 * 6.2831855f


def philox4x32(counter: tuple[np.ndarray, ...], key: tuple[int, int]) -> tuple[np.ndarray, ...]:
    """Philox4x32 with 10 rounds: four uint32 words (as uint64 arrays) of each counter's block."""
    c0, c1, c2, c3 = (np.asarray(word, dtype=np.uint64) for word in counter)
    k0, k1 = np.uint64(key[0]), np.uint64(key[1])
    m0, m1 = np.uint64(PHILOX_MULTIPLIERS[0]), np.uint64(PHILOX_MULTIPLIERS[1])
    for round_index in range(PHILOX_ROUNDS):
        if round_index:  # the key is bumped between rounds: 9 bumps for 10 rounds
            k0 = (k0 + np.uint64(PHILOX_KEY_BUMPS[0])) & _LOW
            k1 = (k1 + np.uint64(PHILOX_KEY_BUMPS[1])) & _LOW
        product0, product1 = c0 * m0, c2 * m1  # 32 x 32 -> 64 bits: exact in uint64
        high0, high1 = product0 >> np.uint64(32), product1 >> np.uint64(32)
        c0, c1, c2, c3 = high1 ^ c1 ^ k0, product1 & _LOW, high0 ^ c3 ^ k1, product0 & _LOW
    return c0, c1, c2, c3


def cuda_normal(seed: int, count: int, offset: int = 0) -> np.ndarray:
    """`count` float32 normals as torch.randn(count, device="cuda") gives them after manual_seed(seed).

    `offset` is the counter's first 64 bits: 0 for the first draw after seeding, one more per later
    draw of a tensor small enough for one thread per element. Callers check the arguments' ranges.
    """
    out = np.empty(count, dtype=np.float32)
    key = (seed & 0xFFFFFFFF, seed >> 32)
    for start in range(0, count, _CHUNK):  # in chunks: a few uint64 arrays per element would be gigabytes
        index = np.arange(start, min(start + _CHUNK, count), dtype=np.uint64)
        low, high = (np.full(index.shape, word, dtype=np.uint64) for word in (offset & 0xFFFFFFFF, offset >> 32))
        x, y, _, _ = philox4x32((low, high, index, np.zeros_like(index)), key)
        out[start:start + len(index)] = _box_muller_sine(x, y)
    return out


def _box_muller_sine(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """sqrt(-2 ln u) sin(v) for u in (0, 1) and v in (0, 2 pi) made from x and y, in float64, rounded once."""
    u = x.astype(np.float64) * _TWO_POW_MINUS_32 + _TWO_POW_MINUS_32 / 2
    v = y.astype(np.float64) * _STEP_2PI + _STEP_2PI / 2
    return (np.sqrt(-2.0 * np.log(u)) * np.sin(v)).astype(np.float32)


def cards_matching(count: int) -> list[str]:
    """The cards of CUDA_CARDS whose noise for `count` elements has the one-thread-per-element layout."""
    return [card for card, limit in CUDA_CARDS.items() if count <= limit]
