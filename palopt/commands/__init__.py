"""CLI command groups; each module provides ``register(subparsers)`` (see :mod:`palopt.cli`)."""
