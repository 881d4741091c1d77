"""Utility vs privacy of the Inference Privacy mechanisms on a digits MLP, and of weight perturbation.

    python benchmarks/privacy_utility.py [--quick]     (from the repository root)

Writes to benchmarks/results/:
- privacy_utility.csv        accuracy (mean, std over repetitions) per mechanism, calibration, epsilon, alpha
- privacy_sigma_ratio.csv    analytic vs classic (and pac, zcdp) sigma for epsilon < 1
- privacy_classic_outside.csv true delta of the classic formula used at epsilon >= 1 (as in the IP paper)
- privacy_weights.csv        weight perturbation of the head (logistic / Laplace / Gaussian), empirical sensitivity
- privacy_secure.csv         secure (discrete, CSPRNG) vs numpy sampler: accuracy and release time
- privacy_summary.json       headline numbers; plots privacy_utility_*.png, privacy_sigma_ratio.png, privacy_weights.png

Lipschitz constants: the certified global upper bound of `certify.privacy.layer_product_bound`
(product of per-layer operator norms, minimised over intermediate norms): sound, and the only
certified bound available until the Lipschitz engines land. The largest Jacobian norm at the
test points (a lower bound, never used for calibration) is reported to show how loose it is.
Noise comes from a seeded numpy Generator (reproducible); the secure sampler is timed separately.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from certify.privacy import (GaussInput, GaussOutput, LapOutput, LogisticOutput, NumpySampler,  # noqa: E402
                             SecureSampler, analytic_sigma, classic_sigma, layer_product_bound, pac_sigma,
                             perturb_weights, sensitivity_sampler, utility_loss, zcdp_sigma)
from certify.privacy.gaussian import gaussian_delta  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"
DELTA = 1e-5
EPSILONS = (0.1, 0.2, 0.5, 0.9, 1.0, 2.0, 5.0, 10.0)
ALPHAS = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5)


def load_model(hidden=(32,), seed=0):
    import torch

    from models import from_torch
    from models.zoo.digits import digits_data, train_digits_mlp

    torch.set_num_threads(1)
    module = train_digits_mlp(tuple(hidden), seed)
    return module, from_torch(module, name=f"digits_{'-'.join(map(str, hidden))}"), digits_data()


def lipschitz_bounds(net, x):
    """Certified upper bounds (layer product) and, for scale, sampled lower bounds at the test points."""
    from solvers.norms import operator_norm

    jac = [net.jacobian(p) for p in x]
    return {
        "mu2": layer_product_bound(net, "l2", "l2"),
        "mu1": layer_product_bound(net, "l2", "l1"),
        "mu2_sampled_lower": max(operator_norm(j, "l2", "l2") for j in jac),
        "mu1_sampled_lower": max(operator_norm(j, "l2", "l1") for j in jac),
    }


def accuracy(outputs, labels):
    return float(np.mean(np.argmax(outputs, axis=-1) == labels))


def mechanism_grid(net, mu, epsilons, alphas):
    """(name, calibration, eps, alpha, factory(sampler)) for every valid combination."""
    for eps in epsilons:
        for alpha in alphas:
            yield "lap-output", "pure", eps, alpha, lambda s, e=eps, a=alpha: LapOutput(net, mu["mu1"], epsilon=e, alpha=a, sampler=s)
            yield "logistic-output", "pure", eps, alpha, lambda s, e=eps, a=alpha: LogisticOutput(net, mu["mu1"], epsilon=e, alpha=a, sampler=s)
            for cal in ("analytic", "classic", "pac"):
                if cal == "classic" and eps >= 1:
                    continue  # outside the classic formula's proof: refused by certify
                yield "gauss-output", cal, eps, alpha, lambda s, e=eps, a=alpha, c=cal: GaussOutput(
                    net, mu["mu2"], epsilon=e, delta=DELTA, alpha=a, calibration=c, sampler=s)
                if cal != "pac":
                    yield "gauss-input", cal, eps, alpha, lambda s, e=eps, a=alpha, c=cal: GaussInput(
                        net, epsilon=e, delta=DELTA, alpha=a, calibration=c, sampler=s)


def run_utility(net, data, mu, epsilons, alphas, reps, seed=0):
    import pandas as pd

    rows = []
    rng = np.random.default_rng(seed)
    for name, cal, eps, alpha, make in mechanism_grid(net, mu, epsilons, alphas):
        mech = make(NumpySampler(rng))
        accs = [accuracy(mech.release(data.x_test), data.y_test) for _ in range(reps)]
        rows.append(dict(mechanism=name, calibration=cal, epsilon=eps, delta=mech.guarantee.delta, alpha=alpha,
                         parameter=mech.noise.parameter, scale=mech.scale, sensitivity=mech.sensitivity,
                         acc_mean=float(np.mean(accs)), acc_std=float(np.std(accs)), reps=reps))
    return pd.DataFrame(rows)


def sigma_ratios(epsilons=(0.05, 0.1, 0.2, 0.3, 0.5, 0.7, 0.9, 0.99), deltas=(1e-3, 1e-5, 1e-8)):
    import pandas as pd

    rows = []
    for delta in deltas:
        for eps in epsilons:
            a, c, p, z = (analytic_sigma(eps, delta), classic_sigma(eps, delta), pac_sigma(eps, delta), zcdp_sigma(eps, delta))
            rows.append(dict(epsilon=eps, delta=delta, analytic=a, classic=c, pac=p, zcdp=z, analytic_over_classic=a / c,
                             pac_over_analytic=p / a, zcdp_over_analytic=z / a))
    return pd.DataFrame(rows)


def classic_outside_range(epsilons=(1.0, 2.0, 5.0, 10.0, 20.0), delta=DELTA):
    """The IP paper uses the classic formula at epsilon up to 10: its true delta there (exact curve)."""
    import pandas as pd

    rows = []
    for eps in epsilons:
        sigma = math.sqrt(2 * math.log(1.25 / delta)) / eps
        rows.append(dict(epsilon=eps, claimed_delta=delta, classic_sigma=sigma, analytic_sigma=analytic_sigma(eps, delta),
                         true_delta=gaussian_delta(sigma, eps, 1.0)))
    out = pd.DataFrame(rows)
    out["violates"] = out.true_delta > out.claimed_delta
    return out


def run_secure(net, data, mu, eps=1.0, alpha=0.05, reps=3):
    import pandas as pd

    rows = []
    for label, make_sampler in (("numpy", lambda: NumpySampler(0)), ("secure", SecureSampler)):
        for name, mech in (("lap-output", LapOutput(net, mu["mu1"], epsilon=eps, alpha=alpha, sampler=make_sampler())),
                           ("gauss-output", GaussOutput(net, mu["mu2"], epsilon=eps, delta=DELTA, alpha=alpha, sampler=make_sampler()))):
            t = time.perf_counter()
            accs = [accuracy(mech.release(data.x_test), data.y_test) for _ in range(reps)]
            dt = (time.perf_counter() - t) / reps
            rows.append(dict(sampler=label, mechanism=name, calibration=mech.calibration.calibration, epsilon=eps,
                             alpha=alpha, scale=mech.scale, acc_mean=float(np.mean(accs)),
                             release_ms_per_query=1e3 * dt / len(data.x_test)))
    return pd.DataFrame(rows)


def run_weights(module, data, pairs, reps, epsilons=(0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 50.0), seed=0):
    """Perturb the head (last Linear) retrained on frozen features; sensitivity from the sampler (empirical)."""
    import copy

    import pandas as pd
    import torch

    body = module[:-1]
    with torch.no_grad():
        feats = body(torch.as_tensor(data.x_train, dtype=torch.float32)).double().numpy()
        feats_test = body(torch.as_tensor(data.x_test, dtype=torch.float32)).double()
    head_in, head_out = module[-1].in_features, module[-1].out_features

    def train_head(x, y):
        head = torch.nn.Linear(head_in, head_out).double()
        with torch.no_grad():
            head.weight.zero_()
            head.bias.zero_()
        X, Y = torch.as_tensor(x), torch.as_tensor(y, dtype=torch.long)
        opt = torch.optim.LBFGS(head.parameters(), lr=1.0, max_iter=500, tolerance_grad=1e-9, tolerance_change=1e-12,
                                line_search_fn="strong_wolfe")

        def closure():
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(head(X), Y) + 1e-2 * head.weight.pow(2).sum()
            loss.backward()
            return loss

        opt.step(closure)
        return head

    t = time.perf_counter()
    sens = sensitivity_sampler(train_head, feats, data.y_train, pairs=pairs, seed=seed)
    sampler_seconds = time.perf_counter() - t
    head = train_head(feats, data.y_train)
    model = copy.deepcopy(module).double()
    model[-1] = head

    def acc(m):
        with torch.no_grad():
            return accuracy(m[-1](feats_test).numpy(), data.y_test)

    clean = acc(model)
    rows = []
    rng = np.random.default_rng(seed)
    for eps in epsilons:
        for family in ("logistic", "laplace", "gaussian"):
            delta = DELTA if family == "gaussian" else None
            accs = []
            for _ in range(reps):
                rel = perturb_weights(model, epsilon=eps, delta=delta, sensitivity=sens, family=family, sampler=NumpySampler(rng))
                accs.append(acc(rel.module))
            rows.append(dict(family=family, epsilon=eps, delta=delta or 0.0, scale=rel.mechanism.scale,
                             sensitivity=rel.mechanism.sensitivity, basis="empirical", clean_acc=clean,
                             acc_mean=float(np.mean(accs)), utility_loss=utility_loss(float(np.mean(accs)), clean)))
    return pd.DataFrame(rows), sens, sampler_seconds


def plot(utility, ratios, weights, outdir, alpha_fixed=0.05, eps_fixed=1.0):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    styles = {("lap-output", "pure"): "C0-o", ("logistic-output", "pure"): "C4-v", ("gauss-output", "analytic"): "C1-s",
              ("gauss-output", "classic"): "C1--x", ("gauss-output", "pac"): "C1:+", ("gauss-input", "analytic"): "C2-^",
              ("gauss-input", "classic"): "C2--x"}
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for (name, cal), style in styles.items():
        sel = utility[(utility.mechanism == name) & (utility.calibration == cal)]
        a = sel[sel.alpha == alpha_fixed].sort_values("epsilon")
        axes[0].plot(a.epsilon, a.acc_mean, style, label=f"{name} ({cal})")
        b = sel[sel.epsilon == eps_fixed].sort_values("alpha")
        if len(b):
            axes[1].plot(b.alpha, b.acc_mean, style, label=f"{name} ({cal})")
    axes[0].set(xscale="log", xlabel="epsilon", ylabel="test accuracy", title=f"digits MLP, alpha = {alpha_fixed} (l2), delta = {DELTA:g}")
    axes[1].set(xscale="log", xlabel="alpha (l2 radius)", ylabel="test accuracy", title=f"epsilon = {eps_fixed:g}")
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(outdir / "privacy_utility.png", dpi=120)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(5.5, 3.8))
    for delta, sel in ratios.groupby("delta"):
        ax.plot(sel.epsilon, sel.analytic_over_classic, "-o", label=f"delta = {delta:g}")
    ax.set(xlabel="epsilon", ylabel="sigma analytic / sigma classic", title="noise saved by the analytic calibration")
    ax.legend()
    fig.tight_layout()
    fig.savefig(outdir / "privacy_sigma_ratio.png", dpi=120)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(5.5, 3.8))
    for family, sel in weights.groupby("family"):
        ax.plot(sel.epsilon, sel.utility_loss, "-o", label=family)
    ax.set(xscale="log", xlabel="epsilon (EMPIRICAL sensitivity)", ylabel="utility loss 1 - acc/acc_clean",
           title="head weight perturbation")
    ax.legend()
    fig.tight_layout()
    fig.savefig(outdir / "privacy_weights.png", dpi=120)
    plt.close(fig)


def summarise(utility, ratios, outside, weights, secure, mu, sens, sampler_seconds):
    """Headline numbers: analytic vs classic (sigma and accuracy), the classic formula outside its range, ALM."""
    both = utility[(utility.mechanism == "gauss-output") & utility.calibration.isin(["analytic", "classic"])]
    pivot = both.pivot_table(index=["epsilon", "alpha"], columns="calibration", values=["acc_mean", "scale"]).dropna()
    gain = (pivot["acc_mean"]["analytic"] - pivot["acc_mean"]["classic"])
    gi = utility[(utility.mechanism == "gauss-input") & utility.calibration.isin(["analytic", "classic"])]
    gpivot = gi.pivot_table(index=["epsilon", "alpha"], columns="calibration", values="acc_mean").dropna()
    r5 = ratios[ratios.delta == DELTA]
    return {
        "lipschitz": {k: (v.value if hasattr(v, "value") else v) for k, v in mu.items()},
        "sigma_analytic_over_classic_delta_1e-5": {f"{e:g}": round(float(r), 4) for e, r in zip(r5.epsilon, r5.analytic_over_classic)},
        "gauss_output_accuracy_gain_analytic_minus_classic": {
            "mean": float(gain.mean()), "max": float(gain.max()),
            "at_max": [float(v) for v in gain.idxmax()],
        },
        "gauss_input_accuracy_gain_analytic_minus_classic": {
            "mean": float((gpivot["analytic"] - gpivot["classic"]).mean()),
            "max": float((gpivot["analytic"] - gpivot["classic"]).max()),
        },
        "classic_outside_range": outside[["epsilon", "true_delta", "violates"]].to_dict("records"),
        "weights": {"empirical_sensitivity_l1": sens.l1, "empirical_sensitivity_l2": sens.l2, "pairs": sens.pairs,
                    "per_pair_l1_median": float(np.median(sens.per_pair_l1)), "per_pair_l1_min": float(min(sens.per_pair_l1)),
                    "sampler_seconds": sampler_seconds,
                    "utility_loss": weights[["family", "epsilon", "utility_loss"]].to_dict("records")},
        "secure_vs_numpy": secure.to_dict("records"),
    }


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer settings and repetitions (for the notebook / smoke runs)")
    parser.add_argument("--out", default=str(RESULTS))
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    reps, pairs = (3, 6) if args.quick else (10, 20)
    epsilons = (0.1, 0.5, 0.9, 1.0, 5.0) if args.quick else EPSILONS
    alphas = (0.01, 0.05, 0.2) if args.quick else ALPHAS

    t0 = time.perf_counter()
    module, net, data = load_model()
    mu = lipschitz_bounds(net, data.x_test[:200])
    print(f"model {net.name}: clean test accuracy {accuracy(net.forward(data.x_test), data.y_test):.4f}")
    print(f"certified mu_2 (l2->l2) <= {mu['mu2'].value:.4f} [sampled lower {mu['mu2_sampled_lower']:.4f}]; "
          f"mu_1 (l2->l1) <= {mu['mu1'].value:.4f} [sampled lower {mu['mu1_sampled_lower']:.4f}]")
    utility = run_utility(net, data, mu, epsilons, alphas, reps)
    ratios = sigma_ratios()
    outside = classic_outside_range()
    secure = run_secure(net, data, mu)
    weights, sens, sampler_seconds = run_weights(module, data, pairs, reps)
    for name, frame in (("privacy_utility", utility), ("privacy_sigma_ratio", ratios), ("privacy_classic_outside", outside),
                        ("privacy_weights", weights), ("privacy_secure", secure)):
        frame.to_csv(out / f"{name}.csv", index=False)
    plot(utility, ratios, weights, out)
    summary = summarise(utility, ratios, outside, weights, secure, mu, sens, sampler_seconds)
    summary["seconds"] = time.perf_counter() - t0
    (out / "privacy_summary.json").write_text(json.dumps(summary, indent=1, default=float))
    print(json.dumps({k: summary[k] for k in ("sigma_analytic_over_classic_delta_1e-5",
                                               "gauss_output_accuracy_gain_analytic_minus_classic",
                                               "gauss_input_accuracy_gain_analytic_minus_classic")}, indent=1))
    print(f"wrote {out}/privacy_*.csv and plots in {summary['seconds']:.1f}s")
    return summary


if __name__ == "__main__":
    main()
