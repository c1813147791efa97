"""Other tools' noise on any machine: Apple's NumPy-style source and stable-diffusion.cpp's `std_default`.

Each source gives the first normals a tool draws for a seed, as float32, exactly, in numpy:
- "numpy-mt19937": apple/ml-stable-diffusion's NumPyRandomSource (swift/StableDiffusion/pipeline/
  NumPyRandomSource.swift), the default `rngType` of its Swift pipeline and of the Mac apps built on it (Mochi
  Diffusion). It re-creates NumPy's legacy `RandomState(seed).randn`: MT19937 seeded as `init_genrand` with a
  UInt32, 53-bit doubles from two words (`a >> 5`, `b >> 6`), and the polar method in float64 that returns
  `f * x2` and keeps `f * x1` for the next call. The pipeline fills the latents in row-major order and converts
  each double to Float once (`MLShapedArray<Float32>(converting:)`), as `.astype(np.float32)` does.
- "std-libstdc++", "std-libc++", "std-msvc": stable-diffusion.cpp's `--rng std_default` (src/core/rng.hpp,
  STDDefaultRNG): `std::default_random_engine` seeded with `(unsigned int)seed` (so the seed counts modulo
  2**32, as sd.cpp's cast does) and one fresh `std::normal_distribution<float>(0, 1)` per tensor. Both are the
  C++ library's own, so a Linux (libstdc++), a Mac (libc++) and a Windows (MSVC) build draw different noise:

  | library | engine | uniform float (generate_canonical<float, 24>) | polar method |
  |---|---|---|---|
  | libstdc++ (GCC 7 and later) | minstd_rand0 (16807) | float(x - 1) / 2**31, clamped below 1 | returns y * f first |
  | libc++ (before C++26) | minstd_rand (48271) | float(x - 1) / 2**31 | returns u * f first |
  | MSVC STL (VS 2022 17.12 and later) | mt19937 | (x >> 8) * 2**-24 (P0952R2) | returns v1 * f first |

  Every step is float32 arithmetic, each operation rounded once (no fused multiply-add), and `log` is the C
  library's `logf`: glibc's (2.28 and later, the table method in sysdeps/ieee754/flt-32/e_logf.c, whose results
  are not always correctly rounded) for libstdc++ and libc++, as Linux builds call it; for MSVC the correctly
  rounded logarithm, since the UCRT's `logf` is not published. Clang contracts `u * u + v * v` into one fused
  multiply-add wherever the target has one (every Apple-silicon Mac): such a libc++ build moves about one value in
  seven by a float32 step or two, and Apple's `logf` may round a few others differently. MSVC before VS 2022 17.12
  made its uniform float as float(x) / 2**32, and before VS 2019 16.9 did not rescale a pair with s <= 1e-4.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from .philox import cuda_normal

MAX_UINT32_SEED = 2**32 - 1  # rng numpy-mt19937: Apple's pipeline takes a UInt32 seed (NumPy's legacy seeding too)
SOURCES = ("numpy-mt19937", "std-libstdc++", "std-libc++", "std-msvc")
STREAMS = ("std-libstdc++", "std-libc++", "std-msvc", "cuda-philox")  # sd.cpp's rng objects, call after call

_F32 = np.float32
_ONE, _TWO, _MINUS_TWO, _ZERO = _F32(1), _F32(2), _F32(-2), _F32(0)
_MINSTD_MODULUS = 2**31 - 1
_MINSTD_MULTIPLIERS = {"std-libstdc++": 16807, "std-libc++": 48271}  # minstd_rand0, minstd_rand
_LCG_BLOCK = 4096
_MT_N, _MT_M = 624, 397
_MT_MATRIX, _MT_UPPER, _MT_LOWER = np.uint32(0x9908B0DF), np.uint32(0x80000000), np.uint32(0x7FFFFFFF)

# glibc's logf (sysdeps/ieee754/flt-32/e_logf_data.c, glibc 2.28 and later): for each of 16 subintervals of
# [0x3f330000, 2 * 0x3f330000), 1/c and log(c) for a c near its centre; then ln 2 and log1p's polynomial. The same
# table is published by its authors in ARM's optimized-routines (math/logf_data.c, MIT OR Apache-2.0), from which
# glibc took it: these numbers are the algorithm's data, kept as published so that the logarithm rounds as glibc's.
_LOGF_INVC = np.array([float.fromhex(h) for h in (
    "0x1.661ec79f8f3bep+0", "0x1.571ed4aaf883dp+0", "0x1.49539f0f010bp+0", "0x1.3c995b0b80385p+0",
    "0x1.30d190c8864a5p+0", "0x1.25e227b0b8eap+0", "0x1.1bb4a4a1a343fp+0", "0x1.12358f08ae5bap+0",
    "0x1.0953f419900a7p+0", "0x1p+0", "0x1.e608cfd9a47acp-1", "0x1.ca4b31f026aap-1",
    "0x1.b2036576afce6p-1", "0x1.9c2d163a1aa2dp-1", "0x1.886e6037841edp-1", "0x1.767dcf5534862p-1")])
_LOGF_LOGC = np.array([float.fromhex(h) for h in (
    "-0x1.57bf7808caadep-2", "-0x1.2bef0a7c06ddbp-2", "-0x1.01eae7f513a67p-2", "-0x1.b31d8a68224e9p-3",
    "-0x1.6574f0ac07758p-3", "-0x1.1aa2bc79c81p-3", "-0x1.a4e76ce8c0e5ep-4", "-0x1.1973c5a611cccp-4",
    "-0x1.252f438e10c1ep-5", "0x0p+0", "0x1.aa5aa5df25984p-5", "0x1.c5e53aa362eb4p-4",
    "0x1.526e57720db08p-3", "0x1.bc2860d22477p-3", "0x1.1058bc8a07ee1p-2", "0x1.4043057b6ee09p-2")])
_LOGF_LN2 = float.fromhex("0x1.62e42fefa39efp-1")
_LOGF_POLY = tuple(float.fromhex(h) for h in ("-0x1.00ea348b88334p-2", "0x1.5575b0be00b6ap-2",
                                              "-0x1.ffffef20a4123p-2"))
_LOGF_OFFSET = np.uint32(0x3F330000)


def normals(rng: str, seed: int, count: int) -> np.ndarray:
    """The first `count` float32 normals the tool behind `rng` draws for `seed` (one fresh source and distribution)."""
    if rng not in SOURCES:
        raise ValueError(f"rng must be one of {', '.join(SOURCES)} here, got {rng!r:.60}")
    if rng == "numpy-mt19937":
        if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= MAX_UINT32_SEED:
            raise ValueError(f"seed must be an integer from 0 to {MAX_UINT32_SEED} with rng numpy-mt19937 (Apple's "
                             f"pipeline takes a UInt32 seed), got {seed!r:.60}")
        return apple_gauss(seed, count).astype(np.float32)  # MLShapedArray<Float32>(converting:), value by value
    return Stream(rng, seed).randn(count)


class Stream:
    """stable-diffusion.cpp's rng object after `manual_seed(seed)`: `randn(count)` gives its next call's normals.

    sd.cpp draws the starting latents with one `randn` call and each step noise of euler_a and dpm++2s_a with
    another on the same object (src/stable-diffusion.cpp: `sampler_rng` is `rng` unless told otherwise).
    std-*: STDDefaultRNG keeps its default_random_engine across calls but makes a fresh normal_distribution<float>
    in each, so the engine continues and the value a distribution saved (the second of a pair, after an odd count)
    is dropped. cuda-philox: PhiloxRNG draws call k with its counter's offset k (`offset += 1` a call, whatever the
    count; a uint32), each element its own subsequence, as philox.cuda_normal computes.
    """

    def __init__(self, rng: str, seed: int):
        if rng not in STREAMS:
            raise ValueError(f"rng must be one of {', '.join(STREAMS)} for a stream, got {rng!r:.60}")
        self.rng, self.calls = rng, 0
        self.seed = seed % 2**64 if rng == "cuda-philox" else seed % 2**32  # sd.cpp's uint64 / (unsigned int) seed
        if rng == "std-msvc":
            self.engine = _MersenneTwister(self.seed)
        elif rng != "cuda-philox":
            self.engine = _MinimalStandard(_MINSTD_MULTIPLIERS[rng], self.seed)

    def randn(self, count: int) -> np.ndarray:
        """The float32 normals of the object's next `randn(count)` call."""
        if self.rng == "cuda-philox":
            values = cuda_normal(self.seed, count, self.calls % 2**32)
        elif self.rng == "std-msvc":
            values = _msvc_normals(self.engine, count)
        else:
            values = _minstd_normals(self.engine, self.rng == "std-libstdc++", count)
        self.calls += 1
        return values


