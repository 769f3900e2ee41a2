"""Placement solvers behind one protocol and one registry."""

from palopt.solvers.base import Solver, SolverInfo, get_solver, list_solvers, register, solve

__all__ = ["Solver", "SolverInfo", "get_solver", "list_solvers", "register", "solve"]
