"""`report.html`: one self-contained page (inline CSS, plots as base64 PNG, no scripts, no network)."""

from __future__ import annotations

import base64
import html
import io
import math
from typing import Any

PALETTE = ("#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#17becf")


def _png(fig) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    import matplotlib.pyplot as plt

    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def _figures(report: dict) -> dict[str, str]:
    import matplotlib

    matplotlib.use("Agg")  # no display, no GUI toolkit
    import matplotlib.pyplot as plt
    import numpy as np

    uppers = np.array([p["upper"] for p in report["points"]], dtype=float)
    props = report["proposals"]
    out = {}

    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    ax.hist(uppers, bins=min(30, max(5, len(uppers) // 3)), color="#1f77b4", alpha=0.8, label="certified upper bounds")
    for i, pr in enumerate(props):
        ax.axvline(pr["value"], color=PALETTE[i % len(PALETTE)], linestyle="--", label=f"{pr['rule']} = {pr['value']:.4g}")
    ax.set_xlabel(f"local Lipschitz constant ({report['norms']['input']} -> l1) over box(x, R = {report['radius']:g})")
    ax.set_ylabel("points")
    ax.legend(fontsize=8)
    out["histogram"] = _png(fig)

    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    curve = report["curve"]
    ax.plot([c["proposal"] for c in curve], [c["release_rate"] for c in curve], "o-", color="#1f77b4",
            label="expected release rate")
    for i, pr in enumerate(props):
        ax.plot([pr["value"]], [pr["release_rate"]], "s", color=PALETTE[i % len(PALETTE)], markersize=8, label=pr["rule"])
    ax.set_xscale("log")
    ax.set_ylim(-0.02, 1.02)
    ax.set_xlabel("proposal D_p")
    ax.set_ylabel("release rate")
    ax.legend(fontsize=8)
    out["release"] = _png(fig)

    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    eps = [row["epsilon"] for row in report["noise_vs_epsilon"]]
    for i, pr in enumerate(props):
        ax.plot(eps, [row["scales"][pr["rule"]] for row in report["noise_vs_epsilon"]], "o-",
                color=PALETTE[i % len(PALETTE)], label=pr["rule"])
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("epsilon (of each half of PTR: the guarantee is 2 eps)")
    ax.set_ylabel("Laplace scale D_p R / eps")
    ax.legend(fontsize=8)
    out["noise"] = _png(fig)
    return out


def _fmt(v: Any, digits: int = 6) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return f"{v:.{digits}g}" if math.isfinite(v) else str(v)
    return html.escape(str(v))


def _table(headers: list[str], rows: list[list[Any]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{_fmt(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


CSS = """body{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:2em auto;max-width:1100px;
color:#222;padding:0 1em}h1{font-size:1.5em}h2{font-size:1.15em;margin-top:1.6em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;font-size:.85em;margin:.5em 0}th,td{border:1px solid #ccc;padding:.25em .5em;text-align:right}
th{background:#f3f3f3}td:first-child,th:first-child{text-align:left}img{max-width:100%;display:block;margin:.5em 0}
.note{color:#555;font-size:.9em}.grid{display:flex;flex-wrap:wrap;gap:1em}.grid img{max-width:540px}"""


def render_html(report: dict) -> str:
    """The report as a self-contained HTML page."""
    figs = _figures(report)
    s = report["settings"]
    m = report["model"]
    st = report["statistics"]["upper"]
    props = report["proposals"]
    summary = _table(["quantity", "value"], [
        ["model", f"{m['name']} ({m['inputs']} inputs, {m['outputs']} outputs, {m['relus']} ReLUs)"],
        ["model sha256", m["sha256"]],
        ["points", report["data"]["points"]],
        ["norms", f"{report['norms']['input']} -> {report['norms']['output']}"],
        ["radius R", report["radius"]],
        ["epsilon, delta (guarantee 2 eps, delta / 2)", f"{_fmt(s['epsilon'])}, {_fmt(s['delta'])}"],
        ["grid step, test threshold", f"{_fmt(s['grid']['step'])}, {_fmt(s['grid']['threshold'])}"],
        ["certificates closed (optimal)", f"{report['statistics']['exact_fraction']:.1%}"],
    ] + [[f"global bound ({g['method']})", g["upper"]] for g in report["global_bounds"]])
    stats = _table(["count", "mean", "std", "min", "median", "max"] + [f"q{q}" for q in st["quantiles"]],
                   [[st["count"], st["mean"], st["std"], st["min"], st["median"], st["max"]] + list(st["quantiles"].values())])
    proposals = _table(["rule", "D_p", "noise scale", "expected release rate", "constant <= D_p at R", "searches decided"],
                       [[p["rule"], p["value"], p["noise_scale"], p["release_rate"], p["holds_at_radius"],
                         p["decided_fraction"]] for p in props])
    rules = [p["rule"] for p in props]
    per_point = _table(["#", "lower", "upper", "upper proven by", "status", "seconds"]
                       + [f"release p ({r})" for r in rules],
                       [[pt["index"], pt["lower"], pt["upper"], pt.get("proven_by") or "", pt["status"], pt["seconds"]]
                        + [pt["ptr"][r]["release_probability"] for r in rules] for pt in report["points"]])
    notes = "".join(f"<li>{html.escape(n)}</li>" for n in report["notes"])
    tool = ", ".join(f"{html.escape(k)} {html.escape(str(v))}" for k, v in report["tool"].items() if v)
    img = lambda key, alt: f'<img alt="{html.escape(alt)}" src="data:image/png;base64,{figs[key]}">'  # noqa: E731
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>certify sensitivity report: {html.escape(m['name'])}</title>
<style>{CSS}</style></head><body>
<h1>PTR sensitivity report: {html.escape(m['name'])}</h1>
<p class="note">Generated {html.escape(report['created'])} by {tool}. Every constant below is a proven upper
bound of the local Lipschitz constant (proven by the method each point's row names: a MILP bound re-proven outside
the solver, the Lipschitz branch-and-bound, or a sound interval bound) with a lower bound from a replayed witness;
proposals are computed from the upper bounds. Release rates are the expected pass rates of certify's PTR test on these
points; a query whose search is not decided is refused before its test and counts as never released.</p>
<h2>Summary</h2>{summary}
<h2>Certified local constants</h2>{stats}
<div class="grid">{img("histogram", "histogram of certified local constants with the proposals marked")}</div>
<h2>Proposals</h2>{proposals}
<div class="grid">{img("release", "expected release rate against the proposal")}{img("noise", "noise scale against epsilon")}</div>
<h2>Notes</h2><ul>{notes}</ul>
<h2>Per point</h2>{per_point}
</body></html>
"""


__all__ = ["render_html"]