# --- engines: streams of 32-bit words that continue across calls ---


class _Engine:
    """What both engines share: the words a polar method drew but did not use go back for the next call."""

    left: np.ndarray  # words drawn from the engine and not handed out yet, in order
    last: np.ndarray  # the words the last `words` call handed out

    def unread(self, count: int) -> None:
        """Give back the last `count` words handed out: the next call takes them first."""
        if count:
            self.left = np.concatenate([self.last[len(self.last) - count:], self.left])


class _MersenneTwister(_Engine):
    """MT19937 (std::mt19937, NumPy's legacy generator) seeded by init_genrand, drawn in whole 624-word blocks."""

    def __init__(self, seed: int):
        key, value = [], seed & 0xFFFFFFFF
        for index in range(_MT_N):
            key.append(value)
            value = (1812433253 * (value ^ (value >> 30)) + index + 1) & 0xFFFFFFFF
        self.key = np.array(key, dtype=np.uint32)
        self.left = self.last = np.zeros(0, dtype=np.uint32)  # tempered words of the last block not handed out yet

    def words(self, count: int) -> np.ndarray:
        """The next `count` tempered words."""
        blocks = [self.left]
        for _ in range(-(-(count - len(self.left)) // _MT_N)):
            self.key = _twist(self.key)
            blocks.append(_temper(self.key))
        words = np.concatenate(blocks)
        self.left, self.last = words[count:], words[:count]
        return self.last


def _twist(key: np.ndarray) -> np.ndarray:
    """One MT19937 regeneration of the 624 words, in the four runs whose inputs are already final."""
    new = key.copy()

    def mixed(upper: np.ndarray, lower: np.ndarray, far: np.ndarray) -> np.ndarray:
        y = (upper & _MT_UPPER) | (lower & _MT_LOWER)
        return far ^ (y >> np.uint32(1)) ^ ((y & np.uint32(1)) * _MT_MATRIX)

    split = _MT_N - _MT_M  # 227: words from here on read words this pass already replaced
    new[:split] = mixed(key[:split], key[1:split + 1], key[_MT_M:])
    new[split:2 * split] = mixed(key[split:2 * split], key[split + 1:2 * split + 1], new[:split])
    new[2 * split:_MT_N - 1] = mixed(key[2 * split:_MT_N - 1], key[2 * split + 1:], new[split:_MT_M - 1])
    new[_MT_N - 1:] = mixed(key[_MT_N - 1:], new[:1], new[_MT_M - 1:_MT_M])
    return new


def _temper(y: np.ndarray) -> np.ndarray:
    y = y ^ (y >> np.uint32(11))
    y = y ^ ((y << np.uint32(7)) & np.uint32(0x9D2C5680))
    y = y ^ ((y << np.uint32(15)) & np.uint32(0xEFC60000))
    return y ^ (y >> np.uint32(18))


class _MinimalStandard(_Engine):
    """minstd_rand0 / minstd_rand: x -> a * x mod (2**31 - 1), a block at a time from the powers of a."""

    def __init__(self, multiplier: int, seed: int):
        state = seed % _MINSTD_MODULUS
        self.state = 1 if state == 0 else state  # [rand.eng.lcong]: a zero state would stay zero
        self.powers = _powers(multiplier)
        self.left = self.last = np.zeros(0, dtype=np.uint64)

    def words(self, count: int) -> np.ndarray:
        kept = self.left[:count]
        out = np.empty(count - len(kept), dtype=np.uint64)
        for start in range(0, len(out), _LCG_BLOCK):
            size = min(_LCG_BLOCK, len(out) - start)
            out[start:start + size] = self.powers[:size] * np.uint64(self.state) % np.uint64(_MINSTD_MODULUS)
            self.state = int(out[start + size - 1])
        self.left, self.last = self.left[len(kept):], np.concatenate([kept, out])
        return self.last


@functools.cache
def _powers(multiplier: int) -> np.ndarray:
    """multiplier**1 .. multiplier**_LCG_BLOCK modulo 2**31 - 1 (products stay below 2**62)."""
    powers = np.array([multiplier], dtype=np.uint64)
    while len(powers) < _LCG_BLOCK:
        powers = np.concatenate([powers, powers * powers[-1] % np.uint64(_MINSTD_MODULUS)])
    return powers[:_LCG_BLOCK]


# --- the tools' normal distributions ---


def _polar(attempt, count: int, engine: _Engine, width: int) -> np.ndarray:
    """Run a polar method until `count` normals: `attempt(n)` gives n attempts' (accepted, first, second), each
    attempt `width` words of `engine`; the words of attempts after the last pair needed go back to the engine."""
    pairs, made, firsts, seconds = (count + 1) // 2, 0, [np.zeros(0, np.float32)], [np.zeros(0, np.float32)]
    while made < pairs:
        tries = max(64, int((pairs - made) * 1.3) + 16)  # 78.5% of attempts succeed
        accepted, first, second = attempt(tries)
        hits = np.flatnonzero(accepted)
        if made + len(hits) >= pairs:  # the C++ object stops at the attempt that gives the last pair
            used = int(hits[pairs - made - 1]) + 1
            engine.unread(width * (tries - used))
            accepted, first, second = accepted[:used], first[:used], second[:used]
        firsts.append(first[accepted])
        seconds.append(second[accepted])
        made += int(accepted.sum())
    values = np.empty((made, 2), dtype=firsts[-1].dtype)
    values[:, 0], values[:, 1] = np.concatenate(firsts), np.concatenate(seconds)
    return values.reshape(-1)[:count]


def apple_gauss(seed: int, count: int) -> np.ndarray:
    """The first `count` values of NumPyRandomSource(seed: seed).nextGauss(), in float64."""
    engine = _MersenneTwister(seed)

    def attempt(n: int):
        words = engine.words(4 * n).reshape(n, 4)  # two doubles of two words each: x1's, then x2's
        high = (words[:, 0::2] >> np.uint32(5)).astype(np.float64)  # a
        low = (words[:, 1::2] >> np.uint32(6)).astype(np.float64)  # b
        x = 2.0 * ((high * 67108864.0 + low) / 9007199254740992.0) - 1.0
        x1, x2 = x[:, 0], x[:, 1]
        r2 = x1 * x1 + x2 * x2
        accepted = (r2 < 1.0) & (r2 != 0.0)
        r2 = np.where(accepted, r2, 0.5)
        log = np.array([math.log(value) for value in r2.tolist()])  # the C library's log, as NumPy's C code calls
        f = np.sqrt(-2.0 * log / r2)
        return accepted, f * x2, f * x1

    return _polar(attempt, count, engine, 4)


def _minstd_normals(engine: _MinimalStandard, libstdcxx: bool, count: int) -> np.ndarray:
    """A fresh libstdc++ or libc++ normal_distribution<float> drawing `count` values on their default_random_engine."""

    def attempt(n: int):
        # generate_canonical<float, 24>: one word (log2 of the range is 30), x - min() rounded to float, / 2**31.
        canonical = (engine.words(2 * n) - np.uint64(1)).astype(np.float64).astype(np.float32) * _F32(2.0**-31)
        if libstdcxx:  # GCC's answer to LWG 2524: a value rounded up to 1 becomes the float below it
            canonical = np.minimum(canonical, np.nextafter(_ONE, _ZERO))
        uniform = (_TWO * canonical - _ONE).reshape(n, 2)
        first, second = uniform[:, 0], uniform[:, 1]
        square = first * first + second * second
        accepted = (square <= _ONE) & (square != _ZERO)
        square = np.where(accepted, square, _ONE)  # a rejected pair's factor is never used
        factor = np.sqrt(_MINUS_TWO * glibc_logf(square) / square)
        if libstdcxx:  # libstdc++ returns y * f and keeps x * f; libc++ returns u * f and keeps v * f
            return accepted, second * factor + _ZERO, first * factor + _ZERO
        return accepted, first * factor + _ZERO, second * factor + _ZERO

    return _polar(attempt, count, engine, 2)


def _msvc_normals(engine: _MersenneTwister, count: int) -> np.ndarray:
    """A fresh MSVC STL normal_distribution<float> (Knuth's algorithm P) drawing `count` values on mt19937."""

    def attempt(n: int):
        canonical = (engine.words(2 * n) >> np.uint32(8)).astype(np.float32) * _F32(2.0**-24)  # P0952R2, R = 2**32
        uniform = (_TWO * canonical - _ONE).reshape(n, 2)
        first, second = uniform[:, 0], uniform[:, 1]
        square = first * first + second * second
        accepted = (square < _ONE) & (first != _ZERO) & (second != _ZERO)
        first, second, square = (np.where(accepted, value, _F32(0.5)) for value in (first, second, square))
        first, second, square, log = _msvc_log(first, second, square)
        factor = np.sqrt(_MINUS_TWO * log / square)
        return accepted, factor * first + _ZERO, factor * second + _ZERO

    return _polar(attempt, count, engine, 2)


def _msvc_log(first: np.ndarray, second: np.ndarray, square: np.ndarray) -> tuple[np.ndarray, ...]:
    """(first, second, square, log of the true square): at or below 1e-4 MSVC scales the pair by 2**-ilogb(larger)
    first (it returns the scaled values times f), so that log(s) / s cannot overflow."""
    small = square <= _F32(1e-4)
    exponent = np.frexp(np.maximum(np.abs(first), np.abs(second)))[1] - 1  # ilogb
    first = np.where(small, np.ldexp(first, -exponent), first)
    second = np.where(small, np.ldexp(second, -exponent), second)
    square = np.where(small, first * first + second * second, square)
    log = _correct_logf(square)
    ln4 = _F32(0.69314718055994530941723212145818) * _TWO
    return first, second, square, np.where(small, log + exponent.astype(np.float32) * ln4, log)


def _correct_logf(x: np.ndarray) -> np.ndarray:
    """The correctly rounded float32 logarithm (float64's, rounded once: off only within 2**-29 of a tie)."""
    return np.log(x.astype(np.float64)).astype(np.float32)


def glibc_logf(x: np.ndarray) -> np.ndarray:
    """glibc's logf for positive normal float32 values: x = 2**k z, log(c) + k ln2 + a cubic in z / c - 1 (float64)."""
    ix = np.asarray(x, dtype=np.float32).view(np.uint32)
    offset = ix - _LOGF_OFFSET  # wraps below the offset: k is then negative
    index = (offset >> np.uint32(19)) % np.uint32(16)
    k = offset.view(np.int32) >> np.int32(23)
    z = (ix - (offset & np.uint32(0x1FF << 23))).view(np.float32).astype(np.float64)
    r = z * _LOGF_INVC[index] - 1.0
    y0 = _LOGF_LOGC[index] + k.astype(np.float64) * _LOGF_LN2
    r2 = r * r
    y = _LOGF_POLY[1] * r + _LOGF_POLY[2]
    y = _LOGF_POLY[0] * r2 + y
    return (y * r2 + (y0 + r)).astype(np.float32)
