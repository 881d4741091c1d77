"""VNNLIB parser: the bundled properties, every supported construct, and clear errors.

The DNF normalisation is checked against an independent oracle: a direct recursive evaluator of
the formula text at random points (`tests.vnnlib_oracle`), compared with membership in the parsed
disjuncts.
"""

from __future__ import annotations

import gzip

import numpy as np
import pytest

from certify.verify import VnnlibError, load_vnnlib, parse_vnnlib
from models.zoo import DATA, acasxu_property_path
from tests.conftest import assert_bad_input
from tests.vnnlib_oracle import unsafe_by_oracle

HEADER = "(declare-const X_0 Real)\n(declare-const X_1 Real)\n(declare-const Y_0 Real)\n(declare-const Y_1 Real)\n"


def _unsafe_by_spec(spec, x, y) -> bool:
    return any(d.contains_input(x) and d.satisfied(x, y) for d in spec.disjuncts)


def _agree(text: str, points) -> int:
    spec = parse_vnnlib(text)
    hits = 0
    for x, y in points:
        expect = unsafe_by_oracle(text, x, y)
        assert _unsafe_by_spec(spec, x, y) == expect, (x, y)
        hits += expect
    return hits


def _grid_points(rng, n=400, nx=2, ny=2):
    # values on a coarse grid so that equalities and boundaries are hit exactly
    return [(rng.integers(-4, 5, nx) / 4.0, rng.integers(-4, 5, ny) / 4.0) for _ in range(n)]


# ----------------------------------------------------------------------------- bundled properties
@pytest.mark.parametrize("k", range(1, 11))
def test_all_acasxu_properties_parse_and_match_the_oracle(k):
    path = acasxu_property_path(k)
    text = path.read_text()
    spec = load_vnnlib(path)
    assert (spec.num_inputs, spec.num_outputs) == (5, 5)
    rng = np.random.default_rng(k)
    lo, hi = spec.hull()
    pts = []
    for _ in range(300):
        x = rng.uniform(lo - 0.05, hi + 0.05)
        pts.append((x, rng.normal(scale=3.0, size=5)))
    for d in spec.disjuncts:  # corners are inside the box: exercise the output part too
        pts += [(np.where(rng.random(5) < 0.5, d.lo, d.hi), rng.normal(scale=3.0, size=5)) for _ in range(50)]
    assert _agree(text, pts) > 0


def test_acasxu_property_6_is_two_input_boxes_times_four_output_clauses():
    spec = load_vnnlib(acasxu_property_path(6))
    assert len(spec.disjuncts) == 8 and len(spec.regions()) == 2
    boxes = {(tuple(d.lo), tuple(d.hi)) for d in spec.disjuncts}
    assert boxes == {
        ((-0.129289109, 0.11140846, -0.499999896, -0.5, -0.5), (0.700434925, 0.499999896, -0.499204121, 0.5, 0.5)),
        ((-0.129289109, -0.499999896, -0.499999896, -0.5, -0.5), (0.700434925, -0.11140846, -0.499204121, 0.5, 0.5)),
    }
    for region in spec.regions():
        # each clause is one Y-Y row: Y_j - Y_0 <= 0
        rows = sorted(tuple(c.A[0]) for c in region.clauses)
        assert rows == sorted(tuple(np.eye(5)[j] - np.eye(5)[0]) for j in range(1, 5))
        assert all(c.b.tolist() == [0.0] and c.input_rows.count == 0 for c in region.clauses)


def test_acasxu_property_1_and_2_boxes_and_rows():
    p1 = load_vnnlib(acasxu_property_path(1))
    (d,) = p1.disjuncts
    assert d.lo.tolist() == [0.6, -0.5, -0.5, 0.45, -0.5] and d.hi.tolist() == [0.679857769, 0.5, 0.5, 0.5, -0.45]
    assert d.A.tolist() == [[-1.0, 0, 0, 0, 0]] and d.b.tolist() == [-3.991125645861615]
    p2 = load_vnnlib(acasxu_property_path(2))
    assert p2.disjuncts[0].A.tolist() == [(np.eye(5)[j] - np.eye(5)[0]).tolist() for j in range(1, 5)]


