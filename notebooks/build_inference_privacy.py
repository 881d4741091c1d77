"""Build and execute notebooks/inference_privacy.ipynb (nbformat + nbclient).

    python notebooks/build_inference_privacy.py        (from the repository root)

Inference privacy end to end on a digits MLP: certify the Lipschitz constants the mechanisms need,
calibrate noise from the certificates, release noisy predictions, accuracy vs epsilon, accounting
(chaining, composition), and the comparison of Gaussian calibrations with a reduced utility grid of
`benchmarks/privacy_utility.py` (formerly notebooks/privacy_utility.ipynb). Its cells assert what
they show (sampled Jacobian norms below every certified bound, sigma against the exact Gaussian
privacy curve, chained delta against the closed form), so `tests/test_notebooks.py` re-executing it
(quick settings) is a test.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the shared builder helpers (notebooks/_notebook.py)

from _notebook import CLI_HELPER, builder, code, md  # noqa: E402

cells = [
    md("# Inference privacy, end to end\n\n"
       "A model answers queries `x` that are themselves sensitive (a medical record, a photo). **Inference "
       "Privacy** (Tian & Tandon) protects the query: a mechanism M is {(eps, delta), alpha}-IP in a metric d "
       "when, for any two inputs a, b with d(a, b) <= alpha and any set S of outputs,\n\n"
       "    P[M(a) in S] <= e^eps P[M(b) in S] + delta,\n\n"
       "so an observer of the answer cannot tell the query from any input within alpha of it. Output perturbation "
       "releases f(x) + noise with a scale proportional to **L alpha / eps**, where L is a Lipschitz constant of "
       "the model from the metric d to the noise's norm.\n\n"
       "Everything rests on L. If it is *under*-estimated by 10%, the noise is 10% too small and the stated "
       "guarantee is simply false, with nothing to show it. So L must be a **certified upper bound**, never a "
       "sampled estimate. This notebook runs the whole chain on a small MLP trained on scikit-learn's digits:\n\n"
       "1. certify the constants each mechanism needs, and check them against sampled lower bounds;\n"
       "2. calibrate noise from the certificates (and see what certify refuses);\n"
       "3. release noisy predictions, with the hardened sampler;\n"
       "4. accuracy vs epsilon: what the guarantee costs, and what a tighter certificate buys;\n"
       "5. accounting: chaining to a larger radius, composing releases;\n"
       "6. which Gaussian calibration (analytic, classic, PAC, zCDP), with a reduced grid of the utility "
       "benchmark `benchmarks/privacy_utility.py`.\n\n"
       "Each step shows the `certify` command that does the same (run here with `--json`)."),
    code("import os\n"
         "# tests/test_notebooks.py runs this notebook with CERTIFY_NOTEBOOK_QUICK=1 (smaller settings, ~20 s);\n"
         "# the committed copy is the full run.\n"
         "QUICK = os.environ.get('CERTIFY_NOTEBOOK_QUICK') == '1'\n"
         "HIDDEN = (32, 32)                      # the digits MLP 64 -> 32 -> 32 -> 10\n"
         "ALPHA, DELTA = 0.05, 1e-5              # protected l2 radius of a query; delta of the Gaussian mechanisms\n"
         "METHODS = ('naive', 'eclipse-fast', 'lipsdp-layer') + (() if QUICK else ('lipsdp-neuron',))\n"
         "CLI_METHOD = 'lipsdp-layer' if QUICK else 'all'\n"
         "EPSILONS = (0.5, 2.0, 10.0) if QUICK else (0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0)\n"
         "REPS = 1 if QUICK else 10              # noisy passes over the test set per point of the curves\n"
         "SECURE_QUERIES = 100 if QUICK else 1000\n"
         "LOCAL_RADIUS = 0.01                    # l_inf box of the local certificate (section 3)\n"
         "GRID = (dict(epsilons=(0.5, 2.0), alphas=(0.05,), reps=1) if QUICK else\n"
         "        dict(epsilons=(0.2, 0.5, 0.9, 2.0, 10.0), alphas=(0.02, 0.05), reps=3))"),
    code("import copy, dataclasses, itertools, json, math, subprocess, sys, tempfile\nfrom pathlib import Path\n"
         "import numpy as np, pandas as pd, torch\n"
         "import certify\n"
         "from certify.privacy import GaussInput, GaussOutput, Guarantee, LapOutput, NumpySampler, calibrate, chain, compose\n"
         "from models.errors import BadInput\nfrom models.onnx_export import save_onnx\n"
         "from models.zoo.digits import digits_data, train_digits_mlp\n"
         "sys.path.insert(0, str(Path.cwd().parent / 'benchmarks'))\n"
         "import privacy_utility as bench        # the utility benchmark; section 6 runs a reduced grid of it\n"
         "pd.set_option('display.precision', 4); pd.set_option('display.width', 160)\n"
         + CLI_HELPER),

    md("## The model\n"
       "A 64-32-32-10 ReLU MLP trained on the digits (pixels in [0, 1]) by `models.zoo.digits.train_digits_mlp`: "
       "deterministic (fixed seed, one thread). `certify.from_torch` turns it into certify's float64 IR, checked "
       "against the torch forward; the ONNX export is for the command line."),
    code("module = train_digits_mlp(HIDDEN, seed=0)\n"
         "net = certify.from_torch(module, name='digits_64_32_32_10')\ndata = digits_data()\n"
         "clean_acc = float(np.mean(net(data.x_test).argmax(1) == data.y_test))\n"
         "save_onnx(net, WORK / 'digits.onnx')\n"
         "print(f'{net.name}: {net.describe()[\"relu_count\"]} ReLUs, clean test accuracy {clean_acc:.4f} '\n"
         "      f'on {len(data.x_test)} test images')"),

    md("## 1. Certify the constants the mechanisms need\n\n"
       "| mechanism | release | sensitivity | constant needed |\n|---|---|---|---|\n"
       "| Gauss-Output | f(x) + N(0, sigma^2 I) | mu_2 alpha (l2) | mu_2: l2 (metric) -> l2 |\n"
       "| Lap-Output | f(x) + Lap(b) per logit | mu_1 alpha (l1) | mu_1: l2 (metric) -> l1 |\n"
       "| Gauss-Input | f(x + N(0, sigma^2 I)) | alpha | none: the model post-processes private noise |\n\n"
       "Global bounds hold for every input, so the mechanism needs no assumption on where queries come from. "
       "`certify.global_lipschitz` offers several methods (each a proven upper bound, status `certified`; "
       "`fallback` if part of an SDP bound had to be replaced by a norm product): the product of layer norms "
       "(`naive`), ECLipsE-Fast, and LipSDP-Layer / -Neuron, whose SDP multipliers are re-proven by a float64 "
       "Cholesky certificate outside the solver (the solver's objective is never the answer). The SDP methods "
       "bound l2 -> l2; for l2 -> l1 they pay a factor sqrt(10) of norm equivalence, so the norm product can win.\n\n"
       "The check: Jacobian norms at the test images and at random points of [0, 1]^64, computed with torch "
       "autograd (not certify), are lower bounds of the true constant; every certified upper bound must be above "
       "them. Their ratio is what each bound over-pays."),
    code("l2 = {m: certify.global_lipschitz(net, m) for m in METHODS}                                    # l2 -> l2\n"
         "l1 = {m: certify.global_lipschitz(net, m, input_norm='l2', output_norm='l1') for m in METHODS}   # l2 -> l1\n"
         "best2, best1 = (min(d.values(), key=lambda r: r.upper) for d in (l2, l1))\n\n"
         "m64 = copy.deepcopy(module).double()\nrng = np.random.default_rng(0)\n"
         "points = np.vstack([data.x_test, rng.uniform(0, 1, (2000, 64))])\n"
         "J = torch.func.vmap(torch.func.jacrev(m64))(torch.as_tensor(points)).detach().numpy()   # (n, 10, 64)\n"
         "SIGNS = np.array(list(itertools.product([-1.0, 1.0], repeat=10)))\n"
         "low2 = np.linalg.norm(J, 2, axis=(1, 2)).max()                                 # spectral norm\n"
         "low1 = max(np.linalg.norm(SIGNS @ j, axis=-1).max() for j in J)               # ||J||_{2->1} = max_s ||J^T s||_2\n"
         "assert all(r.certified and r.status in ('certified', 'fallback') for r in [*l2.values(), *l1.values()])\n"
         "assert all(r.upper >= low2 for r in l2.values()) and all(r.upper >= low1 for r in l1.values())\n"
         "pd.DataFrame([{'method': m, 'mu_2 (l2->l2)': l2[m].upper, 'mu_2 / sampled': l2[m].upper / low2,\n"
         "               'mu_1 (l2->l1)': l1[m].upper, 'mu_1 / sampled': l1[m].upper / low1, 'status': l2[m].status,\n"
         "               'seconds': round(l2[m].seconds + l1[m].seconds, 2)} for m in METHODS]).set_index('method')"),
    code("g = cli('global', WORK / 'digits.onnx', '--method', CLI_METHOD)\n"
         "res = g['best'] if CLI_METHOD == 'all' else g\n"
         "assert np.isclose(res['upper'], l2[res['method']].upper, rtol=1e-6)\n"
         "{k: res[k] for k in ('method', 'upper', 'status', 'scope', 'input_norm', 'output_norm')}"),

    md("## 2. Calibrate the noise from the certificate\n\n"
       "`certify.privacy.calibrate` takes the certificate itself (not a bare number): it reads its `upper`, "
       "checks that it is certified and that its norms match the mechanism, and records where it came from in "
       "the calibration and in every guarantee derived from it. For Gauss-Output at eps = 1: sensitivity "
       "D = mu_2 alpha, and the **analytic** calibration (Balle & Wang 2018) gives the smallest sigma whose exact "
       "privacy curve reaches delta. We check sigma against that curve, written out here with scipy."),
    code("from scipy.stats import norm\n"
         "def exact_delta(sigma, eps, D):   # Balle & Wang 2018, Thm 8: the delta of N(0, sigma^2) noise at l2 sensitivity D\n"
         "    return norm.cdf(D / (2 * sigma) - eps * sigma / D) - math.exp(eps) * norm.cdf(-D / (2 * sigma) - eps * sigma / D)\n\n"
         "cal = calibrate('gauss-output', epsilon=1.0, delta=DELTA, lipschitz=best2, radius=ALPHA)\n"
         "assert cal.sensitivity >= best2.upper * ALPHA\n"
         "assert exact_delta(cal.scale, 1.0, cal.sensitivity) <= DELTA < exact_delta(cal.scale * (1 - 1e-4), 1.0, cal.sensitivity)\n"
         "lap = calibrate('lap-output', epsilon=1.0, lipschitz=best1, radius=ALPHA)\n"
         "assert lap.scale >= best1.upper * ALPHA / 1.0\n"
         "pd.DataFrame([{'mechanism': c.mechanism, 'calibration': c.calibration, 'L (certified)': c.lipschitz.value,\n"
         "               'certified by': c.lipschitz.method, 'sensitivity': c.sensitivity,\n"
         "               'noise': f\"{c.to_dict()['parameter']} = {c.scale:.4f}\"} for c in (cal, lap)])"),
    md("The command line certifies the constant itself from the ONNX file (`--model`, with the method of your "
       "choice) and prints the same calibration, with the certificate recorded in its JSON:"),
    code("c = cli('calibrate', 'gauss-output', '--model', WORK / 'digits.onnx', '--lipschitz-method', 'lipsdp-layer',\n"
         "        '--epsilon', 1, '--delta', DELTA, '--radius', ALPHA)\n"
         "same = calibrate('gauss-output', epsilon=1.0, delta=DELTA, lipschitz=l2['lipsdp-layer'], radius=ALPHA)\n"
         "assert np.isclose(c['scale'], same.scale, rtol=1e-9)\n"
         "{k: c[k] for k in ('mechanism', 'scale', 'parameter', 'sensitivity', 'calibration')} | "
         "{'lipschitz': {k: c['lipschitz'][k] for k in ('value', 'origin', 'method')}}"),
    md("What certify refuses, each with a message saying what to do instead. A plain number is accepted but "
       "recorded with origin `user`: certify cannot verify it, and the guarantee is then only as good as your number."),
    code("attempts = {\n"
         "    'classic Gaussian at epsilon = 2 (proven for epsilon < 1 only)': lambda: calibrate(\n"
         "        'gauss-output', epsilon=2.0, delta=DELTA, lipschitz=best2, radius=ALPHA, calibration='classic'),\n"
         "    'a result that is not certified': lambda: GaussOutput(\n"
         "        net, dataclasses.replace(best2, certified=False), epsilon=1.0, delta=DELTA, alpha=ALPHA),\n"
         "    'an l2-output constant for Lap-Output (needs l1)': lambda: LapOutput(net, best2, epsilon=1.0, alpha=ALPHA),\n"
         "    'epsilon = 0': lambda: GaussOutput(net, best2, epsilon=0.0, delta=DELTA, alpha=ALPHA),\n"
         "}\nrefused = {}\nfor what, attempt in attempts.items():\n"
         "    try:\n        attempt()\n    except BadInput as exc:\n        refused[what] = str(exc)\n"
         "assert refused.keys() == attempts.keys()\n"
         "for what, why in refused.items():\n    print(f'{what}:\\n    {why}')\n"
         "print('a bare number:', GaussOutput(net, 60.0, epsilon=1.0, delta=DELTA, alpha=ALPHA).guarantee.lipschitz.origin)"),

    md("## 3. Release noisy predictions\n\n"
       "`GaussOutput(net, certificate, ...)` is the mechanism: `release(x)` answers one query or a batch (one "
       "guarantee per row: each query is protected on its own), `guarantee` is a value the accounting composes. "
       "By default noise comes from the **secure** sampler: exact discrete Gaussian noise from the OS CSPRNG on a "
       "power-of-two grid (textbook floating-point noise leaks, Mironov 2012). The discrete Gaussian is calibrated "
       "through zCDP, so its sigma is a few percent above the analytic one of section 2; `repr` and the notes say "
       "so. Secure noise is not seeded: the numbers of this cell change between runs."),
    code("mech = GaussOutput(net, best2, epsilon=1.0, delta=DELTA, alpha=ALPHA)\n"
         "print(repr(mech))\nprint('guarantee:', mech.guarantee.describe())\n"
         "queries = data.x_test[:SECURE_QUERIES]\nnoisy = mech.release(queries)\n"
         "noise = noisy - net(queries)\n"
         "assert abs(noise.std() / mech.scale - 1) < 0.1   # the noise has the calibrated scale\n"
         "print(f'{len(queries)} queries: empirical noise std / sigma = {noise.std() / mech.scale:.3f}; '\n"
         "      f'noisy argmax = clean argmax on {np.mean(noisy.argmax(1) == net(queries).argmax(1)):.1%}')"),
    md("For experiments, a seed (or `sampler=NumpySampler(...)`) gives reproducible continuous noise with the "
       "analytic sigma; it is not hardened, so do not deploy it. One query, clean and released:"),
    code("seeded = GaussOutput(net, best2, epsilon=1.0, delta=DELTA, alpha=ALPHA, sampler=NumpySampler(0))\n"
         "x = data.x_test[0]\n"
         "print(f'sigma: secure (zcdp) {mech.scale:.4f}, seeded numpy (analytic) {seeded.scale:.4f}')\n"
         "pd.DataFrame({'clean logits': net(x), 'released (seeded)': seeded.release(x)}).T.round(2)"),
    md("### A certificate that holds on a box only\n"
       "A local certificate (`certify.local_lipschitz`, notebook `certify_model.ipynb`) is much smaller than a "
       "global bound, but it says nothing outside its box. A mechanism built from it records the box and "
       "**refuses** to release for inputs outside it (clip or reject such inputs yourself, or certify a domain "
       "that contains them). Here: the l_inf -> l1 constant on x +/- LOCAL_RADIUS, for Lap-Output in the l_inf "
       "metric."),
    code("local = certify.local_lipschitz(net, x, LOCAL_RADIUS, domain=(0, 1), input_norm='linf', output_norm='l1')\n"
         "glob_inf = certify.global_lipschitz(net, 'naive', input_norm='linf', output_norm='l1')\n"
         "lap_local = LapOutput(net, local, epsilon=1.0, alpha=LOCAL_RADIUS, metric='linf', sampler=NumpySampler(0))\n"
         "lap_global = LapOutput(net, glob_inf, epsilon=1.0, alpha=LOCAL_RADIUS, metric='linf', sampler=NumpySampler(0))\n"
         "assert local.upper <= glob_inf.upper and lap_local.scale <= lap_global.scale\n"
         "lap_local.release(x)                       # inside the box: released\n"
         "try:\n    lap_local.release(data.x_test[1])   # another image: outside the box\n"
         "    raise AssertionError('released outside the certified box')\n"
         "except BadInput as exc:\n    print('refused:', exc)\n"
         "pd.DataFrame([{'certificate': f'local, {local.status}', 'L (linf -> l1)': local.upper, 'Laplace b': lap_local.scale},\n"
         "              {'certificate': 'global (naive)', 'L (linf -> l1)': glob_inf.upper, 'Laplace b': lap_global.scale}])"),

    md("## 4. Accuracy vs epsilon\n\n"
       "The cost of the guarantee: test accuracy of the released (noisy) predictions at alpha = 0.05 in l2 "
       "(delta = 1e-5 for the Gaussian mechanisms), averaged over noisy passes over the test set (seeded numpy "
       "noise, reproducible). Two Gauss-Output curves differ only in the certificate behind them: the product of "
       "layer norms and the tightest certified bound. Same guarantee, less noise."),
    code("rng = np.random.default_rng(0)\n"
         "def accuracy(mech):\n"
         "    return float(np.mean([np.mean(mech.release(data.x_test).argmax(1) == data.y_test) for _ in range(REPS)]))\n\n"
         "curves = {\n"
         "    'Gauss-Output, L = naive': lambda e: GaussOutput(net, l2['naive'], epsilon=e, delta=DELTA, alpha=ALPHA,\n"
         "                                                      sampler=NumpySampler(rng)),\n"
         "    f'Gauss-Output, L = {best2.method}': lambda e: GaussOutput(net, best2, epsilon=e, delta=DELTA, alpha=ALPHA,\n"
         "                                                               sampler=NumpySampler(rng)),\n"
         "    f'Lap-Output, L = {best1.method}': lambda e: LapOutput(net, best1, epsilon=e, alpha=ALPHA, sampler=NumpySampler(rng)),\n"
         "    'Gauss-Input': lambda e: GaussInput(net, epsilon=e, delta=DELTA, alpha=ALPHA, sampler=NumpySampler(rng)),\n"
         "}\n"
         "rows = []\nfor name, make in curves.items():\n    for eps in EPSILONS:\n        m = make(eps)\n"
         "        rows.append({'mechanism': name, 'epsilon': eps, 'scale': m.scale, 'accuracy': accuracy(m)})\n"
         "acc = pd.DataFrame(rows)\n"
         "scales = acc.pivot(index='epsilon', columns='mechanism', values='scale')\n"
         "assert (scales[f'Gauss-Output, L = {best2.method}'] <= scales['Gauss-Output, L = naive']).all()\n"
         "acc.pivot(index='epsilon', columns='mechanism', values='accuracy').round(3)"),
    code("%matplotlib inline\nimport matplotlib.pyplot as plt\n"
         "fig, ax = plt.subplots(figsize=(7, 4.2))\n"
         "for name, sel in acc.groupby('mechanism', sort=False):\n"
         "    ax.plot(sel.epsilon, sel.accuracy, '--x' if 'naive' in name else '-o', ms=4, label=name)\n"
         "ax.axhline(clean_acc, color='grey', lw=0.8, ls=':', label=f'no noise ({clean_acc:.3f})')\n"
         "ax.set(xscale='log', xlabel='epsilon', ylabel='test accuracy of released predictions', ylim=(0, 1.02),\n"
         "       title=f'{net.name}: alpha = {ALPHA} (l2), delta = {DELTA:g}')\n"
         "ax.legend(fontsize=8); plt.tight_layout(); plt.show()"),
    md("Reading: accuracy climbs from chance to the clean accuracy as epsilon grows. The tighter certificate moves "
       "the Gauss-Output curve left (the same accuracy at a smaller epsilon) at no cost in the guarantee; how far "
       "depends on how loose the norm product is for the network (the deeper the network, the looser). "
       "Gauss-Input needs no Lipschitz constant at all and, with these constants, beats noise on the logits: "
       "noise of scale alpha on 64 pixels barely moves a confident digit."),

    md("## 5. Accounting: larger radii, repeated queries\n\n"
       "A mechanism that protects radius alpha also protects a larger radius beta, at a price (**chaining**): "
       "h = ceil(beta / alpha) steps give eps' = h eps and delta' = delta (e^{h eps} - 1) / (e^eps - 1). The IP "
       "paper's proposition states h delta; its own proof gives this larger value, which is what certify uses. "
       "Releases compose: answering k queries about the same input spends (sum eps, sum delta)."),
    code("at = mech.guarantee_at(0.2)                 # protect l2 radius 0.2 with the alpha = 0.05 mechanism: h = 4\n"
         "h = math.ceil(0.2 / ALPHA)\nclosed_form = DELTA * (math.exp(h * 1.0) - 1) / (math.exp(1.0) - 1)\n"
         "assert at.epsilon == h * 1.0 and closed_form <= at.delta <= closed_form * (1 + 1e-12)\n"
         "twice = compose(mech.guarantee, mech.guarantee)\n"
         "pd.DataFrame([{'guarantee': 'one release, alpha = 0.05', **mech.guarantee.to_dict()},\n"
         "              {'guarantee': 'one release, chained to 0.2', **at.to_dict()},\n"
         "              {'guarantee': 'two releases, alpha = 0.05', **twice.to_dict()}]\n"
         "            )[['guarantee', 'epsilon', 'delta', 'alpha', 'metric', 'basis', 'mechanism']]"),
    md("The example of the docs, an {(1, 1e-5), 0.1} mechanism chained to radius 0.35 (h = 4): the proof's delta, "
       "not the statement's 4 delta."),
    code("chained = chain(Guarantee(1.0, 1e-5, 0.1, 'l2'), 0.35)\n"
         "c = cli('chain', '--epsilon', 1, '--delta', 1e-5, '--alpha', 0.1, '--beta', 0.35)\n"
         "assert c['delta'] == chained.delta and c['steps'] == 4\nc"),

    md("## 6. Which Gaussian calibration\n\n"
       "`certify calibrate gaussian --epsilon 1 --delta 1e-5 --sensitivity 1` in Python:"),
    code("calibrate('gaussian', epsilon=1.0, delta=1e-5, sensitivity=1.0).to_dict()"),
    md("Analytic (Balle & Wang, exact) vs classic (Dwork & Roth, epsilon < 1 only) vs PAC (Zheng & Hu Thm 4) "
       "vs zCDP (used by the secure discrete Gaussian), sensitivity 1:"),
    code("ratios = bench.sigma_ratios(epsilons=(0.1, 0.3, 0.5, 0.9), deltas=(1e-5,))\n"
         "assert (ratios.analytic_over_classic < 1).all()\nratios"),
    md("The Inference Privacy paper applies the classic formula up to epsilon = 10. Outside epsilon < 1 it is "
       "not proven, and at epsilon >= 10 its true delta (exact curve) exceeds the claimed 1e-5; certify refuses it:"),
    code("outside = bench.classic_outside_range()\n"
         "assert outside[outside.epsilon >= 10].violates.all()\noutside"),
    md("### Utility grid (reduced)\n"
       "Every mechanism and calibration of the benchmark on this model, with the certified bounds of section 1 "
       "(`mu_2` = the best l2 -> l2 bound, `mu_1` = the best l2 -> l1 bound), numpy noise with a fixed seed:"),
    code("util = bench.run_utility(net, data, {'mu2': best2, 'mu1': best1}, **GRID)\n"
         "util.pivot_table(index=['alpha', 'epsilon'], columns=['mechanism', 'calibration'], values='acc_mean').round(3)"),
    code("fig, ax = plt.subplots(figsize=(6, 4))\n"
         "for (m, c), sel in util[util.alpha == 0.05].groupby(['mechanism', 'calibration']):\n"
         "    ax.plot(sel.epsilon, sel.acc_mean, '--x' if c == 'classic' else '-o', label=f'{m} ({c})')\n"
         "ax.set(xscale='log', xlabel='epsilon', ylabel='test accuracy', title=f'alpha = 0.05 (l2), delta = {DELTA:g}')\n"
         "ax.legend(fontsize=7); plt.show()"),
    md("Analytic minus classic accuracy (same epsilon, alpha; epsilon < 1 where classic applies): the analytic "
       "sigma is smaller for the same guarantee, so accuracy can only gain (up to noise):"),
    code("g = util[util.calibration.isin(['analytic', 'classic'])].pivot_table(index=['mechanism', 'epsilon', 'alpha'], "
         "columns='calibration', values='acc_mean').dropna()\ng['gain'] = g.analytic - g.classic\ng.round(3)"),
    md("The full benchmark (`python benchmarks/privacy_utility.py`: 8 epsilons x 6 radii x 10 repetitions on a "
       "64-32-10 model with the layer-product bound, weight perturbation with an empirical sensitivity, secure vs "
       "numpy sampler) writes `benchmarks/results/privacy_*.csv` and `docs/privacy.md` discusses it; its summary:"),
    code("summary = json.loads((Path.cwd().parent / 'benchmarks/results/privacy_summary.json').read_text())\n"
         "{k: summary[k] for k in ('sigma_analytic_over_classic_delta_1e-5', 'gauss_output_accuracy_gain_analytic_minus_classic', "
         "'gauss_input_accuracy_gain_analytic_minus_classic')}"),
]

nb, build = builder(cells, "inference_privacy")  # build(path=notebooks/inference_privacy.ipynb, quick=False): execute, write

if __name__ == "__main__":
    print("wrote", build())
