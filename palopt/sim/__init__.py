"""Round-based cluster simulation: traces, profiles, scheduling policies, the round loop and
metrics."""

from palopt.sim.engine import SimConfig, SimResult, SimulationStalled, Simulator, simulate
from palopt.sim.metrics import summary
from palopt.sim.policies import Fifo, Las, Srtf, Tiresias, get_policy
from palopt.sim.profile import ClusterProfile, correlated_profile, load_profile
from palopt.sim.trace import TraceJob, extra_jobs, load_trace, synthetic_trace

__all__ = [
    "ClusterProfile",
    "Fifo",
    "Las",
    "SimConfig",
    "SimResult",
    "SimulationStalled",
    "Simulator",
    "Srtf",
    "Tiresias",
    "TraceJob",
    "correlated_profile",
    "extra_jobs",
    "get_policy",
    "load_profile",
    "load_trace",
    "simulate",
    "summary",
    "synthetic_trace",
]
