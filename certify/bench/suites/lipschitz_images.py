"""Image-sized nets of the `lipschitz` suite: local Lipschitz constants (linf -> l1) of the VNN-COMP
2022 MNIST (`mnist_fc`, 784 inputs, fully connected) and CIFAR (`oval21` `cifar_base_kw`, 3x32x32,
convolutional) nets, read from the VNN-COMP data folder (`--vnncomp-data DIR` or
`$CERTIFY_VNNCOMP_DATA`, as for `certify bench verify`; without it these cases are left out).

The centres are real images: the midpoint of the input box of one of the family's properties (for
MNIST clipped to the pixel domain [0, 1], which is also the question's domain); the radii are those
of the questions in issue 29: 0.02 and 0.05 on MNIST, 2/255 on CIFAR (the oval21 nets take their
inputs normalised, without a domain)."""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np

from ..cases import Case, net_size

MNIST_NETS = ("mnist-net_256x4", "mnist-net_256x6")
MNIST_PROPERTY = "prop_0_0.03"
MNIST_RADII = (0.02, 0.05)
CIFAR_NET = "cifar_base_kw"
CIFAR_RADIUS = 2.0 / 255.0


@functools.lru_cache(maxsize=None)
def _load(onnx: str, vnnlib: str, radius: float, clip: bool):
    import certify
    from certify.verify.vnnlib import load_vnnlib

    net = certify.load_onnx(onnx)
    box = load_vnnlib(vnnlib).disjuncts[0]
    center = 0.5 * (box.lo + box.hi)
    return net, (np.clip(center, 0.0, 1.0) if clip else center), radius


def image_cases(folder: Path | None, make_cases) -> list[Case]:
    """The cases of the nets present in `folder` (none without a folder); `make_cases`: the suite's
    `lipschitz_cases`."""
    if folder is None:
        return []
    cases: list[Case] = []
    mnist = folder / "mnist_fc"
    for name in MNIST_NETS:
        onnx, prop = mnist / "onnx" / f"{name}.onnx", mnist / "vnnlib" / f"{MNIST_PROPERTY}.vnnlib"
        if not (onnx.is_file() and prop.is_file()):
            continue
        for radius in MNIST_RADII:
            load = functools.partial(_load, str(onnx), str(prop), radius, True)
            cases += make_cases(f"{name}_r{radius:g}", "mnist", load, methods=("bab",), size=_size(load),
                                domain=(0.0, 1.0))
    oval = folder / "oval21"
    props = sorted((oval / "vnnlib").glob(f"{CIFAR_NET}-*.vnnlib")) if (oval / "vnnlib").is_dir() else []
    if (oval / "onnx" / f"{CIFAR_NET}.onnx").is_file() and props:
        load = functools.partial(_load, str(oval / "onnx" / f"{CIFAR_NET}.onnx"), str(props[0]), CIFAR_RADIUS, False)
        cases += make_cases(f"{CIFAR_NET}_r2of255", "cifar", load, methods=("bab", "bounds"), size=_size(load))
    return cases


def _size(load) -> dict[str, int]:
    return net_size(load()[0])


__all__ = ["image_cases"]
