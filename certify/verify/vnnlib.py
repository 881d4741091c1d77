"""VNNLIB parser: a tokenizer and an iterative S-expression reader, then normalisation to a DNF.

Supported (everything the VNN-COMP benchmark generators write, and a little more):

- `(declare-const X_i Real)` / `(declare-const Y_j Real)`: inputs and outputs over the row-major
  flattened tensors; the declared indices must be 0..n-1 without gaps.
- `(assert F)`: the asserts are conjoined. F is built from `and`, `or`, `not` and comparisons
  `<=`, `>=`, `<`, `>`, `=` (chains like `(<= a b c)` allowed) between linear terms: numbers,
  variables, `(+ t ...)`, `(- t ...)`, `(* c t)` with a numeric factor.
- Numbers in decimal or scientific notation with an optional sign (`-0.5`, `.5`, `5.`, `1e-05`,
  `+2.5E+3`), parsed by Python's correctly rounded `float`. Comments start with `;`.
- `set-logic`, `set-info`, `set-option`, `check-sat`, `get-model`, `exit` are ignored.

Anything else (`define-fun`, non-Real sorts, non-linear terms, variables other than X_i / Y_j,
NaN/inf literals) is a `VnnlibError` (a `BadInput`: exit 2 in the CLI) naming the file and line.
The asserts describe the *unsafe* set; see `certify.verify.spec`.
"""

from __future__ import annotations

import gzip
import math
import os
import re
from typing import Iterable

import numpy as np

from models.errors import BadInput

from .spec import Disjunct, LinearRows, Spec

# a DNF larger than this is refused rather than expanded (a conjunction of many `or`s multiplies)
MAX_DISJUNCTS = 1_000_000

_TOKEN = re.compile(r"\(|\)|[^\s()]+")
_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?\Z")
_VARIABLE = re.compile(r"([XY])_(0|[1-9]\d*)\Z")
_IGNORED = frozenset({"set-logic", "set-info", "set-option", "check-sat", "get-model", "exit"})
_COMPARISONS = frozenset({"<=", ">=", "<", ">", "="})


class VnnlibError(BadInput):
    """A VNNLIB file that cannot be read: the message names the file and line."""

    def __init__(self, source: str, line: int, message: str) -> None:
        self.source, self.line = source, line
        super().__init__(f"{source}:{line}: {message}" if line else f"{source}: {message}")


# ----------------------------------------------------------------------------- S-expressions
class _List:
    __slots__ = ("items", "line")

    def __init__(self, line: int) -> None:
        self.items: list = []
        self.line = line


class _Atom:
    __slots__ = ("text", "line")

    def __init__(self, text: str, line: int) -> None:
        self.text, self.line = text, line


def _read_sexprs(text: str, source: str) -> list:
    """Top-level S-expressions of `text` (lists of `_List` / `_Atom`), with line numbers."""
    stack: list[_List] = []
    top: list = []
    for line, raw in enumerate(text.split("\n"), start=1):
        cut = raw.find(";")
        for tok in _TOKEN.findall(raw if cut < 0 else raw[:cut]):
            if tok == "(":
                node = _List(line)
                (stack[-1].items if stack else top).append(node)
                stack.append(node)
            elif tok == ")":
                if not stack:
                    raise VnnlibError(source, line, "unbalanced ')' (no matching '(')")
                stack.pop()
            else:
                (stack[-1].items if stack else top).append(_Atom(tok, line))
    if stack:
        raise VnnlibError(source, stack[-1].line, "unbalanced '(' (the expression opened here is never closed)")
    return top


# ----------------------------------------------------------------------------- linear algebra on terms
# A linear term is (coefficients {("X"|"Y", index): value}, constant); a constraint is
# sum coef * var <= rhs (or < when strict).
Coefs = dict[tuple[str, int], float]


class _Constraint:
    __slots__ = ("coefs", "rhs", "strict", "line")

    def __init__(self, coefs: Coefs, rhs: float, strict: bool, line: int) -> None:
        self.coefs, self.rhs, self.strict, self.line = coefs, rhs, strict, line

    def negated(self) -> "_Constraint":
        # not (a <= r)  <=>  -a < -r ;  not (a < r)  <=>  -a <= -r
        return _Constraint({k: -v for k, v in self.coefs.items()}, -self.rhs, not self.strict, self.line)


