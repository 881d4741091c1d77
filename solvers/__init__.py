"""Bounds, norms and solver back-ends (MILP, SDP). Never imports `certify`."""
