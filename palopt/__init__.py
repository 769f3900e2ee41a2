"""palopt: variability- and locality-aware placement of ML jobs on GPU clusters."""

from palopt.binning import bin_values
from palopt.cost import assert_feasible, check_feasible, evaluate, job_cost
from palopt.errors import InfeasiblePlacementError, InputError, PaloptError, UnknownSolverError
from palopt.instance import Instance, Job, penalty_matrix
from palopt.io import instance_from_dict, instance_to_dict, load_instance, save_instance
from palopt.result import JobPlacement, PlacementResult, load_result
from palopt.solvers import get_solver, list_solvers, solve
from palopt.topology import Topology, build_cluster, parse_shape
from palopt.variability import VariabilityProfile, assign_profile, build_instance, load_profile

__all__ = [
    "InfeasiblePlacementError",
    "Instance",
    "InputError",
    "Job",
    "JobPlacement",
    "PaloptError",
    "PlacementResult",
    "Topology",
    "UnknownSolverError",
    "VariabilityProfile",
    "assert_feasible",
    "assign_profile",
    "bin_values",
    "build_cluster",
    "build_instance",
    "check_feasible",
    "evaluate",
    "get_solver",
    "instance_from_dict",
    "instance_to_dict",
    "job_cost",
    "list_solvers",
    "load_instance",
    "load_profile",
    "load_result",
    "parse_shape",
    "penalty_matrix",
    "save_instance",
    "solve",
]
__version__ = "0.1.0"