class _Parser:
    def __init__(self, source: str) -> None:
        self.source = source
        self.declared: dict[str, dict[int, int]] = {"X": {}, "Y": {}}  # index -> line

    def error(self, line: int, message: str) -> VnnlibError:
        return VnnlibError(self.source, line, message)

    # ---------------------------------------------------------------- commands
    def declare(self, node: _List) -> None:
        items = node.items
        if len(items) != 3 or not all(isinstance(i, _Atom) for i in items[1:]):
            raise self.error(node.line, "declare-const takes a name and a sort, e.g. (declare-const X_0 Real)")
        name, sort = items[1].text, items[2].text
        m = _VARIABLE.match(name)
        if not m:
            raise self.error(node.line, f"unsupported variable name {name!r}: VNNLIB variables are X_i (inputs) and Y_j (outputs)")
        if sort != "Real":
            raise self.error(node.line, f"{name} has sort {sort}; only Real variables are supported")
        kind, idx = m.group(1), int(m.group(2))
        if idx in self.declared[kind]:
            raise self.error(node.line, f"{name} is declared twice (first at line {self.declared[kind][idx]})")
        self.declared[kind][idx] = node.line

    def dims(self) -> tuple[int, int]:
        dims = []
        for kind, what in (("X", "input"), ("Y", "output")):
            idx = self.declared[kind]
            if not idx:
                raise self.error(0, f"no {what} variables declared (expected (declare-const {kind}_0 Real) ...)")
            n = max(idx) + 1
            if len(idx) != n:
                missing = min(set(range(n)) - set(idx))
                raise self.error(idx[n - 1], f"{kind}_{n - 1} is declared but {kind}_{missing} is not; "
                                             f"{what} variables must be {kind}_0..{kind}_{n - 1}")
            dims.append(n)
        return dims[0], dims[1]

    # ---------------------------------------------------------------- terms
    # Terms and formulas are evaluated with an explicit stack (post-order), never by recursion:
    # a file nested thousands of levels deep parses like a flat one (no RecursionError).
    def _atom_term(self, node: _Atom) -> tuple[Coefs, float]:
        t = node.text
        if _NUMBER.match(t):
            return {}, float(t)
        m = _VARIABLE.match(t)
        if m:
            kind, idx = m.group(1), int(m.group(2))
            if idx not in self.declared[kind]:
                raise self.error(node.line, f"{t} is used but not declared")
            return {(kind, idx): 1.0}, 0.0
        if t.lower().lstrip("+-") in ("inf", "infinity", "nan"):
            raise self.error(node.line, f"{t} is not a finite number")
        raise self.error(node.line, f"unexpected {t!r}: expected a number or a variable X_i / Y_j")

    def term(self, root) -> tuple[Coefs, float]:
        values: list[tuple[Coefs, float]] = []
        stack: list[tuple[object, bool]] = [(root, False)]
        while stack:
            node, ready = stack.pop()
            if isinstance(node, _Atom):
                values.append(self._atom_term(node))
                continue
            if not node.items or not isinstance(node.items[0], _Atom):
                raise self.error(node.line, "expected a term: a number, a variable or (+ ...), (- ...), (* ...)")
            op, args = node.items[0].text, node.items[1:]
            if op not in ("+", "-", "*") or not args:
                raise self.error(node.line, f"unsupported term operator {op!r}: terms are numbers, variables, +, - "
                                            "and (* number term)")
            if not ready:  # the operands first (in order), then this node
                stack.append((node, True))
                stack.extend((a, False) for a in reversed(args))
                continue
            terms = values[len(values) - len(args):]
            del values[len(values) - len(args):]
            values.append(self._combine_terms(node, op, terms))
        return values[0]

    def _combine_terms(self, node: _List, op: str, terms: list[tuple[Coefs, float]]) -> tuple[Coefs, float]:
        if op in ("+", "-"):
            if op == "-" and len(terms) == 1:
                return {k: -v for k, v in terms[0][0].items()}, -terms[0][1]
            coefs, const = dict(terms[0][0]), terms[0][1]
            sign = 1.0 if op == "+" else -1.0
            for c, k0 in terms[1:]:
                for k, v in c.items():
                    coefs[k] = coefs.get(k, 0.0) + sign * v
                const += sign * k0
            return coefs, const
        linear = [t for t in terms if t[0]]
        if len(linear) > 1:
            raise self.error(node.line, "a product of variables is not linear; only (* number term) is supported")
        factor = math.prod(t[1] for t in terms if not t[0])
        coefs, const = linear[0] if linear else ({}, 1.0)
        return {k: factor * v for k, v in coefs.items()}, factor * const

    # ---------------------------------------------------------------- formulas -> DNF
    def comparison(self, node: _List, op: str) -> list[_Constraint]:
        args = node.items[1:]
        if len(args) < 2:
            raise self.error(node.line, f"({op} ...) needs at least two operands")
        terms = [self.term(a) for a in args]
        out: list[_Constraint] = []
        for (ca, ka), (cb, kb) in zip(terms, terms[1:]):
            if op in ("<=", "<", "="):   # a - b <= 0
                out.append(self._constraint(ca, ka, cb, kb, op == "<", node.line))
            if op in (">=", ">", "="):   # b - a <= 0
                out.append(self._constraint(cb, kb, ca, ka, op == ">", node.line))
        return out

    @staticmethod
    def _constraint(ca: Coefs, ka: float, cb: Coefs, kb: float, strict: bool, line: int) -> _Constraint:
        coefs = dict(ca)
        for k, v in cb.items():
            coefs[k] = coefs.get(k, 0.0) - v
        return _Constraint({k: v for k, v in coefs.items() if v != 0.0}, kb - ka, strict, line)

    def dnf(self, root, negate: bool = False) -> list[list[_Constraint]]:
        """The formula (or its negation) as a list of conjunctions (an explicit stack, no recursion)."""
        values: list[list[list[_Constraint]]] = []
        stack: list[tuple[object, bool, bool]] = [(root, negate, False)]
        while stack:
            node, neg, ready = stack.pop()
            if isinstance(node, _Atom):
                if node.text in ("true", "false"):
                    values.append([[]] if (node.text == "true") != neg else [])
                    continue
                raise self.error(node.line, f"unexpected {node.text!r} where a formula was expected")
            if not node.items or not isinstance(node.items[0], _Atom):
                raise self.error(node.line, "expected a formula: (and ...), (or ...), (not ...) or a comparison")
            op, args = node.items[0].text, node.items[1:]
            if op == "not":
                if len(args) != 1:
                    raise self.error(node.line, "(not F) takes exactly one formula")
                stack.append((args[0], not neg, False))  # its value is this node's value
            elif op in ("and", "or"):
                if not ready:  # the operands first (in order), then this node
                    stack.append((node, neg, True))
                    stack.extend((a, neg, False) for a in reversed(args))
                    continue
                parts = values[len(values) - len(args):]
                del values[len(values) - len(args):]
                if (op == "or") != neg:
                    values.append([conj for p in parts for conj in p])
                else:
                    values.append(self.product(parts, node.line))
            elif op in _COMPARISONS:
                conj = self.comparison(node, op)
                # not (c1 and c2 ...) = (not c1) or (not c2) ...
                values.append([[c.negated()] for c in conj] if neg else [conj])
            else:
                raise self.error(node.line, f"unsupported operator {op!r} in an assertion; supported: and, or, not, "
                                            "<=, >=, <, >, =")
        return values[0]

    def product(self, parts: Iterable[list[list[_Constraint]]], line: int) -> list[list[_Constraint]]:
        out: list[list[_Constraint]] = [[]]
        for p in parts:
            if len(p) == 1:
                out = [a + p[0] for a in out]
                continue
            if len(out) * len(p) > MAX_DISJUNCTS:
                raise self.error(line, f"the property expands to more than {MAX_DISJUNCTS} disjuncts "
                                       "(a conjunction of large 'or's); split it into several files")
            out = [a + b for a in out for b in p]
        return out


