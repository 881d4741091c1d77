"""Certified upper bound on the l2 operator norm of a 2-D convolution layer (zero padding, any
stride, dilation and groups), without unrolling it.

Zero-padding embedding (why a circular bound applies). Let the layer map x in R^{C_in x H x W} to
    y[o, i, j] = sum_{c, a, b} K[o, c, a, b] xp[c, s_h i + d_h a, s_w j + d_w b],
where xp is x zero-padded to N_h x N_w = (H + top + bottom) x (W + left + right). Place x on the
N_h x N_w torus at offset (top, left) (an isometry E: ||E x|| = ||x||) and apply the *circular*
cross-correlation C with the same dilated kernel on that torus. Every index s_h i + d_h a used by a
valid output is at most N_h - 1 (that is how the output size is defined), so no index wraps
around and (C E x)[o, s_h i, s_w j] = y[o, i, j] exactly. Hence y = P C E x with P a selection of
coordinates (||P||_2 <= 1), and ||conv||_2 <= ||C||_2. The circular operator is block-diagonalised
by the 2-D DFT: ||C||_2 = max over the N_h * N_w frequencies w of ||K_hat(w)||_2, where
K_hat(w)[o, c] = sum_{a, b} K[o, c, a, b] exp(-2 pi i (w_h d_h a / N_h + w_w d_w b / N_w)) is a
C_out x C_in matrix (per group; a grouped convolution is block-diagonal, so the maximum is also
taken over groups). This is the bound of Sedghi et al. (2019) applied to the zero-padded layer.
A stride s is handled exactly on the torus (its size rounded up to a multiple of s, which keeps
the embedding argument): the strided circular convolution is a stride-1 circular convolution on
the reduced torus N / s whose inputs are the s_h * s_w polyphase components of x, so its symbol is
a C_out x (C_in s_h s_w) matrix per reduced frequency (much tighter than bounding the unstrided
convolution and dropping the subsampling).

Each ||K_hat(w)||_2 is bounded by the Gram iteration of Delattre et al. (2023),
    ||A||_2 <= ||G_t||_F^(1 / 2^t),  G_0 = A, G_{t+1} = G_t^H G_t,
made rigorous in float64: each G_t is rescaled by an exact power of two, the rounding error E_t of
every product is bounded (|E_t| <= gamma |G_t|^H |G_t|, so ||E_t||_2 <= gamma ||G_t||_F^2) and
carried back through sigma(G_t)^2 <= sigma(G_{t+1}) + ||E_t||_2 with upward rounding. The DFT
symbol itself is computed directly from the kernel taps; its rounding error is bounded entrywise
by c u sum_{a,b} |K[o, c, a, b]| and added (in Frobenius norm). A power-iteration estimate is
only ever used to decide which frequencies deserve more Gram steps, never as a bound.
"""

from __future__ import annotations

import numpy as np

from models.ir import ConvSpec

from .rounding import U, frobenius_up, gamma

# Gram steps: a cheap pass over every frequency, then deeper passes on the frequencies whose
# bound could still be the maximum (bound / sigma_1 <= rank^(1 / 2^(t+1)))
COARSE_STEPS = 5
FINE_STEPS = 18
CHUNK_BYTES = 64 * 2**20


def spec_reproduces(spec: ConvSpec, weight: np.ndarray, probes: int = 2) -> bool:
    """Does the convolution `spec` compute the dense `weight` (checked on random probes)?

    The importers attach the structure; this guards the structured bound against a record that
    no longer describes the layer's matrix (it would silently under-estimate the norm).
    """
    import torch
    import torch.nn.functional as F

    n_in, n_out = int(np.prod(spec.in_shape)), int(np.prod(spec.out_shape))
    if weight.shape != (n_out, n_in) or spec.kernel.shape[0] != spec.out_shape[0]:
        return False
    top, left, bottom, right = spec.pads
    x = np.random.default_rng(0).standard_normal((probes, n_in))
    xt = F.pad(torch.from_numpy(x.reshape((probes,) + tuple(spec.in_shape))), (left, right, top, bottom))
    try:
        y = F.conv2d(xt, torch.from_numpy(np.asarray(spec.kernel, dtype=np.float64)), None, spec.stride, 0,
                     spec.dilation, spec.groups).numpy().reshape(probes, -1)
    except RuntimeError:
        return False
    if y.shape != (probes, n_out):
        return False
    scale = np.abs(x) @ np.abs(weight).T
    return bool(np.all(np.abs(y - x @ weight.T) <= 1e-9 * scale + 1e-300))


def _up(x: np.ndarray) -> np.ndarray:
    return np.nextafter(x, np.inf)


