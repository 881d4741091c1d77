"""Build and execute notebooks/certify_model.ipynb (nbformat + nbclient).

    python notebooks/build_certify_model.py        (from the repository root)

"Certify a model before deployment": a torch MLP trained in the notebook and a bundled ONNX model
(ACAS Xu N_1_1), inspected; local Lipschitz constants (what the interval and the status mean),
back-ends and methods, global bounds, a robustness radius, and the CLI command of every step.
Its cells assert what they show against independent checks (torch autograd, onnxruntime, sampled
finite differences), so `tests/test_notebooks.py` re-executing it (quick settings) is a test.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the shared builder helpers (notebooks/_notebook.py)

from _notebook import CLI_HELPER, builder, code, md  # noqa: E402

cells = [
    md("# Certify a model before deployment\n\n"
       "You have a trained network and you are about to rely on a number about it: how far its outputs can "
       "move when its input moves (a **Lipschitz constant**, the sensitivity that calibrates privacy noise or "
       "bounds an error), or how far an input can move before the decision changes (a **robustness radius**). "
       "certify returns such numbers as **certificates**: an interval `[lower, upper]` whose two ends are "
       "proofs, with a status saying whether it closed.\n\n"
       "This walkthrough takes two models — a torch MLP trained here on scikit-learn's 8x8 digits and a "
       "bundled ONNX network (ACAS Xu N_1_1, VNN-COMP) — and goes through inspection, local and global "
       "Lipschitz constants, back-ends and methods, and a robustness radius. Every step shows the equivalent "
       "`certify` command (run here with `--json`, and compared with the Python result), and every number "
       "shown is checked by something that does not use certify's own code (torch autograd, onnxruntime, "
       "sampled finite differences)."),
    code("import os\n"
         "# tests/test_notebooks.py runs this notebook with CERTIFY_NOTEBOOK_QUICK=1 (smaller settings, ~20 s);\n"
         "# the committed copy is the full run.\n"
         "QUICK = os.environ.get('CERTIFY_NOTEBOOK_QUICK') == '1'\n"
         "EPOCHS = 100                                  # full-batch Adam epochs of the digits MLP\n"
         "RADIUS = 0.1                                  # l_inf radius of the local box (pixels in [0, 1])\n"
         "ACAS_SECONDS = 0.5 if QUICK else 10            # time budget per method on ACAS Xu\n"
         "CLI_SECONDS = 4 if QUICK else 10               # the CLI's --time-limit counts from process start (imports: ~1 s, more on a busy machine)\n"
         "BACKENDS = () if QUICK else ('gurobi', 'highs', 'cbc')  # besides the one `auto` picks\n"
         "ACAS_GLOBAL = ('naive', 'eclipse-fast') if QUICK else ('naive', 'eclipse-fast', 'lipsdp-neuron')\n"
         "SAMPLES = 500 if QUICK else 5000              # random points of the independent checks\n"
         "CLI_LOCAL_METHOD = 'bounds' if QUICK else 'auto'  # the CLI repeats section 2 (the quick run: the fast bound)"),
    code("import copy, itertools, json, subprocess, sys, tempfile\nfrom pathlib import Path\n"
         "import numpy as np, pandas as pd, torch\n"
         "import certify\nfrom models import zoo\nfrom models.zoo.digits import digits_data\n"
         "pd.set_option('display.precision', 6); pd.set_option('display.width', 160)\n"
         + CLI_HELPER +
         "\ndef row(name, c):\n"
         "    \"\"\"One line of a comparison table: the certificate protocol's fields.\"\"\"\n"
         "    ratio = c.upper / c.lower if c.lower else float('inf')\n"
         "    return {'run': name, 'lower': c.lower, 'upper': c.upper, 'upper/lower': ratio, 'status': c.status,\n"
         "            'certified': c.certified, 'method': getattr(c, 'method', ''), 'backend': getattr(c, 'backend', ''),\n"
         "            'seconds': round(c.seconds, 2)}"),

    md("## 1. The models\n\n"
       "### A torch model, trained here\n"
       "A 64-16-10 ReLU MLP on the digits (pixels scaled to [0, 1], a fixed stratified split). "
       "`certify.from_torch` traces it with torch.fx into certify's float64 network IR and compares the IR "
       "with the module's own forward on random inputs; an unsupported layer is refused by name."),
    code("data = digits_data()\ntorch.manual_seed(0); torch.set_num_threads(1)\n"
         "model = torch.nn.Sequential(torch.nn.Linear(64, 16), torch.nn.ReLU(), torch.nn.Linear(16, 10))\n"
         "opt = torch.optim.Adam(model.parameters(), lr=1e-2)\n"
         "X, Y = torch.tensor(data.x_train, dtype=torch.float32), torch.tensor(data.y_train)\n"
         "for _ in range(EPOCHS):\n"
         "    opt.zero_grad(); torch.nn.functional.cross_entropy(model(X), Y).backward(); opt.step()\n"
         "model.eval()\n"
         "net = certify.from_torch(model, input_shape=(64,), name='digits_64_16_10')\n"
         "with torch.no_grad():\n"
         "    torch_logits = model(torch.tensor(data.x_test, dtype=torch.float32)).double().numpy()\n"
         "assert np.allclose(net(data.x_test), torch_logits, atol=1e-4)   # float32 torch vs the float64 IR\n"
         "print(f'test accuracy {np.mean(net(data.x_test).argmax(1) == data.y_test):.4f}')\n"
         "net.describe()"),
    md("The command line reads ONNX files only (it never unpickles a `.pt`): export the IR. The float64 export "
       "round-trips exactly, so the CLI certifies the very same function."),
    code("from models.onnx_export import save_onnx\n"
         "save_onnx(net, WORK / 'digits.onnx')\n"
         "cli('inspect', WORK / 'digits.onnx')"),
    md("### An ONNX model: ACAS Xu N_1_1\n"
       "One of the 45 collision-avoidance networks of VNN-COMP (5 normalised inputs, six hidden layers of 50 "
       "ReLUs, 5 advisory scores), bundled in `models.zoo`. `certify.load_onnx` imports it and refuses it if the "
       "IR disagrees with onnxruntime on random inputs; here we check one point against onnxruntime ourselves."),
    code("import onnxruntime as ort\n"
         "acas_path = zoo.acasxu_path(1, 1)\nacas = certify.load_onnx(acas_path)\n"
         "x_acas = np.array([0.6, -0.3, 0.1, 0.4, 0.2])\n"
         "sess = ort.InferenceSession(str(acas_path)); inp = sess.get_inputs()[0]\n"
         "def acas_ort(z):   # onnxruntime, float32: the reference the IR must agree with\n"
         "    return sess.run(None, {inp.name: np.asarray(z, np.float32).reshape(inp.shape)})[0].ravel().astype(float)\n"
         "assert np.allclose(acas(x_acas), acas_ort(x_acas), rtol=1e-5, atol=1e-5)\n"
         "d = acas.describe()\n{k: d[k] for k in ('name', 'input_shape', 'input_dim', 'output_dim', 'relu_count')}"),
    code("cli('eval', acas_path, '--input', ','.join(map(str, x_acas)))"),

    md("## 2. The local Lipschitz constant of the digits model\n\n"
       "Question: when every pixel of a test image `x` moves by at most `RADIUS` (staying in [0, 1]), how much "
       "can the 10 logits move, in l1? That is the local constant\n\n"
       "    L = sup over z in B of ||J(z)||_{linf -> l1},    B = [x - RADIUS, x + RADIUS] ∩ [0, 1]^64,\n\n"
       "so that ||f(a) - f(b)||_1 <= L ||a - b||_inf for all a, b in B. `certify.local_lipschitz` answers with an "
       "interval:\n\n"
       "- **upper** is a *proof*: the MILP solver's dual bound, re-proven by certify's own branch-and-bound with "
       "directed-rounding LP bounds (it never rests on a solver's tolerances), or a cheaper sound bound when that "
       "is smaller. This is the number to use wherever a guarantee depends on L (noise scales, error budgets).\n"
       "- **lower** is *evidence*: the exact Jacobian norm at a `witness` point of B where the network is "
       "certified differentiable, recomputed in float64. The true L is at least this, so no method can ever "
       "certify a smaller upper bound.\n"
       "- **upper/lower** is how much you might be over-paying by using `upper`: 1 means the constant is known "
       "exactly (status `optimal`, `exact: True`)."),
    code("x = data.x_test[0]\n"
         "cert = certify.local_lipschitz(net, x, RADIUS, domain=(0, 1), input_norm='linf', output_norm='l1')\n"
         "print(cert)\n"
         "{k: v for k, v in cert.to_dict().items() if k in ('lower', 'upper', 'status', 'certified', 'exact', 'scope', "
         "'method', 'backend', 'unstable', 'binaries', 'proof', 'notes')}"),
    md("**Checks that do not use certify.** The Jacobian at the witness, by torch autograd on a float64 copy of "
       "the torch model, has the norm `lower` (linf -> l1 is exact by enumerating the 2^10 output signs: "
       "||J||_{inf->1} = max_s ||J^T s||_1). The Jacobian norms at random points of the box and the "
       "finite-difference quotients ||f(a) - f(b)||_1 / ||a - b||_inf of random pairs are lower bounds of L, so "
       "they must all stay below `upper`."),
    code("m64 = copy.deepcopy(model).double()\n"
         "def jacobians(points):   # torch autograd on the float64 torch model, one Jacobian per point\n"
         "    return torch.func.vmap(torch.func.jacrev(m64))(torch.as_tensor(points)).detach().numpy()\n"
         "SIGNS = np.array(list(itertools.product([-1.0, 1.0], repeat=10)))\n"
         "def norm_inf_to_1(J):    # exact ||J||_{inf->1} = max over output signs s of ||J^T s||_1 (in chunks)\n"
         "    return np.concatenate([np.abs(SIGNS @ j).sum(-1).max(-1) for j in np.array_split(J, max(1, len(J) // 200))])\n"
         "def f64(points):\n"
         "    with torch.no_grad():\n"
         "        return m64(torch.as_tensor(points)).numpy()\n\n"
         "lo, hi = np.array(cert.box.lo), np.array(cert.box.hi)\nrng = np.random.default_rng(0)\n"
         "assert np.all((lo <= cert.witness) & (cert.witness <= hi))\n"
         "at_witness = float(norm_inf_to_1(jacobians(cert.witness[None]))[0])\n"
         "sampled = norm_inf_to_1(jacobians(rng.uniform(lo, hi, (SAMPLES, 64)))).max()\n"
         "a, b = rng.uniform(lo, hi, (2, SAMPLES, 64))\n"
         "quotients = np.abs(f64(a) - f64(b)).sum(1) / np.abs(a - b).max(1)\n"
         "assert abs(at_witness - cert.lower) <= 1e-9 * cert.lower\n"
         "assert max(sampled, quotients.max()) <= cert.upper and cert.lower <= cert.upper\n"
         "pd.Series({'finite-difference quotients (max)': quotients.max(), 'Jacobian norm, random points (max)': sampled,\n"
         "           'Jacobian norm at the witness (torch)': at_witness, 'certified lower': cert.lower,\n"
         "           'certified upper': cert.upper}, name='linf -> l1')"),
    md("Sampling gets close to L only with the right tool: the largest Jacobian norm at random points is a few "
       "percent short (the worst activation pattern is a small corner of the box), and finite-difference quotients "
       "of random pairs are far below (a random direction is not the worst sign vector). Both are lower bounds: "
       "an estimate of L from samples would under-state it, and a guarantee built on it would be false. Only "
       "`upper` is a guarantee.\n\n"
       "The same question on the command line (`@file` reads a vector from .npy/.json/.csv); the two intervals "
       "must overlap, since both contain the same true L:"),
    code("np.save(WORK / 'x.npy', x)\n"
         "c = cli('lipschitz', WORK / 'digits.onnx', '--center', f\"@{WORK / 'x.npy'}\", '--radius', RADIUS, '--domain', '0,1',\n"
         "        '--method', CLI_LOCAL_METHOD)\n"
         "assert max(c['lower'], cert.lower) <= min(c['upper'], cert.upper)\n"
         "{k: c[k] for k in ('lower', 'upper', 'status', 'exact', 'method', 'backend', 'unstable')}"),

    md("## 3. What the status means\n\n"
       "Every certificate carries one status (`certify.Status`); the interval is sound whatever it is:\n\n"
       "| status | meaning | what to do with `upper` |\n|---|---|---|\n"
       "| `optimal` | lower and upper met (1.5e-6 relative) and both are proven: L is known | use it |\n"
       "| `certified` | a one-sided proven bound, nothing open (global bounds: `lower` is None) | use it |\n"
       "| `fallback` | proven, but by a weaker method than the one asked for (e.g. an SDP piece replaced by "
       "a norm product) | use it; it may be loose |\n"
       "| `open_gap` | the search finished but the interval did not close (`--method bounds`, l2 norm "
       "interpolation, a degenerate pattern) | use it; upper/lower says how loose |\n"
       "| `time_limit` | the time budget ran out: the interval reached so far | use it, or give more time |\n"
       "| `interrupted` | Ctrl-C or a stopped solve (CLI exit code 130) | use it, or re-run |\n"
       "| `robust_within` | robustness only: no counterexample within the maximum radius asked for | "
       "`lower` is that radius |\n"
       "| `probabilistic` | a statistical statement (never `certified`) | not a proof: never calibrate from it |\n\n"
       "A timeout never turns into a claim of exactness. On ACAS Xu (79 unstable ReLUs in this box) the exact "
       "MILP does not close in a few seconds: compare the methods of `--method auto|milp|bab|bounds` at the same "
       "time budget:\n\n"
       "- `bounds`: the Clarke-Jacobian bound alone (milliseconds) plus sampled witnesses: `open_gap`;\n"
       "- `milp`: the exact MILP (one binary per unstable ReLU); at scale it stops at `time_limit`;\n"
       "- `bab`: branch-and-bound over input splits and ReLU phases; its upper bound is a proof at every moment;\n"
       "- `auto` (default): the MILP when the box leaves at most 60 unstable ReLUs, otherwise `bab`."),
    code("events = {'bounds': [], 'milp': [], 'bab': []}   # progress events: the certified interval as a run goes\n"
         "runs = {m: certify.local_lipschitz(acas, x_acas, 0.05, method=m, time_limit=ACAS_SECONDS, progress=events[m].append)\n"
         "        for m in events}\n"
         "runs['auto'] = certify.local_lipschitz(acas, x_acas, 0.05, time_limit=ACAS_SECONDS)\n"
         "table = pd.DataFrame([row(f'ACAS Xu, {m}', c) for m, c in runs.items()] + [row('digits (section 2)', cert)])\n"
         "# every interval contains the same true constant; exactness is claimed only when the interval closed\n"
         "assert max(c.lower for c in runs.values()) <= min(c.upper for c in runs.values())\n"
         "assert all(c.exact == (c.status == 'optimal') for c in [*runs.values(), cert])\n"
         "print('unstable ReLUs in the ACAS Xu box:', runs['milp'].unstable)\ntable"),
    md("Independent check on ACAS Xu: finite-difference quotients ||f(a) - f(b)||_1 / ||a - b||_inf evaluated by "
       "onnxruntime (float32, so a relative slack of 1e-3 for its rounding) stay below the smallest upper bound."),
    code("box_lo, box_hi = x_acas - 0.05, x_acas + 0.05\n"
         "a, b = rng.uniform(box_lo, box_hi, (2, SAMPLES // 5, 5))\n"
         "fd = max(np.abs(acas_ort(p) - acas_ort(q)).sum() / np.abs(p - q).max() for p, q in zip(a, b))\n"
         "best_upper = min(c.upper for c in runs.values())\n"
         "assert fd <= best_upper * (1 + 1e-3)\n"
         "print(f'largest finite-difference quotient {fd:.4f} <= best proven upper bound {best_upper:.4f}')"),
    md("**Anytime.** `progress=callable` (the CLI's `--progress` line) receives the certified interval while a run "
       "goes: both ends are sound at every moment, so stopping early (time limit, Ctrl-C) never loses the guarantee, "
       "only tightness. The MILP solver's own bound is shown dashed: it is not a proof until certify re-proves it."),
    code("%matplotlib inline\nimport matplotlib.pyplot as plt\n"
         "fig, ax = plt.subplots(figsize=(7, 4))\n"
         "for m, color in (('milp', 'C0'), ('bab', 'C1')):\n"
         "    ev = events[m]\n"
         "    assert all(np.diff([e.upper for e in ev]) <= 0) and all(np.diff([e.lower for e in ev]) >= 0)  # never loosens\n"
         "    ax.step([e.elapsed for e in ev], [e.upper for e in ev], where='post', color=color, label=f'{m}: certified upper')\n"
         "    solver = [(e.elapsed, e.solver_upper) for e in ev if e.solver_upper is not None]\n"
         "    if solver:\n"
         "        ax.step(*zip(*solver), where='post', color=color, ls='--', lw=0.8, label=f'{m}: solver bound (unproven)')\n"
         "ax.axhline(runs['bab'].lower, color='k', lw=0.8, label='certified lower (replayed witness)')\n"
         "ax.set(yscale='log', xlabel='seconds', ylabel='linf -> l1 Lipschitz constant',\n"
         "       title='ACAS Xu N_1_1, box radius 0.05: the certified interval over time')\n"
         "ax.legend(fontsize=8); plt.tight_layout(); plt.show()"),
    code("c = cli('lipschitz', acas_path, '--center', ','.join(map(str, x_acas)), '--radius', 0.05, '--method', 'bab',\n"
         "        '--time-limit', CLI_SECONDS)\n"
         "assert max(c['lower'], runs['bab'].lower) <= min(c['upper'], runs['bab'].upper)\n"
         "{k: c[k] for k in ('lower', 'upper', 'status', 'method', 'proof')}"),

    md("## 4. Choosing a back-end\n\n"
       "The MILP is built once, solver-neutral, and solved by one of three back-ends (`backend=` / `--backend`):\n\n"
       "- `gurobi`: the fastest here, when `gurobipy` is installed and licensed. The pip wheel carries a "
       "size-limited licence (2000 variables and 2000 linear constraints, 200 variables for quadratic models); "
       "certify detects it once with a probe and checks each model *before* solving;\n"
       "- `highs` (highspy): the default open solver, typically 1.5-6x slower than Gurobi on these models;\n"
       "- `cbc` (PuLP's bundled binary): runs as a subprocess, no MIP start, stops only at its own time limit;\n"
       "- `auto` (default): Gurobi when licensed and the model fits its licence, otherwise HiGHS, with a note.\n\n"
       "Whatever the back-end, its bound is only the *target* of certify's own proof: the intervals agree."),
    code("from solvers.milp.backends import get_backend\nfrom solvers.milp.gurobi import licence\n"
         "print('gurobi licence:', licence())\n"
         "available = [b for b in BACKENDS if get_backend(b).available()]\n"
         "by_backend = {f'{cert.backend} (auto, section 2)': cert}\n"
         "by_backend.update({b: certify.local_lipschitz(net, x, RADIUS, domain=(0, 1), backend=b)\n"
         "                   for b in available if b != cert.backend})\n"
         "assert max(c.lower for c in by_backend.values()) <= min(c.upper for c in by_backend.values())\n"
         "assert all(c.status == 'optimal' for c in by_backend.values())\n"
         "pd.DataFrame([row(b, c) for b, c in by_backend.items()])"),
    md("An explicit `--backend gurobi` on a model beyond the licence is bad input (exit code 2), decided before any "
       "bounds are computed when a lower bound on the model's size already exceeds the limit; `auto` would fall back "
       "to HiGHS with a note. A random 64-256-256-10 net over a wide box:"),
    code("from models.zoo import random_relu_net\n"
         "save_onnx(random_relu_net((64, 256, 256, 10), seed=0), WORK / 'wide.onnx')\n"
         "if licence().usable and licence().restricted:\n"
         "    args = ['lipschitz', str(WORK / 'wide.onnx'), '--center', ','.join(['0.5'] * 64), '--radius', '0.5', '--backend', 'gurobi']\n"
         "    run = subprocess.run([sys.executable, '-m', 'certify.cli', *args], capture_output=True, text=True)\n"
         "    assert run.returncode == 2 and 'licence' in run.stderr\n"
         "    print(f'exit code {run.returncode}:', run.stderr.strip())\n"
         "else:\n"
         "    print('gurobi is not size-limited (or not available) here:', licence())"),

    md("## 5. Global Lipschitz bounds\n\n"
       "A global bound holds for **every** input, not just a box: `certify.global_lipschitz(net, method)` "
       "(`certify global`). It is one-sided (`lower` is None, status `certified`): a proven upper bound "
       "on the constant over all of R^64. Methods: `naive` (product of per-layer operator norms, every norm "
       "pair), `eclipse-fast` (closed form), `lipsdp-layer` and `lipsdp-neuron` (SDPs whose multipliers are "
       "re-proven by a float64 Cholesky certificate outside the solver; other norm pairs by norm equivalence), "
       "`mip` (the exact constant over a domain box, from the local MILP; too slow for 64 inputs and the whole "
       "[0, 1]^64 here), `all` (each, and the best).\n\n"
       "Since the global constant is at least every local one, every global upper bound must be at least the "
       "local `lower` (the replayed witness), and here, where the local interval closed, at least the local "
       "`upper` too. The ratio is what the global bound over-pays on this box."),
    code("glob = certify.global_lipschitz(net, 'all', input_norm='linf', output_norm='l1')\n"
         "gtable = pd.DataFrame([{'method': r.method, 'upper': r.upper, 'status': r.status, 'certified': r.certified,\n"
         "                        'upper / local L': r.upper / cert.upper, 'seconds': round(r.seconds, 2)} for r in glob.results])\n"
         "everywhere = norm_inf_to_1(jacobians(rng.uniform(-1, 2, (SAMPLES, 64)))).max()  # points outside [0,1]^64 too\n"
         "assert cert.exact and all(r.upper >= cert.upper and r.upper >= everywhere for r in glob.results)\n"
         "print(f'best: {glob.best.method} {glob.best.upper:.4f}; skipped: {glob.skipped}; '\n"
         "      f'largest sampled Jacobian norm anywhere {everywhere:.4f}')\ngtable"),
    md("The privacy mechanisms of `certify.privacy` need l2 inputs (Gauss-Output: l2 -> l2). Here the SDP bounds "
       "are tighter than the norm product; the largest sampled spectral norm of the Jacobian is the check:"),
    code("glob2 = certify.global_lipschitz(net, 'all')          # l2 -> l2\n"
         "spectral = np.linalg.norm(jacobians(rng.uniform(-1, 2, (SAMPLES, 64))), 2, axis=(1, 2)).max()\n"
         "assert all(r.upper >= spectral for r in glob2.results)\n"
         "pd.DataFrame([{'method': r.method, 'upper': r.upper, 'upper / sampled': r.upper / spectral} for r in glob2.results])"),
    code("g = cli('global', WORK / 'digits.onnx', '--method', 'all', '--input-norm', 'linf', '--output-norm', 'l1')\n"
         "assert np.isclose(g['best']['upper'], glob.best.upper, rtol=1e-6)\n"
         "{'best': (g['best']['method'], g['best']['upper']), 'skipped': g['skipped']}"),
    md("On ACAS Xu the gap is dramatic: its global bounds are astronomically above the local constant of section "
       "3, because they must hold for every input, including the unstable phases of all 300 ReLUs at once. When the "
       "inputs you will see live in a known domain, a local (or domain) certificate is what makes the number useful."),
    code("acas_glob = [certify.global_lipschitz(acas, m, input_norm='linf', output_norm='l1') for m in ACAS_GLOBAL]\n"
         "assert all(r.upper >= best_upper for r in acas_glob)\n"
         "pd.DataFrame([{'method': r.method, 'global upper': r.upper, 'local upper (section 3)': best_upper,\n"
         "               'global / local': r.upper / best_upper, 'seconds': round(r.seconds, 2)} for r in acas_glob])"),

    md("## 6. A robustness radius\n\n"
       "How far (in l_inf, inside [0, 1]) can `x` move before the predicted class changes? `certify.robustness_radius` "
       "(MIPVerify's \"closest\", ties count as changes) returns an interval with the roles reversed: `lower` is the "
       "proof (nothing closer flips: the flip MILP's bound re-proven), `upper` the distance of a **counterexample** "
       "replayed in float64 (and in onnxruntime for an ONNX model). `radius` is set when they meet (`optimal`)."),
    code("rad = certify.robustness_radius(net, x, norm='linf', domain=(0, 1))\nprint(rad)\n"
         "{k: v for k, v in rad.to_dict().items() if k in ('lower', 'upper', 'radius', 'status', 'predicted_class', "
         "'counterexample_class', 'fast_lower', 'backend')}"),
    md("Checks: the counterexample flips the class of the torch model (float64) and lies within `upper`; no random "
       "point of the proven box flips (a check, not the proof). And the local Lipschitz certificate of section 2 gives "
       "its own lower bound on the radius: the l1 norm bounds every logit difference, so "
       "|(f_c - f_j)(z) - (f_c - f_j)(x)| <= L ||z - x||_inf and no class changes before margin / L "
       "(when that is inside the certified box). Two certificates from different engines must agree: "
       "margin / L <= upper."),
    code("cex, c0 = rad.counterexample, rad.predicted_class\n"
         "assert np.abs(cex - x).max() <= rad.upper and np.all((0 <= cex) & (cex <= 1))\n"
         "out = f64(cex[None])[0]\nassert out.argmax() != c0 or np.sum(out == out.max()) > 1\n"
         "z = np.clip(x + rng.uniform(-1, 1, (SAMPLES * 4, 64)) * rad.lower * (1 - 1e-9), 0, 1)\n"
         "assert np.all(f64(z).argmax(1) == c0)\n"
         "logits = f64(x[None])[0]\nmargin = logits[c0] - np.delete(logits, c0).max()\n"
         "via_lipschitz = margin / cert.upper\n"
         "assert via_lipschitz <= RADIUS and via_lipschitz <= rad.upper\n"
         "pd.Series({'margin / L (from the Lipschitz certificate)': via_lipschitz, 'proven lower': rad.lower,\n"
         "           'counterexample distance (upper)': rad.upper}, name='l_inf radius')"),
    code("r = cli('radius', WORK / 'digits.onnx', '--point', f\"@{WORK / 'x.npy'}\", '--domain', '0,1')\n"
         "assert max(r['lower'], rad.lower) <= min(r['upper'], rad.upper)\n"
         "{k: r[k] for k in ('lower', 'upper', 'radius', 'status', 'predicted_class', 'counterexample_class')}"),

    md("## 7. Before you ship\n\n"
       "- Store the certificate, not just the number: `cert.to_dict()` (the CLI's `--json`) is a JSON object with "
       "`schema: certify.certificate/1`, the box, norms, status, witness and proof statistics.\n"
       "- Use `upper` for any guarantee (noise scale, error budget) whatever the status; `lower` only tells you how "
       "much tighter it could get. Refuse anything with `certified: False` (certify's privacy calibrations do).\n"
       "- A local certificate holds on its box only: inputs outside it need their own certificate, or clip them into "
       "the box (see `notebooks/inference_privacy.ipynb`, where a mechanism built from a local certificate refuses "
       "inputs outside it).\n"
       "- Give the solver time where it pays: `time_limit` covers every stage and the interval stays sound."),
    code("doc = cert.to_dict()\n(WORK / 'certificate.json').write_text(json.dumps(doc))\n"
         "assert doc['schema'] == 'certify.certificate/1' and doc['certified']\n"
         "sorted(doc)"),
]

nb, build = builder(cells, "certify_model")  # build(path=notebooks/certify_model.ipynb, quick=False): execute, write

if __name__ == "__main__":
    print("wrote", build())
