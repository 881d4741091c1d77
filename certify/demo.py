"""`make demo`: the main jobs of certify on bundled models, printed as a report.

Each step shows the equivalent CLI command. Steps are added here as capabilities land.
"""

from __future__ import annotations

import os
import shlex
import time
from typing import Sequence

import numpy as np


def _shown(arg: object) -> str:
    """A model path as the user can paste it where the demo runs (the repository root for `make
    demo`): relative to the working directory when below it, else absolute; never a bare name."""
    text = str(arg)
    if not os.path.isabs(text):
        return text
    rel = os.path.relpath(text)
    return text if rel.startswith(os.pardir) else rel


def _run(title: str, argv: Sequence[object]) -> None:
    """Print the step and the exact command (paths made pasteable), then run that command."""
    from certify.cli import main

    shown = [_shown(a) if os.path.exists(str(a)) else str(a) for a in argv]
    print(f"\n== {title}\n$ certify {shlex.join(shown)}")
    main([str(a) for a in argv])


def demo_import() -> None:
    from models import load_onnx
    from models.onnx_import import check_against_onnxruntime
    from models.zoo import acasxu_path

    path = acasxu_path(1, 1)
    _run("Import an ACAS Xu network (VNN-COMP ONNX, MATLAB export quirks)", ["inspect", path])
    net = load_onnx(path, check=False)
    t = time.perf_counter()
    err = check_against_onnxruntime(net, path.read_bytes(), samples=32)
    print(f"forward check against onnxruntime on 32 random inputs: worst relative error {err:.1e} "
          f"(limit 1e-5) in {time.perf_counter() - t:.2f}s")
    x = np.array([0.6, -0.3, 0.1, 0.4, 0.2])
    _run("Evaluate it", ["eval", path, "--input", ",".join(map(str, x))])


def demo_privacy() -> None:
    from certify.lipschitz.global_bounds import global_lipschitz
    from certify.privacy import GaussOutput
    from models import load_onnx
    from models.zoo import lipmip_suite_path

    _run("Calibrate Gaussian noise: analytic (exact) sigma for epsilon = 1, delta = 1e-5, sensitivity 1",
         ["calibrate", "gaussian", "--epsilon", "1", "--delta", "1e-5", "--sensitivity", "1"])
    _run("Chain an {(1, 1e-5), 0.1} guarantee to radius 0.35 (delta from the proof, not h * delta)",
         ["chain", "--epsilon", "1", "--delta", "1e-5", "--alpha", "0.1", "--beta", "0.35"])

    path = lipmip_suite_path("lipmip_2-16-16-2")
    _run(f"Lap-Output on {path.name}: noise from the exact linf->l1 constant over the input domain [0,1]^2 (MILP)",
         ["calibrate", "lap-output", "--model", path, "--metric", "linf", "--radius", "0.05", "--epsilon", "1",
          "--lipschitz-method", "mip", "--domain", "0,1"])

    net = load_onnx(path, check=False)
    lip = global_lipschitz(net, "lipsdp-neuron")  # validated l2 certificate
    mech = GaussOutput(net, lip, epsilon=1.0, delta=1e-5, alpha=0.05)  # secure sampler (default): discrete Gaussian
    x = np.array([0.3, 0.7])
    print(f"\n== Python: Gauss-Output calibrated from a validated LipSDP-Neuron bound (L_2 <= {lip.upper:.6g})\n"
          f"deployed: {mech}\nf(x) = {np.round(net.forward(x), 4)}, released: {np.round(mech.release(x), 4)}")


def demo_global() -> None:
    from models.zoo import lipmip_suite_path

    path = lipmip_suite_path("lipmip_2-16-16-2")
    _run("Certified global Lipschitz bounds (product of norms, ECLipsE-Fast, LipSDP; validated in float64)",
         ["global", path, "--method", "all", "--input-norm", "linf", "--output-norm", "l1"])


def demo_lipschitz() -> None:
    from models.zoo import lipmip_suite_path

    path = lipmip_suite_path("lipmip_2-20-20-20-2")
    _run("Exact local Lipschitz constant of f_0 - f_1 over [0,1]^2 (LipMIP's 2-20-20-20-2 net; auto: the "
         "branch-and-bound over its two inputs, add --method milp for the MILP with its proof)",
         ["lipschitz", path, "--center", "0.5,0.5", "--radius", "0.5", "--margin", "0,1"])
    print("LipMIP's reference code reports 0.0969398 (Gurobi's dual bound at its default 1e-4 gap); its recorded "
          "time on a 2-core machine like this one is 2.1-2.3 s (recorded, not measured here: LipMIP is not installed)")


def demo_lipschitz_methods(methods: Sequence[str] = ("auto", "bab", "milp"), time_limit: float = 120.0) -> None:
    """The comparison line of the step above, measured in this run: the same question by each of
    certify's methods in turn (each certificate's own seconds, model already loaded)."""
    from certify.lipschitz import local_lipschitz
    from models import load_onnx
    from models.zoo import lipmip_suite_path

    net = load_onnx(lipmip_suite_path("lipmip_2-20-20-20-2"), check=False)
    print("\n== The same question by each method, measured now (certificate seconds)")
    rows = []
    for method in methods:
        cert = local_lipschitz(net, [0.5, 0.5], 0.5, margin=(0, 1), method=method, time_limit=time_limit)
        how = cert.method + (f" on {cert.backend}" if cert.backend != "none" else "")
        rows.append((method, cert.seconds, how, cert.status, cert.upper))
    best = min(r[1] for r in rows)
    for method, seconds, how, status, upper in rows:
        print(f"  --method {method:<5} {seconds:7.2f} s  ({seconds / best:.1f}x the fastest)  {how}, {status}, "
              f"upper {upper:.9g}")


def demo_robustness() -> None:
    from models.zoo import acasxu_path

    _run("Exact robustness radius of an ACAS Xu decision (MILP lower bound proven, counterexample replayed)",
         ["radius", acasxu_path(1, 1), "--point", "0.6,-0.3,0.1,0.4,0.2", "--time-limit", "60"])


def demo_verify() -> None:
    from models.zoo import acasxu_path, acasxu_property_path

    _run("Verify a VNN-COMP property (ACAS Xu N_1_9, property 1): unsat is a proof, sat a replayed counterexample",
         ["verify", acasxu_path(1, 9), acasxu_property_path(1), "--timeout", "60"])


def demo_ptr() -> None:
    from models.zoo import lipmip_suite_path

    _run("Propose-Test-Release of a query: R* from certified local Lipschitz bounds, then the test and release "
         "(seeded noise for a reproducible demo; the default is the secure sampler)",
         ["ptr", lipmip_suite_path("lipmip_2-16-16-2"), "--point", "0.3,0.7", "--radius", "0.05", "--epsilon", "1",
          "--delta", "1e-5", "--proposal", "0.5", "--domain", "0,1", "--seed", "1"])


STEPS = [demo_import, demo_lipschitz, demo_lipschitz_methods, demo_global, demo_robustness, demo_verify, demo_privacy, demo_ptr]


def main() -> None:
    for step in STEPS:
        step()


if __name__ == "__main__":
    main()
