"""Lipschitz certificates: global upper bounds (`global_bounds`, `sll`) and local constants."""
