"""Exact rational linear algebra for tests: independent answers to compare lib's solvers with."""

from fractions import Fraction


def solve(A, b):
    """x with A x = b exactly, for a non-singular square A (Gauss-Jordan in rationals).

    Entries of A and b may be floats (taken at their exact binary values) or Fractions.
    """
    def q(v):
        return v if isinstance(v, Fraction) else Fraction(float(v))

    n = len(b)
    M = [[q(A[i][j]) for j in range(n)] + [q(b[i])] for i in range(n)]
    for col in range(n):
        piv = next(r for r in range(col, n) if M[r][col] != 0)
        M[col], M[piv] = M[piv], M[col]
        for r in range(n):
            if r != col and M[r][col] != 0:
                f = M[r][col] / M[col][col]
                M[r] = [a - f * c for a, c in zip(M[r], M[col], strict=True)]
    return [M[i][n] / M[i][i] for i in range(n)]