@pytest.mark.parametrize("name", ["test_nano", "test_tiny", "test_small", "test_prop"])
def test_vnncomp_test_properties(name):
    spec = load_vnnlib(DATA / "vnncomp_test" / f"{name}.vnnlib")
    assert len(spec.disjuncts) == 1
    d = spec.disjuncts[0]
    if name == "test_nano":
        assert (d.lo.tolist(), d.hi.tolist(), d.A.tolist(), d.b.tolist()) == ([-1.0], [1.0], [[1.0]], [-1.0])
    if name in ("test_tiny", "test_small"):  # the box and the output row share one 'and' clause
        assert (d.lo.tolist(), d.hi.tolist(), d.A.tolist(), d.b.tolist()) == ([-1.0], [1.0], [[-1.0]], [-100.0])


# ----------------------------------------------------------------------------- constructs
def test_number_forms_and_comments():
    text = HEADER + """; a comment line
(assert (>= X_0 -.5)) ; trailing comment (with parens)
(assert (<= X_0 5.))
(assert (>= X_1 -1.5E-3))
(assert (<= X_1 +2.5e+1))
(assert (<= Y_0 1e-05))
(assert (>= Y_1 -0))
"""
    (d,) = parse_vnnlib(text).disjuncts
    assert d.lo.tolist() == [-0.5, -0.0015] and d.hi.tolist() == [5.0, 25.0]
    assert d.A.tolist() == [[1, 0], [0, -1]] and d.b.tolist() == [1e-05, 0.0]


def test_y_y_comparisons_and_dnf_over_outputs():
    text = HEADER + "(assert (<= X_0 1))(assert (>= X_0 -1))(assert (<= X_1 1))(assert (>= X_1 -1))\n" \
                    "(assert (or (and (>= Y_0 Y_1) (<= Y_0 0.5)) (and (<= Y_1 -0.25))))"
    spec = parse_vnnlib(text)
    assert len(spec.disjuncts) == 2 and len(spec.regions()) == 1
    assert spec.disjuncts[0].A.tolist() == [[-1, 1], [1, 0]] and spec.disjuncts[0].b.tolist() == [0, 0.5]
    assert _agree(text, _grid_points(np.random.default_rng(0))) > 0


def test_mixed_and_coupled_input_rows():
    text = HEADER + "(assert (and (<= X_0 1) (>= X_0 -1) (<= X_1 1) (>= X_1 -1)))\n" \
                    "(assert (<= (+ X_0 X_1) 0.5))\n(assert (>= Y_0 (- X_0 (* 2 Y_1))))"
    (d,) = parse_vnnlib(text).disjuncts
    assert d.input_rows.count == 1 and d.mixed_rows.count == 1 and d.output_rows.count == 0
    assert _agree(text, _grid_points(np.random.default_rng(1))) > 0


def test_strict_equal_not_chains_and_constants_match_the_oracle():
    text = HEADER + """
(assert (<= -1 X_0 1))
(assert (and (>= X_1 -1) (<= X_1 1)))
(assert (or (and (< Y_0 0.5) (= Y_1 0.25))
            (not (or (>= Y_0 -0.5) (> X_1 0)))
            (and (<= 1 2) (> Y_1 Y_0 X_0))
            (and (<= 2 1) (>= Y_0 -100))))
"""
    spec = parse_vnnlib(text)
    assert any(d.rows.strict.any() for d in spec.disjuncts)
    assert len(spec.disjuncts) == 3  # the (<= 2 1) clause is empty
    assert spec.notes and "dropped" in spec.notes[0]
    assert _agree(text, _grid_points(np.random.default_rng(2), n=3000)) > 0


def test_random_formulas_match_the_oracle():
    rng = np.random.default_rng(3)
    names = ["X_0", "X_1", "Y_0", "Y_1"]

    def atom():
        a = names[rng.integers(4)]
        b = names[rng.integers(4)] if rng.random() < 0.5 else str(rng.integers(-3, 4) / 4)
        return f"({rng.choice(['<=', '>=', '<', '>', '='])} {a} {b})"

    def formula(depth):
        if depth == 0 or rng.random() < 0.3:
            return atom()
        op = rng.choice(["and", "or", "not"])
        if op == "not":
            return f"(not {formula(depth - 1)})"
        return f"({op} " + " ".join(formula(depth - 1) for _ in range(rng.integers(1, 4))) + ")"

    box = "(assert (<= X_0 1))(assert (>= X_0 -1))(assert (<= X_1 1))(assert (>= X_1 -1))\n"
    checked = 0
    for _ in range(60):
        text = HEADER + box + "".join(f"(assert {formula(3)})\n" for _ in range(rng.integers(1, 3)))
        _agree(text, _grid_points(rng, n=150))
        checked += 1
    assert checked == 60


