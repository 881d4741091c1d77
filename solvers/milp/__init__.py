"""Solver-neutral MILP models, network encodings and back-ends (HiGHS, Gurobi, CBC)."""
