"""Option choices of the solver layer, in a module that imports nothing heavy (CLI start-up).

The one definition of each list of names a user may type: norms, MILP back-ends, bound methods.
"""

#: vector norms of inputs and outputs (every question takes these; parse_norm accepts aliases)
NORMS: tuple[str, ...] = ("l1", "l2", "linf")
BOUND_METHODS: tuple[str, ...] = ("interval", "symbolic", "lp")
#: the MILP solvers, in the order `auto` prefers them
MILP_BACKENDS: tuple[str, ...] = ("gurobi", "highs", "cbc")
BACKEND_CHOICES: tuple[str, ...] = ("auto",) + MILP_BACKENDS
FORMULATIONS: tuple[str, ...] = ("forward", "backward")
PASS_BOUNDS: tuple[str, ...] = ("interval", "lp")
