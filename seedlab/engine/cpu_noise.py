"""torch's CPU generator's normals, exactly as an AVX2 x86-64 build of torch 2.13.0 computes them, on any machine.

`torch.randn(shape, generator=g)` on a CPU generator fills a contiguous float32 tensor of 16 values or more with
ATen's `normal_fill` (aten/src/ATen/native/cpu/DistributionTemplates.h): it first writes one uniform float per value,
`(random() & 0xFFFFFF) * 2**-24` from the generator's mt19937, then turns each block of 16 into normals with a
Box-Muller (`NormalFill16`: values 0-7 give u1 = 1 - u, values 8-15 the angle 2 pi u, out come r cos and r sin). When
the count is not a multiple of 16, 16 fresh uniforms are drawn and the last 16 values are computed again from them.
The uniforms are the same on every machine; the Box-Muller is not:
- an AVX2 build (every x86-64 CPU with AVX2; AVX-512 CPUs too, since ATen registers no AVX-512 normal kernel) takes
  the vector specialisation, with avx_mathfun.h's `log256_ps` and `sincos256_ps` (Cephes polynomials), and GCC has
  contracted most of their multiply-adds into FMA instructions (objdump of libtorch_cpu.so: below);
- every other build (ARM, `ATEN_CPU_CAPABILITY=default`) takes the scalar template with libm's `logf`, `cosf`, `sinf`,
  whose last bits differ from the vector code in about 40% of the values.

`compute_randn` computes the AVX2 build's values in numpy float32 arithmetic that rounds the same on every machine:
IEEE +, -, *, / and sqrt are correctly rounded, and each fused multiply-add is emulated exactly (`_fma`). The
uniforms come from `torch.rand` on the same generator: its kernel is serial and takes one 32-bit draw per float, the
draws normal_fill takes, so the generator ends where torch.randn leaves it. `randn` is torch.randn itself where this
process's torch gives those values (`torch_is_avx2`, checked once against `compute_randn`): 40 times faster there.

Where torch's own result does not depend on the build, it is torch's own (`randn` delegates):
- fewer than 16 values: the serial `normal_distribution<double>` (53-bit uniforms, libm's double log1p/sin/cos, the
  second value of each pair cached in the generator), then rounded to the dtype; no vector code, no fused step that
  changes a value (a product by std 1 plus mean 0 is exact);
- float64: the scalar template in double (libm's `log` and `sincos`, an explicit `fma`), the same in both builds;
- generators on a device other than the CPU: their own kernels (CUDA's Philox), left alone.
float16 and bfloat16 run the float32 Box-Muller on 16 values at a time (as ATen does, which draws 16 uniforms per
block and none past the blocks but the tail's 16) and round each value once to the dtype.

What the AVX2 build fused (the `NormalFill16<float>` function of torch 2.13.0's libtorch_cpu.so; the same statement
order as avx_mathfun.h):
- log: every Horner step of the degree-8 polynomial, `y * z + e * q1`, `y - z * 0.5`, `x + e * q2`;
- sincos: the three steps of the range reduction `x + j * DP`, the polynomials' Horner steps, the cosine's
  `z * y - z * 0.5` and the sine's `x * y + x`;
- not fused: `z = x * x`, the last `y * x` and `y * z` products, `-2 * log`, `2 pi * u`, `r * cos`, `r * sin`;
- the final `fmadd(n, std, mean)` is written as an FMA in the source: with std 1 and mean 0 it is `n + 0`.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import torch

BLOCK = 16  # normal_fill's Box-Muller takes 16 uniforms at a time: 8 radii, 8 angles
PAIRS = BLOCK // 2
PROBE_VALUES = 4096 + 7  # torch_is_avx2's test draw: whole blocks and a tail
# Blocks per numpy pass: its float64 temporaries (32 kB each) stay in the allocator's pools. Whole-tensor passes
# are 10x slower at 4x128x128, as each large temporary is a fresh mmap whose pages fault in on every operation.
_CHUNK_BLOCKS = 512
_TORCH_RANDN = torch.randn  # the probe's own draw, which a test counting a request's torch.randn draws leaves out
_SMALL_DTYPES = (torch.float16, torch.bfloat16)  # computed in float32, as ATen's opmath_t, then rounded once
_F32 = np.float32
_ZERO, _HALF, _ONE, _MINUS_TWO = _F32(0), _F32(0.5), _F32(1), _F32(-2)
_TWO_PI = _F32(2 * math.pi)  # _mm256_set1_ps(2.0f * c10::pi<double>): the double 2 pi rounded to float

# avx_mathfun.h's Cephes constants, as the compiler rounds its decimal literals to float (checked against the binary)
_SQRT_HALF = _F32(0.707106781186547524)
_LOG_POLY = tuple(_F32(c) for c in (
    7.0376836292e-2, -1.1514610310e-1, 1.1676998740e-1, -1.2420140846e-1, 1.4249322787e-1, -1.6668057665e-1,
    2.0000714765e-1, -2.4999993993e-1, 3.3333331174e-1))
_LOG_Q1, _LOG_Q2 = _F32(-2.12194440e-4), _F32(0.693359375)  # ln 2 = q2 - q1, split so e * q2 is exact
_FOUR_OVER_PI = _F32(1.27323954473516)
_MINUS_DP = (_F32(-0.78515625), _F32(-2.4187564849853515625e-4), _F32(-3.77489497744594108e-8))  # pi/4 in 3 parts
_COS_POLY = (_F32(2.443315711809948e-5), _F32(-1.388731625493765e-3), _F32(4.166664568298827e-2))
_SIN_POLY = (_F32(-1.9515295891e-4), _F32(8.3321608736e-3), _F32(-1.6666654611e-1))
_MANTISSA = np.uint32(0x007FFFFF)
_HALF_BITS = np.uint32(0x3F000000)  # 0.5's exponent: the mantissa as a float in [0.5, 1)


def randn(shape, generator: torch.Generator, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """What `torch.randn(shape, generator=generator, dtype=dtype)` gives on an AVX2 x86-64 build, on this machine.

    torch's own kernel where it gives those values (an AVX2 build: checked once per process), computed elsewhere.
    The generator ends in the state torch.randn leaves it in, so later draws (a scheduler's step noise) follow on.
    """
    _check_generator(generator)
    if torch_is_avx2():
        return torch.randn(shape, generator=generator, dtype=dtype, device=generator.device)
    return compute_randn(shape, generator, dtype)


@functools.cache
def torch_is_avx2() -> bool:
    """Does this process's torch.randn give the AVX2 build's values? It does on x86-64 CPUs with AVX2 or AVX-512.

    A build or a CPU that takes the scalar Box-Muller (ARM, `ATEN_CPU_CAPABILITY=default`) differs in about 40% of
    the values, and a compiler that fused other steps in about 1%, so PROBE_VALUES values tell them apart.
    """
    ours = compute_randn(PROBE_VALUES, torch.Generator("cpu").manual_seed(0))
    theirs = _TORCH_RANDN(PROBE_VALUES, generator=torch.Generator("cpu").manual_seed(0))
    return torch.equal(ours.view(torch.int32), theirs.view(torch.int32))


def compute_randn(shape, generator: torch.Generator, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """`randn`'s values computed here: torch.rand's uniforms and the AVX2 Box-Muller in numpy, whatever the CPU."""
    _check_generator(generator)
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    count = math.prod(shape)
    if generator.device.type != "cpu" or dtype not in (torch.float32, *_SMALL_DTYPES) or count < BLOCK:
        return torch.randn(shape, generator=generator, dtype=dtype, device=generator.device)
    whole, extra = count - count % BLOCK, (BLOCK if count % BLOCK else 0)
    # float32 first writes a uniform into every value; the half types draw only a buffer per whole block. Both then
    # draw 16 more when count % 16 != 0, from which the last 16 values are computed again.
    drawn = count if dtype == torch.float32 else whole
    uniforms = torch.rand(drawn + extra, generator=generator).numpy()
    values = np.empty(count, dtype=_F32)
    blocks, normals = uniforms[:whole].reshape(-1, BLOCK), values[:whole].reshape(-1, BLOCK)
    for start in range(0, len(blocks), _CHUNK_BLOCKS):
        normals[start : start + _CHUNK_BLOCKS] = box_muller(blocks[start : start + _CHUNK_BLOCKS])
    if extra:
        values[count - BLOCK :] = box_muller(uniforms[-BLOCK:].reshape(1, BLOCK)).reshape(-1)
    return torch.from_numpy(values).reshape(shape).to(dtype)


def box_muller(uniforms: np.ndarray) -> np.ndarray:
    """The AVX2 `NormalFill16<float>` on each row of a (blocks, 16) float32 array of uniforms in [0, 1)."""
    radius = np.sqrt(_MINUS_TWO * log(_ONE - uniforms[:, :PAIRS]))  # 1 - u is in [2**-24, 1]: no zero, no NaN
    sine, cosine = sincos(_TWO_PI * uniforms[:, PAIRS:])
    # _mm256_fmadd_ps(n, std 1, mean 0) is n + 0 exactly, which turns a -0 into +0
    return np.concatenate((radius * cosine + _ZERO, radius * sine + _ZERO), axis=1)


def log(x: np.ndarray) -> np.ndarray:
    """avx_mathfun's `log256_ps` of positive normal float32 values, with the AVX2 build's fused steps."""
    bits = x.view(np.uint32)
    exponent = ((bits >> 23).astype(np.int32) - 127).astype(_F32) + _ONE
    x = ((bits & _MANTISSA) | _HALF_BITS).view(_F32)  # the mantissa in [0.5, 1)
    below = x < _SQRT_HALF  # there: e - 1 and 2x - 1, so that x lands in [sqrt(1/2) - 1, sqrt(2) - 1]
    exponent = exponent - np.where(below, _ONE, _ZERO)
    x = (x - _ONE) + np.where(below, x, _ZERO)
    z = x * x
    y = _fma(_full(x, _LOG_POLY[0]), x, _LOG_POLY[1])
    for coefficient in _LOG_POLY[2:]:
        y = _fma(y, x, coefficient)
    y = y * x
    y = _fma(y, z, exponent * _LOG_Q1)
    y = _fma(-z, _HALF, y)
    x = x + y
    return _fma(exponent, _LOG_Q2, x)


def sincos(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """avx_mathfun's `sincos256_ps` of non-negative float32 values (angles 2 pi u), with the AVX2 build's fused steps.

    The octant j (rounded up to even) picks the polynomial and the signs; x is reduced by j pi/4 in three parts.
    """
    octant = (x * _FOUR_OVER_PI).astype(np.int32)  # cvttps2dq: truncation; the angles are below 2 pi, so j <= 8
    octant = (octant + 1) & ~1
    j = octant.astype(_F32)
    for part in _MINUS_DP:
        x = _fma(j, part, x)
    z = x * x
    cosine = _fma(_full(z, _COS_POLY[0]), z, _COS_POLY[1])
    cosine = z * _fma(cosine, z, _COS_POLY[2])
    cosine = _fma(z, cosine, -(z * _HALF)) + _ONE
    sine = _fma(_full(z, _SIN_POLY[0]), z, _SIN_POLY[1])
    sine = z * _fma(sine, z, _SIN_POLY[2])
    sine = _fma(x, sine, x)
    near_zero = (octant & 2) == 0  # the sine polynomial serves sin here and the cosine one cos; swapped elsewhere
    # the selection adds +0 (an and-masked lane), which turns a -0 into +0 as the vector code does
    sin_value = np.where(near_zero, sine, cosine) + _ZERO
    cos_value = np.where(near_zero, cosine, sine) + _ZERO
    sin_sign = ((octant & 4) << 29).astype(np.uint32)
    cos_sign = ((~(octant - 2) & 4) << 29).astype(np.uint32)
    return (sin_value.view(np.uint32) ^ sin_sign).view(_F32), (cos_value.view(np.uint32) ^ cos_sign).view(_F32)


def _fma(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """a * b + c on float32 values, rounded once, as an FMA instruction does.

    The product of two float32 values is exact in float64. The sum is rounded to odd (its error, from a two-sum,
    moves an even result one step toward the exact value): a float64 rounded to odd keeps enough bits that the
    final rounding to float32 is the correctly rounded result, with no double rounding.
    """
    product = a.astype(np.float64) * b
    total = product + c
    back = total - product
    error = (product - (total - back)) + (c - back)
    bits = total.view(np.int64)
    inexact_even = (error != 0) & ((bits & 1) == 0)
    step = np.where((error > 0) == (total > 0), 1, -1)  # on the raw bits: +1 moves away from zero, -1 toward it
    return np.where(inexact_even, bits + step, bits).view(np.float64).astype(_F32)


def _check_generator(generator) -> None:
    if not isinstance(generator, torch.Generator):
        raise ValueError(f"generator must be a torch.Generator, got {type(generator).__name__}")


def _full(like: np.ndarray, value: np.float32) -> np.ndarray:
    return np.full(like.shape, value, dtype=_F32)