def test_gzip_file_and_large_disjunctions_are_fast(tmp_path):
    clauses = "\n".join(f"(and (<= X_0 {k / 1000 + 0.001}) (>= X_0 {k / 1000}) (<= X_1 1) (>= X_1 0) (<= Y_0 Y_1))"
                        for k in range(3000))
    text = HEADER + f"(assert (or {clauses}))"
    path = tmp_path / "big.vnnlib.gz"
    path.write_bytes(gzip.compress(text.encode()))
    spec = load_vnnlib(path)
    assert len(spec.disjuncts) == 3000 and spec.disjuncts[7].lo.tolist() == [0.007, 0.0]


# ----------------------------------------------------------------------------- errors
@pytest.mark.parametrize("body, line, fragment", [
    ("(assert (<= X_0 1)", 5, "never closed"),
    ("(assert (<= X_0 1)))", 5, "unbalanced ')'"),
    ("(assert (<= X_0 1))\n(assert (<= X_2 1))", 6, "X_2 is used but not declared"),
    ("(assert (<= X_0 nan))", 5, "not a finite number"),
    ("(assert (<= X_0 abc))", 5, "unexpected 'abc'"),
    ("(assert (<= (* X_0 X_1) 1))", 5, "not linear"),
    ("(assert (=> X_0 1))", 5, "unsupported operator '=>'"),
    ("(define-fun f () Real 1.0)", 5, "unsupported command 'define-fun'"),
    ("(declare-const X_0 Real)", 5, "declared twice (first at line 1)"),
    ("(declare-const Z_0 Real)", 5, "unsupported variable name"),
    ("(declare-const X_5 Int)", 5, "only Real variables"),
    ("(assert (<= X_0 1))\n(assert (>= X_0 0))\n(assert (<= X_1 1))\n\n(assert (<= Y_0 Y_1))", 5, "X_1 has no lower bound"),
])
def test_malformed_files_name_the_line(body, line, fragment):
    with pytest.raises(VnnlibError) as err:
        parse_vnnlib(HEADER + body, source="p.vnnlib")
    assert err.value.line == line, str(err.value)
    assert fragment in str(err.value) and str(err.value).startswith(f"p.vnnlib:{line}:")


def test_undeclared_gap_and_missing_declarations():
    with pytest.raises(VnnlibError, match="X_0 is not"):
        parse_vnnlib("(declare-const X_1 Real)\n(declare-const Y_0 Real)\n(assert (<= Y_0 1))")
    with pytest.raises(VnnlibError, match="no output variables"):
        parse_vnnlib("(declare-const X_0 Real)\n(assert (<= X_0 1))")
    with pytest.raises(VnnlibError, match="no assertions"):
        parse_vnnlib(HEADER)


def test_cli_malformed_property_exits_2_naming_the_line(cli, tmp_path):
    path = tmp_path / "bad.vnnlib"
    path.write_text(HEADER + "(assert (<= X_0 1))\n(assert (>= X_0 0))\n(assert (<= X_1 1))\n(assert (>= X_1 0))\n(assert (<== Y_0 1))\n")
    r = cli("verify", DATA / "vnncomp_test" / "test_nano.onnx", path)
    assert_bad_input(r, f"{path}:9:", "unsupported operator '<=='")


def test_cli_dimension_mismatch_exits_2(cli):
    r = cli("verify", DATA / "vnncomp_test" / "test_nano.onnx", acasxu_property_path(1))
    assert_bad_input(r, "declares 5 inputs", "model has 1 inputs")
    r = cli("verify", DATA / "vnncomp_test" / "test_nano.onnx", DATA / "vnncomp_test" / "missing.vnnlib")
    assert_bad_input(r, "does not exist")
