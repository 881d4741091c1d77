"""linf robustness radii of MNIST-sized classifiers (issue 29): the certified interval after a time
limit, on VNN-COMP 2022 `mnist_fc` nets at real images.

    python -m benchmarks.radius_images --vnncomp-data DIR [--nets mnist-net_256x4,mnist-net_256x6]
                                       [--images 0,1,2] [--time-limit 60] [--tag now]

The image of `prop_<k>_0.03.vnnlib` is recovered from its input box [max(0, x - eps), min(1, x + eps)]
(x = hi - eps where the box is clipped at 0, else lo + eps). Per (net, image):
`certify.robustness_radius(..., norm="linf", domain=(0, 1))` and its lower and upper bounds, fast
bound, method, status and seconds; the property files' own answers from VNN-COMP 2022's truth
(eps 0.03 and 0.05: unsat means the radius exceeds eps, sat that it is at most eps) check both
bounds independently (a lower bound above a sat eps or an upper bound below an unsat eps would be
wrong, beyond the float rounding of the recovered image: counted as `contradictions`). Rows are appended to
benchmarks/results/radius_images.csv with `--tag` (e.g. the code version), and
radius_images.png plots every tag's intervals.
"""

from __future__ import annotations

import argparse
import csv
import time
from pathlib import Path

import numpy as np

from .results_csv import append_rows

FIELDS = ["tag", "net", "image", "time_limit", "lower", "upper", "fast_lower", "method", "status", "seconds",
          "truth_0.03", "truth_0.05", "contradictions"]


def _truth(folder: Path) -> dict[tuple[str, str], str]:
    with open(folder / "truth.csv", newline="") as f:
        return {(Path(r["onnx"]).stem, Path(r["vnnlib"]).stem): r["truth"] for r in csv.DictReader(f)}


def run(folder: Path, nets: list[str], images: list[int], time_limit: float, tag: str) -> list[dict]:
    import certify
    from certify.verify.vnnlib import load_vnnlib

    truth = _truth(folder)
    rows = []
    for net in nets:
        for k in images:
            box = load_vnnlib(folder / "vnnlib" / f"prop_{k}_0.03.vnnlib").disjuncts[0]
            x0 = np.clip(np.where(box.lo <= 0.0, box.hi - 0.03, box.lo + 0.03), 0.0, 1.0)
            t = time.perf_counter()
            cert = certify.robustness_radius(str(folder / "onnx" / f"{net}.onnx"), x0, norm="linf", domain=(0.0, 1.0),
                                             time_limit=time_limit)
            seconds = time.perf_counter() - t
            answers = {eps: truth.get((net, f"prop_{k}_{eps}"), "") for eps in ("0.03", "0.05")}
            upper = cert.upper if cert.upper is not None else np.inf
            slack = 1e-9  # (the recovered image's rounding)
            wrong = sum((a == "sat" and cert.lower > float(eps) + slack) or (a == "unsat" and upper < float(eps) - slack)
                        for eps, a in answers.items())
            rows.append({"tag": tag, "net": net, "image": k, "time_limit": time_limit, "lower": cert.lower,
                         "upper": cert.upper, "fast_lower": cert.fast_lower, "method": cert.method,
                         "status": cert.status, "seconds": round(seconds, 2), "truth_0.03": answers["0.03"],
                         "truth_0.05": answers["0.05"], "contradictions": wrong})
            print(rows[-1], flush=True)
    return rows


def plot(path: Path) -> None:
    import matplotlib
    import matplotlib.ticker

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    keys = sorted({(r["net"], int(r["image"])) for r in rows})
    tags = list(dict.fromkeys(r["tag"] for r in rows))
    fig, ax = plt.subplots(figsize=(8, 0.4 * len(keys) + 1.5))
    for j, tag in enumerate(tags):
        for i, key in enumerate(keys):
            for r in rows:
                if r["tag"] == tag and (r["net"], int(r["image"])) == key:
                    hi = float(r["upper"]) if r["upper"] not in ("", "None") else float(r["lower"])
                    y = i + 0.25 * (j - (len(tags) - 1) / 2)
                    ax.plot([float(r["lower"]), hi], [y, y], "-o", color=f"C{j}", label=tag if i == 0 else None)
    ax.set_yticks(range(len(keys)), [f"{n} img {k}" for n, k in keys])
    ax.set_xscale("log")
    ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.set_xlabel("linf radius: certified lower .. counterexample upper")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path.with_suffix(".png"), dpi=120)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--vnncomp-data", required=True)
    ap.add_argument("--nets", default="mnist-net_256x4,mnist-net_256x6")
    ap.add_argument("--images", default="0,1,2")
    ap.add_argument("--time-limit", type=float, default=60.0)
    ap.add_argument("--tag", default="now")
    args = ap.parse_args()
    folder = Path(args.vnncomp_data) / "mnist_fc"
    if not (folder / "truth.csv").is_file():
        raise SystemExit(f"{folder} holds no truth.csv: give --vnncomp-data the folder with mnist_fc/ "
                         "(onnx/, vnnlib/, truth.csv)")
    rows = run(folder, args.nets.split(","), [int(k) for k in args.images.split(",")], args.time_limit, args.tag)
    plot(append_rows("radius_images.csv", FIELDS, rows))
    if any(r["contradictions"] for r in rows):
        raise SystemExit("a bound contradicts VNN-COMP 2022's answer: please report")


if __name__ == "__main__":
    main()
