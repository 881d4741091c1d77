"""`utility`: LDP utility. rho(eps, box) throughput per mechanism (vectorised, 2000 boxes x 50
epsilons); certified boxes on breast_cancer (4 sensitive features): a logistic regression (closed
form, no solver) and a 50-tree random forest (MILP proposals per back-end, exact box-search proof).
`bound` is the mean rho, or the certified half-width of the box."""

from __future__ import annotations

import functools

import numpy as np

from ..cases import MILP_BACKENDS, NO_BACKEND, Case, Outcome, SuiteConfig, suite

MECHANISMS = ("laplace", "gaussian", "pm", "sw", "exponential", "krr")


def _rho(name: str, time_limit: float) -> Outcome:
    from certify.ldp import make_mechanism, rho_batch

    rng = np.random.default_rng(0)
    n = 2000
    x = rng.uniform(0, 1, (n, 2))
    lo = np.clip(x - rng.uniform(0, 0.4, x.shape), 0, 1)
    hi = np.clip(x + rng.uniform(0, 0.4, x.shape), 0, 1)
    eps = np.linspace(0.5, 8, 50)
    kw = dict(delta=1e-5, clip=True) if name == "gaussian" else dict(clip=True) if name == "laplace" else {}
    mech = make_mechanism(name, 1.0, **kw)
    rho_batch(mech, eps, x[:10], lo[:10], hi[:10])  # warm caches (Gaussian sigma solves)
    import time

    t0 = time.perf_counter()
    values = np.asarray(rho_batch(mech, eps, x, lo, hi), dtype=np.float64)
    seconds = time.perf_counter() - t0
    return Outcome(status="certified", solved=True, bound=float(np.mean(values)), seconds=seconds,
                   note=f"{eps.size * n / seconds:.3g} rho evaluations/s")


@functools.lru_cache(maxsize=None)
def breast_cancer(seed: int):
    from sklearn.datasets import load_breast_cancer
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import train_test_split
    from sklearn.preprocessing import MinMaxScaler

    X, y = load_breast_cancer(return_X_y=True)
    X = MinMaxScaler().fit_transform(X)
    Xtr, Xte, ytr, _ = train_test_split(X, y, test_size=0.3, random_state=seed)
    forest = RandomForestClassifier(50, max_depth=5, random_state=seed).fit(Xtr, ytr)
    logreg = LogisticRegression(max_iter=2000).fit(Xtr, ytr)
    feats = [int(i) for i in np.argsort(-forest.feature_importances_)[:4]]
    return {"random_forest_50x5": forest, "logistic_regression": logreg}, Xte, feats


def _box(model: str, seed: int, point: int, backend: str | None, time_limit: float) -> Outcome:
    from certify.robustness.classifiers import linear_hyperrectangle, tree_hyperrectangle

    models, Xte, feats = breast_cancer(seed)
    x0 = Xte[point]
    if backend is None:
        cert = linear_hyperrectangle(models[model], x0, features=feats, domain=(0.0, 1.0))
    else:
        cert = tree_hyperrectangle(models[model], x0, features=feats, domain=(0.0, 1.0), backend=backend,
                                   time_limit=time_limit)
    return Outcome(status=cert.status, solved=cert.status in ("optimal", "certified"), lower=cert.lower, upper=cert.upper,
                   bound=cert.lower)


@suite("utility", "LDP utility: rho throughput per mechanism; certified hyperrectangles of a logistic regression and "
       "a random forest (per back-end) on breast_cancer", default_time_limit=120.0, quick_time_limit=20.0)
def utility_suite(cfg: SuiteConfig) -> list[Case]:
    cases = [Case(f"rho_{name}", "rho", "utility", NO_BACKEND, name, functools.partial(_rho, name))
             for name in MECHANISMS]
    points = 2 if cfg.quick else 10
    size = {"inputs": 30, "outputs": 2}
    prep = functools.partial(breast_cancer, cfg.seed)
    for p in range(points):
        cases.append(Case(f"logistic_regression_x{p}", "breast_cancer", "utility", NO_BACKEND, "closed-form",
                          functools.partial(_box, "logistic_regression", cfg.seed, p, None), size=size, prepare=prep))
        for backend in MILP_BACKENDS:
            cases.append(Case(f"random_forest_50x5_x{p}", "breast_cancer", "utility", backend, "milp",
                              functools.partial(_box, "random_forest_50x5", cfg.seed, p, backend), size=size,
                              prepare=prep))
    return cases