def gram_iteration_upper(A: np.ndarray, steps: int) -> np.ndarray:
    """Rigorous upper bounds on the spectral norms of a batch of matrices A (..., m, n) (complex ok)."""
    A = np.asarray(A)
    if A.shape[-2] < A.shape[-1]:
        A = np.conj(np.swapaxes(A, -1, -2))  # same singular values, smaller Gram
    batch = A.shape[:-2]
    G = A.reshape((-1,) + A.shape[-2:]).astype(np.complex128)
    exps, errs = [], []
    for _ in range(steps):
        fro = np.sqrt(np.sum(np.abs(G) ** 2, axis=(-2, -1)))
        e = np.frexp(np.where(fro > 0, fro, 1.0))[1]
        H = G * np.ldexp(1.0, -e)[:, None, None]  # multiplying by a power of two is exact
        k = H.shape[-2]
        c = 2.0 * gamma(2 * k + 8)  # complex inner products of length k (Higham 3.6), generously
        h_fro = _batch_frobenius_up(H)
        errs.append(_up(c * _up(h_fro * h_fro)))
        exps.append(e)
        G = np.einsum("bji,bjk->bik", H.conj(), H, optimize=True)  # far faster than batched @ here
    b = _batch_frobenius_up(G)
    for e, err in zip(reversed(exps), reversed(errs)):
        b = np.ldexp(_up(np.sqrt(_up(b + err))), e)
    return b.reshape(batch)


def _batch_frobenius_up(G: np.ndarray) -> np.ndarray:
    """Upper bounds of ||G_i||_F for a batch (B, m, n); entries are O(1) so no scaling is needed."""
    n = G.shape[-1] * G.shape[-2]
    sq = np.sum(np.abs(G) ** 2, axis=(-2, -1)) * (1.0 + 2.0 * gamma(n + 4))
    return _up(np.sqrt(_up(sq)))


def _polyphase(n: int, taps: int, stride: int, dilation: int) -> tuple[int, np.ndarray]:
    """Reduced torus size and symbol factors exp(-2 pi i f shift(a) / M) * [phase(a) == p].

    Tap a reads input row s i + d a = s (i + (d a) // s) + (d a) % s: on the torus of size
    n (a multiple of s) it is a shift by (d a) // s of polyphase component (d a) % s on the reduced
    torus of size M = n / s. Returns M and an array (M, taps, s).
    """
    m = n // stride
    shifts = (dilation * np.arange(taps)) // stride
    phase = (dilation * np.arange(taps)) % stride
    idx = (np.arange(m)[:, None] * shifts[None, :]) % m  # exact integers: argument in [0, 2 pi)
    factors = np.exp(-2j * np.pi * idx / m)[:, :, None] * (phase[None, :, None] == np.arange(stride)[None, None, :])
    return m, factors


def conv_spectral_norm_upper(spec: ConvSpec, kernel_rel_err: float = 0.0) -> float:
    """Certified upper bound on ||conv||_{2->2} for a `ConvSpec` (see the module docstring).

    `kernel_rel_err` covers a kernel known up to rounding: the bound holds for every exact kernel
    with |K_exact - K| <= kernel_rel_err * |K| entrywise (it enlarges the symbol's error term).
    """
    K = np.asarray(spec.kernel, dtype=np.float64)
    co, ci_g, kh, kw = K.shape
    g = spec.groups
    _, H, W = spec.in_shape
    top, left, bottom, right = spec.pads
    sh, sw = spec.stride
    dh, dw = spec.dilation
    if not np.any(K):
        return 0.0
    # torus: at least the padded input and the dilated kernel, a multiple of the stride
    nh = -(-max(H + top + bottom, dh * (kh - 1) + 1) // sh) * sh
    nw = -(-max(W + left + right, dw * (kw - 1) + 1) // sw) * sw
    mh, fh = _polyphase(nh, kh, sh, dh)  # (mh, kh, sh)
    mw, fw = _polyphase(nw, kw, sw, dw)
    fw = fw[: mw // 2 + 1]  # K is real: frequencies w and -w give conjugate symbols
    Kg = K.reshape(g, co // g, ci_g, kh, kw)
    # entrywise rounding error of the symbol: each factor carries <= ~30 u (argument reduced
    # exactly to [0, 2 pi), libm sin/cos within an ulp), then kh*kw products summed: gamma(kh kw + 2)
    c_sym = gamma(kh * kw + 100) + 2.0 * float(kernel_rel_err)
    sym_err = max(frobenius_up(c_sym * np.abs(Kg[j]).sum(axis=(-2, -1))) for j in range(g))
    per_row = fw.shape[0] * g * (co // g) * ci_g * sh * sw * 16
    rows = max(1, CHUNK_BYTES // max(per_row, 1))
    chunks = [slice(s, s + rows) for s in range(0, mh, rows)]

    def symbols(chunk: slice) -> np.ndarray:
        sym = np.einsum("goiab,hap,wbq->hwgoipq", Kg, fh[chunk], fw, optimize=True)
        return sym.reshape(-1, co // g, ci_g * sh * sw)

    coarse, target = [], 0.0
    for chunk in chunks:
        sym = symbols(chunk)
        coarse.append(gram_iteration_upper(sym, COARSE_STEPS))
        # a *lower* estimate of the answer, used only to pick frequencies worth refining
        target = max(target, float(np.max(np.linalg.norm(sym, 2, axis=(-2, -1)))))
    best = 0.0
    for chunk, bounds in zip(chunks, coarse):
        loose = bounds > target * (1.0 + 1e-9)
        if np.any(loose):
            bounds = bounds.copy()
            bounds[loose] = np.minimum(bounds[loose], gram_iteration_upper(symbols(chunk)[loose], FINE_STEPS))
        best = max(best, float(np.max(bounds)))
    return float(np.nextafter(best + sym_err * (1.0 + 4.0 * U), np.inf))