# ----------------------------------------------------------------------------- DNF -> Disjuncts
class _ClauseBuilder:
    """Accumulates one conjunction: single-input bounds into the box, the rest into rows."""

    def __init__(self, n: int, m: int) -> None:
        self.n, self.m = n, m
        self.lo = np.full(n, -np.inf)
        self.hi = np.full(n, np.inf)
        self.rows: list[tuple[Coefs, float, bool, int]] = []
        self.false_line = 0  # a constant constraint that is false: the clause is empty

    def copy(self) -> "_ClauseBuilder":
        c = _ClauseBuilder(self.n, self.m)
        c.lo, c.hi, c.rows, c.false_line = self.lo.copy(), self.hi.copy(), list(self.rows), self.false_line
        return c

    def add(self, c: _Constraint) -> None:
        if not c.coefs:
            if not (0.0 < c.rhs if c.strict else 0.0 <= c.rhs):
                self.false_line = self.false_line or c.line
            return
        if len(c.coefs) == 1:
            (kind, i), a = next(iter(c.coefs.items()))
            if kind == "X":
                bound = c.rhs / a + 0.0  # + 0.0: no -0.0 bounds
                if a not in (1.0, -1.0):  # inexact quotient: the box gets an outward-rounded bound, the row stays exact
                    bound = float(np.nextafter(bound, np.inf if a > 0 else -np.inf))
                if a > 0:
                    self.hi[i] = min(self.hi[i], bound)
                else:
                    self.lo[i] = max(self.lo[i], bound)
                if not c.strict and a in (1.0, -1.0):
                    return
        self.rows.append((c.coefs, c.rhs, c.strict, c.line))

    def build(self, parser: _Parser, line: int) -> Disjunct | None:
        if self.false_line or np.any(self.lo > self.hi):
            return None  # an empty clause adds nothing to the unsafe set
        for k in range(self.n):
            if not (np.isfinite(self.lo[k]) and np.isfinite(self.hi[k])):
                side = "lower" if not np.isfinite(self.lo[k]) else "upper"
                raise parser.error(line, f"input X_{k} has no {side} bound in the clause starting here; "
                                         "every input must be bounded (e.g. (assert (<= X_0 1.0)))")
        k = len(self.rows)
        G, H = np.zeros((k, self.n)), np.zeros((k, self.m))
        d, strict = np.empty(k), np.zeros(k, dtype=bool)
        for r, (coefs, rhs, s, _) in enumerate(self.rows):
            for (kind, i), v in coefs.items():
                (G if kind == "X" else H)[r, i] += v
            d[r], strict[r] = rhs, s
        rows = LinearRows(G, H, d, strict, tuple(r[3] for r in self.rows))
        return Disjunct(self.lo, self.hi, rows, line)


