"""Exact linear algebra over `fractions.Fraction` for the small systems of the region proofs."""

from __future__ import annotations

from fractions import Fraction


def rref(aug: list[list[Fraction]], columns: int) -> tuple[list[list[Fraction]], list[int]]:
    """Gauss-Jordan elimination of the rows `aug` (augmented: `columns` coefficient columns, then
    right-hand sides) in place: the reduced row echelon form and the pivot column of each leading
    row (row i has its pivot in pivots[i])."""
    pivots: list[int] = []
    r = 0
    for col in range(columns):
        if r == len(aug):
            break
        piv = next((i for i in range(r, len(aug)) if aug[i][col] != 0), None)
        if piv is None:
            continue
        aug[r], aug[piv] = aug[piv], aug[r]
        inv = 1 / aug[r][col]
        aug[r] = [v * inv for v in aug[r]]
        for i in range(len(aug)):
            if i != r and aug[i][col] != 0:
                f = aug[i][col]
                aug[i] = [a - f * b for a, b in zip(aug[i], aug[r])]
        pivots.append(col)
        r += 1
    return aug, pivots


def solve_square(M: list[list[Fraction]], rhs: list[Fraction]) -> list[Fraction] | None:
    """The exact solution of the square system M v = rhs, or None when M is singular."""
    k = len(M)
    aug, pivots = rref([list(row) + [b] for row, b in zip(M, rhs)], k)
    if len(pivots) < k:
        return None
    return [aug[i][k] for i in range(k)]


__all__ = ["rref", "solve_square"]
