"""Option choices of the solver layer, in a module that imports nothing heavy (CLI start-up)."""

BOUND_METHODS: tuple[str, ...] = ("interval", "symbolic", "lp")
BACKEND_CHOICES: tuple[str, ...] = ("auto", "gurobi", "highs", "cbc")
FORMULATIONS: tuple[str, ...] = ("forward", "backward")
PASS_BOUNDS: tuple[str, ...] = ("interval", "lp")
