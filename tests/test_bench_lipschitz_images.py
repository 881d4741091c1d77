"""The image-sized nets of `certify bench lipschitz` (certify/bench/suites/lipschitz_images.py) on a
fake VNN-COMP data folder: tiny nets under the MNIST and CIFAR file names, with property boxes
written here, so the centres (box midpoints, clipped to [0, 1] for MNIST) are known by hand and the
certified intervals can be checked against the exact constant by region enumeration."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from certify.bench.cases import SuiteConfig
from certify.bench.suites.lipschitz import lipschitz_cases, lipschitz_suite
from certify.bench.suites.lipschitz_images import CIFAR_RADIUS, MNIST_RADII, image_cases
from tests.conftest import assert_bad_input
from tests.lipschitz_oracles import exact_lipschitz, random_weights, write_onnx

MNIST_LO, MNIST_HI = np.array([-0.2, 0.1, 0.9]), np.array([0.2, 0.5, 1.3])  # midpoints 0, 0.3, 1.1 -> 1 clipped
CIFAR_LO, CIFAR_HI = np.array([-1.0, 0.0, 2.0]), np.array([-0.5, 0.4, 2.2])


def _vnnlib(path: Path, lo, hi, n_out: int) -> None:
    lines = [f"(declare-const X_{i} Real)" for i in range(len(lo))] + [f"(declare-const Y_{j} Real)" for j in range(n_out)]
    for i, (a, b) in enumerate(zip(lo, hi)):
        lines += [f"(assert (>= X_{i} {float(a)!r}))", f"(assert (<= X_{i} {float(b)!r}))"]
    lines.append("(assert (>= Y_0 Y_1))")
    path.write_text("\n".join(lines) + "\n")


@pytest.fixture
def folder(tmp_path, monkeypatch):
    monkeypatch.delenv("CERTIFY_VNNCOMP_DATA", raising=False)
    weights = random_weights([3, 6, 5, 2], 8)
    for family, onnx, prop, lo, hi in (("mnist_fc", "mnist-net_256x4", "prop_0_0.03", MNIST_LO, MNIST_HI),
                                       ("oval21", "cifar_base_kw", "cifar_base_kw-img1-eps0.01", CIFAR_LO, CIFAR_HI)):
        (tmp_path / family / "onnx").mkdir(parents=True)
        (tmp_path / family / "vnnlib").mkdir()
        write_onnx(weights, tmp_path / family / "onnx" / f"{onnx}.onnx")
        _vnnlib(tmp_path / family / "vnnlib" / f"{prop}.vnnlib", lo, hi, 2)
    return tmp_path, weights


def test_image_cases_certify_intervals_around_the_property_midpoints(folder):
    path, weights = folder
    cases = image_cases(path, lipschitz_cases)
    assert sorted({(c.family, c.method) for c in cases}) == [("cifar", "bab"), ("cifar", "bounds"), ("mnist", "bab")]
    mnist = [c for c in cases if c.family == "mnist"]
    assert len(mnist) == len(MNIST_RADII)  # the 256x6 net is absent from this folder
    for case in cases:
        net, center, radius = case.prepare()
        if case.family == "mnist":
            assert np.array_equal(center, [0.0, 0.3, 1.0])
            lo, hi = np.clip(center - radius, 0.0, 1.0), np.clip(center + radius, 0.0, 1.0)
        else:
            assert np.allclose(center, [-0.75, 0.2, 2.1], rtol=0, atol=1e-15) and radius == CIFAR_RADIUS
            lo, hi = center - radius, center + radius
        exact = exact_lipschitz(weights, lo, hi, "linf", "l1")
        out = case.run(10.0)
        assert out.lower <= exact * (1 + 1e-9) + 1e-12
        assert out.upper >= exact * (1 - 1e-9)


def test_the_suite_adds_image_nets_only_with_a_data_folder(folder):
    path, _ = folder
    with_data = lipschitz_suite(SuiteConfig(options={"vnncomp_data": str(path)}))
    without = lipschitz_suite(SuiteConfig())
    assert {c.family for c in with_data} - {c.family for c in without} == {"mnist", "cifar"}
    quick = lipschitz_suite(SuiteConfig(quick=True, options={"vnncomp_data": str(path)}))
    assert not {"mnist", "cifar"} & {c.family for c in quick}


def test_vnncomp_data_is_refused_for_other_suites_and_families_for_lipschitz(folder, tmp_path, cli):
    path, _ = folder
    r = cli("bench", "global", "--vnncomp-data", path, "--out", tmp_path / "a")
    assert_bad_input(r, "verify suite", "lipschitz suite")
    r = cli("bench", "lipschitz", "--families", "mnist_fc", "--out", tmp_path / "b")
    assert_bad_input(r, "--families", "verify suite")
