"""Build and execute notebooks/ldp_utility.ipynb (nbformat + nbclient).

    python notebooks/build_ldp_utility.py        (from the repository root)

The notebook redoes the case study of Zheng & Hu ("Quantifying classifier utility under local
differential privacy") on data that ships with scikit-learn, with *certified* boxes where the
paper had to sample. Its cells assert what they show (rho <= rho_hat up to sampling error on
certified boxes), so `tests/test_notebooks.py` re-executing it is a test.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the shared builder helpers (notebooks/_notebook.py)

from _notebook import builder, code, md  # noqa: E402

cells = [
    md("# LDP utility with certified robustness boxes\n\n"
       "Zheng & Hu quantify what local differential privacy costs a classifier: if the class of a record x is "
       "constant on a box around it, perturbing the sensitive features with an eps-LDP mechanism keeps the "
       "class with probability at least rho(eps, box) = prod_i P(a_i <= M(x_i) <= b_i). The paper obtained its "
       "boxes by sampling (probabilistic robustness). Here every box is **certified**: exact for a logistic "
       "regression and a random forest (breast_cancer, the paper's medical setting), proven by MILP for small "
       "ReLU networks (breast_cancer and load_digits, the image setting). Then: theoretical rho against the "
       "empirical rho_hat (sampling the mechanism, querying the classifier) over eps = 1..8 for each mechanism, "
       "and the mechanism-selection table."),
    code("import sys, pathlib\nsys.path.insert(0, str(pathlib.Path.cwd().parent))\n"
         "import numpy as np, pandas as pd\n"
         "import certify\n"
         "from certify.ldp import robustness_box, make_mechanism, utility, empirical_rho, compare_mechanisms, "
         "smallest_epsilon\n"
         "pd.set_option('display.precision', 4)\nMECHANISMS = ['laplace', 'pm', 'sw', 'exponential', 'krr']\n"
         "EPSILONS = [1, 2, 3, 4, 5, 6, 7, 8]\n"
         "CLIP = {'laplace': {'clip': True}}  # Laplace clipped to the domain (post-processing), as compare_mechanisms"),
    md("## Models on breast_cancer (features scaled to [0, 1])"),
    code("from sklearn.datasets import load_breast_cancer\nfrom sklearn.preprocessing import MinMaxScaler\n"
         "from sklearn.model_selection import train_test_split\nfrom sklearn.linear_model import LogisticRegression\n"
         "from sklearn.ensemble import RandomForestClassifier\n"
         "X, y = load_breast_cancer(return_X_y=True)\nX = MinMaxScaler().fit_transform(X)\n"
         "Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.25, random_state=0, stratify=y)\n"
         "lr = LogisticRegression(max_iter=5000).fit(Xtr, ytr)\n"
         "rf = RandomForestClassifier(50, max_depth=5, random_state=0).fit(Xtr, ytr)\n"
         "import torch\ntorch.manual_seed(0)\n"
         "mlp = torch.nn.Sequential(torch.nn.Linear(30, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2)).double()\n"
         "opt = torch.optim.Adam(mlp.parameters(), lr=1e-2)\n"
         "Xt, yt = torch.tensor(Xtr), torch.tensor(ytr)\n"
         "for _ in range(300):\n    opt.zero_grad(); loss = torch.nn.functional.cross_entropy(mlp(Xt), yt); "
         "loss.backward(); opt.step()\n"
         "net = certify.from_torch(mlp.eval(), input_shape=(30,))\n"
         "acc = lambda f: float(np.mean(f(Xte) == yte))\n"
         "{'logistic regression': acc(lr.predict), 'random forest': acc(rf.predict), "
         "'relu net 30-16-2': acc(lambda Z: net(Z).argmax(axis=1))}"),
    md("The sensitive features (the ones the LDP mechanism perturbs; the others stay at their values): four "
       "features the random forest relies on most. The record: the first test point."),
    code("sensitive = sorted(np.argsort(-rf.feature_importances_)[:4].tolist())\nx = Xte[0]\n"
         "boxes = {name: robustness_box(m, x, features=sensitive, domain=(0, 1))\n"
         "         for name, m in [('logistic regression', lr), ('random forest', rf), ('relu net 30-16-2', net)]}\n"
         "pd.DataFrame([{'model': k, 'kind': b.KIND, 'status': b.status, 'certified': b.certified, 'seconds': b.seconds,\n"
         "               **{f'x{i}': f'[{b.box.lo[i]:.4f}, {b.box.hi[i]:.4f}]' for i in sensitive}}\n"
         "              for k, b in boxes.items()])"),
    md("Every box is a proof: dense sampling inside never changes the class (a check, not the proof)."),
    code("rng = np.random.default_rng(0)\npredict = {'logistic regression': lr.predict, 'random forest': rf.predict,\n"
         "           'relu net 30-16-2': lambda Z: net(Z).argmax(axis=1)}\n"
         "for k, b in boxes.items():\n"
         "    Z = rng.uniform(b.box.lo, b.box.hi, size=(20000, x.size))\n"
         "    assert np.all(predict[k](Z) == predict[k](x[None])[0]), k\n'no flip in 20000 samples per box'"),
    md("## Theory vs practice: rho(eps) and rho_hat(eps)\n"
       "rho from the exact interval masses; rho_hat from 4000 perturbed copies of x (seeded numpy sampler) "
       "with a 99% Clopper-Pearson interval. On a certified box rho can only be *below* rho_hat (the box is a "
       "subset of the set of records keeping the class): the assertion checks it up to sampling error."),
    code("rows = []\nfor k, b in boxes.items():\n    for name in MECHANISMS:\n        for eps in EPSILONS:\n"
         "            mech = make_mechanism(name, float(eps), **CLIP.get(name, {}))\n"
         "            e = empirical_rho(mech, predict[k], b, point=x, features=sensitive, n=4000, sampler=eps)\n"
         "            rows.append({'model': k, 'mechanism': name, 'epsilon': eps, 'rho': e.rho, 'rho_hat': e.rho_hat,\n"
         "                         'ci_high': e.ci[1], 'consistent': e.consistent})\n"
         "table = pd.DataFrame(rows)\nassert table.consistent.all()\n"
         "table.pivot_table(index=['model', 'epsilon'], columns='mechanism', values='rho').round(4)"),
    code("%matplotlib inline\nimport matplotlib.pyplot as plt\n"
         "fig, axes = plt.subplots(1, 3, figsize=(13, 3.6), sharey=True)\n"
         "for ax, (k, sel) in zip(axes, table.groupby('model', sort=False)):\n"
         "    for name, s in sel.groupby('mechanism', sort=False):\n"
         "        line, = ax.plot(s.epsilon, s.rho, '-o', ms=3, label=f'{name} rho')\n"
         "        ax.plot(s.epsilon, s.rho_hat, '--x', color=line.get_color(), ms=4, label=f'{name} rho_hat')\n"
         "    ax.set(title=k, xlabel='epsilon per feature')\naxes[0].set_ylabel('probability the class is kept')\n"
         "axes[-1].legend(fontsize=6, ncol=2)\nplt.tight_layout(); plt.show()"),
    md("## Mechanism selection\nAt each epsilon, the mechanism with the largest rho on the random forest's box "
       "(all mechanisms give the same per-feature eps-LDP guarantee), and the smallest epsilon reaching rho = 0.9:"),
    code("b = boxes['random forest']\nsel = []\nfor eps in EPSILONS:\n"
         "    cmp = compare_mechanisms(b, float(eps), point=x, features=sensitive)\n"
         "    sel.append({'epsilon': eps, 'best': cmp.best['mechanism'], **{r['mechanism']: r['rho'] for r in cmp.rows}})\n"
         "pd.DataFrame(sel).set_index('epsilon').round(4)"),
    code("pd.DataFrame([{'mechanism': name, 'epsilon for rho >= 0.9': smallest_epsilon(make_mechanism(name, 1.0, "
         "**CLIP.get(name, {})), b, 0.9,\n"
         "                point=x, features=sensitive).epsilon} for name in MECHANISMS]).round(4)"),
    md("## Images: a digits MLP (64 pixels in [0, 1], 10 classes)\n"
       "The image setting: the four pixels with the largest gradient at the record are perturbed; the box is "
       "proven by the robustness hyperrectangle (MILP per side, sound proof)."),
    code("from models.zoo.digits import digits_data, digits_net\ndnet, data = digits_net((32,), seed=0), digits_data()\n"
         "xd = data.x_test[0]\nc = int(dnet(xd[None]).argmax())\n"
         "g = np.abs(dnet.jacobian(xd)[c])\npixels = sorted(np.argsort(-g)[:4].tolist())\n"
         "dbox = robustness_box(dnet, xd, features=pixels, domain=(0, 1))\n"
         "dpredict = lambda Z: dnet(Z).argmax(axis=1)\n"
         "drows = []\nfor name in MECHANISMS:\n    for eps in EPSILONS:\n"
         "        e = empirical_rho(make_mechanism(name, float(eps), **CLIP.get(name, {})), dpredict, dbox, point=xd, features=pixels, n=4000, "
         "sampler=eps)\n"
         "        drows.append({'mechanism': name, 'epsilon': eps, 'rho': e.rho, 'rho_hat': e.rho_hat, "
         "'consistent': e.consistent})\n"
         "dtable = pd.DataFrame(drows)\nassert dtable.consistent.all()\n"
         "print(dbox.status, [f'x{i} in [{dbox.box.lo[i]:.3f}, {dbox.box.hi[i]:.3f}]' for i in pixels])\n"
         "dtable.pivot_table(index='epsilon', columns='mechanism', values=['rho', 'rho_hat']).round(3)"),
    md("Reading: PM and SW keep the class far more often than Laplace at the same eps on these boxes (their "
       "output concentrates near the input), k-RR and the exponential mechanism on a 101-point grid need large "
       "eps; rho is a guarantee (certified box x exact masses) and sits below the sampled rho_hat everywhere."),
]

nb, build = builder(cells, "ldp_utility")  # build(path=notebooks/ldp_utility.ipynb, quick=False): execute, write

if __name__ == "__main__":
    print("wrote", build())