def parse_vnnlib(text: str, source: str = "<string>") -> Spec:
    """Parse VNNLIB text into a `Spec` (the unsafe set as a DNF of linear clauses)."""
    p = _Parser(source)
    asserts: list[_List] = []
    for node in _read_sexprs(text, source):
        if isinstance(node, _Atom):
            raise p.error(node.line, f"unexpected {node.text!r} at the top level (expected (declare-const ...) or (assert ...))")
        head = node.items[0] if node.items else None
        if not isinstance(head, _Atom):
            raise p.error(node.line, "expected a command such as (declare-const ...) or (assert ...)")
        if head.text == "declare-const":
            p.declare(node)
        elif head.text == "assert":
            if len(node.items) != 2:
                raise p.error(node.line, "(assert F) takes exactly one formula")
            asserts.append(node)
        elif head.text not in _IGNORED:
            raise p.error(node.line, f"unsupported command {head.text!r}; VNNLIB files use declare-const and assert")
    n, m = p.dims()
    if not asserts:
        raise p.error(0, "no assertions: the file does not describe any unsafe set")

    # asserts with one conjunction are common to every disjunct; the others are multiplied out
    common = _ClauseBuilder(n, m)
    parts: list[list[list[_Constraint]]] = []
    part_lines: list[int] = []
    for node in asserts:
        d = p.dnf(node.items[1])
        if len(d) == 1:
            for c in d[0]:
                common.add(c)
        else:
            parts.append(d)
            part_lines.append(node.line)
    first_line = asserts[0].line
    combos = p.product(parts, part_lines[0] if part_lines else first_line)
    disjuncts: list[Disjunct] = []
    dropped = 0
    for conj in combos:
        b = common.copy()
        for c in conj:
            b.add(c)
        disjunct = b.build(p, min((c.line for c in conj), default=first_line))
        if disjunct is None:
            dropped += 1
        else:
            disjuncts.append(disjunct)
    notes = (f"{dropped} of {len(combos)} clauses are empty (contradictory bounds) and were dropped",) if dropped else ()
    return Spec(n, m, tuple(disjuncts), source, notes)


def load_vnnlib(path: str | os.PathLike) -> Spec:
    """Read a `.vnnlib` (or gzip-compressed `.vnnlib.gz`) file into a `Spec`."""
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise BadInput(f"property file {path} does not exist" if not os.path.exists(path)
                       else f"property path {path} is not a file")
    try:
        with open(path, "rb") as fh:
            raw = fh.read()
        if raw[:2] == b"\x1f\x8b":
            raw = gzip.decompress(raw)
        text = raw.decode("utf-8")
    except (OSError, EOFError, gzip.BadGzipFile) as exc:
        raise BadInput(f"cannot read property file {path}: {exc}") from None
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise VnnlibError(path, line, "the file is not UTF-8 text") from None
    return parse_vnnlib(text, source=path)


__all__ = ["MAX_DISJUNCTS", "VnnlibError", "load_vnnlib", "parse_vnnlib"]
