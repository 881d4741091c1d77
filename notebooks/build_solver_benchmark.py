"""Build and execute notebooks/solver_benchmark.ipynb (nbformat + nbclient).

    python notebooks/build_solver_benchmark.py        (from the repository root)

Runs `certify bench lipschitz --quick` from Python, loads its CSV with pandas, shows and reads the
plots, and checks the numbers it reports against independent oracles (LipMIP's published value,
agreement between back-ends, sampled Jacobian norms), so `tests/test_notebooks.py` re-executing it
(quick settings: two back-ends, two methods) is a test.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the shared builder helpers (notebooks/_notebook.py)

from _notebook import CLI_HELPER, builder, code, md  # noqa: E402

cells = [
    md("# Benchmarking MILP solvers with `certify bench`\n\n"
       "Which solver should certify your model: Gurobi, HiGHS or CBC? And when does an exact MILP stop paying "
       "against branch-and-bound on the Jacobian or a bound alone? `certify bench` answers on the package's "
       "suites or on your own ONNX models: every instance on every available back-end and method, a time limit "
       "per run, one tidy CSV row per run, machine information, a markdown summary and plots.\n\n"
       "This notebook runs the quick Lipschitz suite (`certify bench lipschitz --quick`: LipMIP's 2-16-16-2 net, "
       "small seeded width and depth sweeps, the bound-tightening ablation), loads the results, checks them and "
       "reads the plots. See `docs/bench.md` for every suite and column."),
    code("import json, os, subprocess, sys, tempfile\nfrom pathlib import Path\n\n"
         "import numpy as np\nimport pandas as pd\nfrom IPython.display import Image, Markdown, display\n\n"
         "sys.path.insert(0, str(Path.cwd().parent))\nfrom certify.bench import list_suites, run_bench\n"
         + CLI_HELPER +
         "\nQUICK = os.environ.get('CERTIFY_NOTEBOOK_QUICK') == '1'  # the test run: two back-ends, two methods\n"
         "pd.set_option('display.width', 160)"),
    md("## The suites\n`certify bench` with no suite lists them (`certify bench --list --json` for a program):"),
    code("for name, text in list_suites().items():\n    if name != 'models':\n        print(f'{name:10s} {text}')"),
    md("## Run the quick Lipschitz suite\n`run_bench` is what the CLI calls. `backends` and `methods` filter the "
       "cases; a back-end that cannot run here (not installed, no licence, a model beyond Gurobi's size-limited "
       "pip licence) gives a `skipped` row with the reason instead of an error."),
    code("kw = dict(backends=['gurobi', 'highs'], methods=['milp', 'bab']) if QUICK else {}\n"
         "result = run_bench(['lipschitz'], quick=True, out=WORK / 'bench', progress=False, **kw)\n"
         "print(len(result.rows), 'runs;', len(result.skipped), 'skipped')\n"
         "for kind, path in result.files.items():\n    print(f'{kind:16s} {Path(path).name}')"),
    md("The same from a shell: `certify bench lipschitz --quick --out bench`. The machine the numbers come from "
       "(solver versions matter as much as the CPU):"),
    code("machine = json.loads(Path(result.files['machine']).read_text())\n"
         "{k: machine[k] for k in ('cpu_model', 'logical_cores', 'memory_gb', 'python', 'solvers', 'backends')}"),
    md("## The CSV\nOne row per instance x back-end x method x repeat. `lower` is the norm of the Jacobian at a "
       "replayed witness, `upper` a proof; `solved` means the interval closed."),
    code("df = pd.read_csv(result.files['csv'])\n"
         "df[['instance', 'family', 'backend', 'method', 'variant', 'relus', 'unstable', 'binaries', 'lower', 'upper', "
         "'status', 'seconds']].round(4)"),
    md("### Check the numbers before trusting the plots\n"
         "Three independent checks: LipMIP's published value of its 2-16-16-2 net (0.335242) lies in every "
         "interval; every back-end that closed an instance found the same value; and every certified upper bound "
         "is at least the largest Jacobian norm sampled in the box."),
    code("ran = df[df.status != 'skipped']\n"
         "assert (ran.lower <= ran.upper * (1 + 1e-9)).all()\n"
         "lipmip = ran[ran.instance == 'lipmip_2-16-16-2']\n"
         "assert ((lipmip.lower <= 0.335242 * (1 + 1e-5)) & (lipmip.upper >= 0.335242 * (1 - 1e-5))).all()\n"
         "closed = ran[(ran.method == 'milp') & (ran.status == 'optimal') & ran.variant.isna()]\n"
         "spread = closed.groupby('instance').upper.agg(lambda v: v.max() / v.min() - 1)\n"
         "assert (spread <= 1e-6).all(), spread\n"
         "from itertools import product\nfrom certify.bench.suites.lipschitz import random_net\n"
         "rng = np.random.default_rng(1)\n"
         "for name, rows in ran[ran.instance.str.startswith('random_')].groupby('instance'):\n"
         "    shape = tuple(int(v) for v in name.split('_')[1].split('-'))\n"
         "    net, c = random_net(shape, 0), np.random.default_rng(0).standard_normal(shape[0])\n"
         "    signs = np.array(list(product((-1.0, 1.0), repeat=net.output_dim)))\n"
         "    sampled = max(np.abs(signs @ net.jacobian(x)).sum(axis=1).max() for x in c + rng.uniform(-0.1, 0.1, (300, shape[0])))\n"
         "    assert (rows.upper >= sampled * (1 - 1e-9)).all()\n"
         "    print(f'{name:18s} sampled {sampled:.5g} <= exact {rows.lower.max():.5g} <= every upper bound')"),
    md("## Medians per back-end and method\nWith `--repeat N` each configuration runs N times and the summary "
       "reports medians with min-max; here one run each."),
    code("main = ran[ran.variant.isna()]\n"
         "table = main.pivot_table(index='instance', columns=['backend', 'method'], values='seconds', aggfunc='median')\n"
         "table.round(3)"),
    code("display(Markdown(Path(result.files['summary']).read_text().split('## lipschitz')[1].split('- lipmip')[0]))"),
    md("## The plots\n**Runtime vs network size**: median seconds against ReLU count per back-end (MILP) or "
       "method; hollow markers did not close within the limit. Exact MILPs grow with the number of *unstable* "
       "ReLUs (the binaries), not the raw width, so expect scatter at equal size."),
    code("display(Image(result.files['runtime_vs_size']))"),
    md("**Cactus plot** (VNN-COMP style): for each back-end and method, how many instances closed within t "
       "seconds. Curves further up and to the left are better; where they end is how many closed at all."),
    code("display(Image(result.files['cactus']))"),
    md("**Tightness**: each method's certified upper bound over the best certified lower bound of the "
       "instance (1 = exact). `bounds` (the Jacobian bound alone) is fast but loose; MILP and BaB close."),
    code("if 'tightness' in result.files:\n    display(Image(result.files['tightness']))\n"
         "ratio = (main.upper / main.groupby('instance').lower.transform('max')).groupby(main.method).median()\n"
         "ratio.round(3)"),
    md("**Bound-tightening ablation**: the MILP after interval, symbolic or LP pre-activation bounds. Tighter "
       "bounds leave fewer unstable ReLUs, hence fewer binaries; whether that pays depends on the time the "
       "bounds themselves take."),
    code("if 'ablation' in result.files:\n    display(Image(result.files['ablation']))\n"
         "ran[ran.variant.notna()][['instance', 'backend', 'variant', 'unstable', 'binaries', 'seconds']]"),
    md("## Your own models\n`certify bench --models FILE|DIR... --question lipschitz|global|radius` runs the same "
       "comparison on your ONNX files, at `--points N` seeded points (or `--center`) with box `--radius`:"),
    code("from models.zoo import lipmip_suite_path\n"
         "own = cli('bench', '--models', lipmip_suite_path('lipmip_2-20-20-20-2'), '--question', 'radius', "
         "'--domain', '0,1', '--points', '2', '--backends', 'highs', '--out', WORK / 'own', '--no-progress')\n"
         "pd.DataFrame(own['configurations'])[['instance', 'backend', 'method', 'status', 'bound', 'median_seconds']]"),
    md("A `radius` row's `bound` is the certified radius (`fast`: a proven lower bound without a MILP; `milp`: "
       "the exact value). For the full suites with LipMIP's times beside ours see the README's Benchmarks section."),
]

nb, build = builder(cells, "solver_benchmark")

if __name__ == "__main__":
    print("wrote", build())
