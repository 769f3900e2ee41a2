"""``palopt profile import``, ``show`` and ``assign``: variability profile files."""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from palopt.binning import METHODS, bin_values
from palopt.commands import (
    add_cluster_arguments,
    check_output,
    cluster_of,
    file_path,
    image_path,
    input_file,
    writing,
)
from palopt.errors import InputError
from palopt.variability import (
    MISSING_RULES,
    VariabilityProfile,
    assign_profile,
    load_profile,
    read_measurements,
    save_profile,
)


def _names(text: str) -> list[str]:
    names = [t.strip() for t in text.split(",")]
    if not all(names):
        raise argparse.ArgumentTypeError(f"expected comma-separated names, got {text!r}")
    return names


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``profile`` command group."""
    group = sub.add_parser("profile", help="import and inspect variability profiles")
    cmds = group.add_subparsers(dest="profile_command", required=True, parser_class=type(group))

    p = cmds.add_parser(
        "import",
        help="read a per-GPU measurement CSV into a profile file",
        description="Group rows by the id columns (repeated runs of one GPU), take each GPU's "
        "median, normalise to the median GPU (larger = slower) and write a "
        "palopt.profile/1 JSON file.",
    )
    p.add_argument("file", type=input_file, help="CSV file with a header line")
    p.add_argument(
        "--id",
        required=True,
        type=_names,
        metavar="COLS",
        help="comma-separated columns identifying a GPU, e.g. cabinet,node,device",
    )
    p.add_argument(
        "--value",
        required=True,
        type=_names,
        metavar="COLS",
        help="measurement column(s), one per class, e.g. perf",
    )
    p.add_argument(
        "--class",
        dest="classes",
        type=_names,
        metavar="NAMES",
        help="class name(s), one per value column (default: the column names)",
    )
    p.add_argument(
        "--no-normalise",
        action="store_true",
        help="keep the values as they are (already relative slowdowns)",
    )
    p.add_argument("--out", "-o", type=file_path, required=True, help="profile file to write")
    p.add_argument(
        "--append",
        action="store_true",
        help="add the classes to the existing --out profile (joined on GPU ids)",
    )
    p.set_defaults(func=cmd_import)

    p = cmds.add_parser("show", help="print per-class spread and binning of a profile")
    p.add_argument("file", type=input_file, help="profile file (palopt.profile/1 JSON)")
    p.add_argument("--method", choices=METHODS, default="kmeans", help="binning rule")
    p.add_argument("--tol", type=float, default=0.02, help="relative tolerance (kmeans rule)")
    p.add_argument(
        "--plot", type=image_path, metavar="PNG", help="also draw histograms to this image file"
    )
    p.set_defaults(func=cmd_show)

    p = cmds.add_parser(
        "assign",
        help="give a simulated cluster's GPUs the values of measured GPUs",
        description="Draw measured GPUs (or whole servers) for every GPU of a cluster, keeping "
        "each GPU's values for all classes together, and write the profile keyed "
        "by the cluster's GPU ids (gpu0, gpu1, ... for a shape), with the measured origin.",
    )
    p.add_argument("file", type=input_file, help="profile file (palopt.profile/1 JSON)")
    add_cluster_arguments(p)
    p.add_argument("--seed", type=int, help="draw with this seed (default: profile order)")
    p.add_argument(
        "--missing",
        choices=MISSING_RULES,
        default="drop",
        help="classes a GPU was not measured in: drop such GPUs, count them as "
        "1.0, or sample a measured value (default: drop)",
    )
    p.add_argument(
        "--by",
        choices=("gpu", "server"),
        default="gpu",
        help="draw single GPUs or whole measured servers",
    )
    p.add_argument(
        "--replace",
        action="store_true",
        help="draw measured GPUs with replacement (needs --seed and --by gpu), so a cluster "
        "may have more GPUs than were measured",
    )
    p.add_argument("--out", "-o", type=file_path, required=True, help="profile file to write")
    p.set_defaults(func=cmd_assign)


def cmd_import(args: argparse.Namespace) -> int:
    """Import a measurement file."""
    check_output(args.out, [args.file], "--out")
    profile = read_measurements(
        args.file, args.id, args.value, args.classes, normalise=not args.no_normalise
    )
    if args.append and args.out.exists():
        profile = load_profile(args.out).merge(profile)
    with writing(args.out, "--out"):
        save_profile(profile, args.out)
    print(
        f"{args.out}: {profile.n_gpus} GPUs, classes {', '.join(profile.classes)} "
        f"({profile.source})"
    )
    return 0


def summarise(profile: VariabilityProfile, method: str = "kmeans", tol: float = 0.02) -> str:
    """Per-class spread and binning of a profile, as a table."""
    lines = [
        f"{profile.n_gpus} GPUs; source: {profile.source or '-'}",
        f"{'class':<12} {'gpus':>5} {'min':>7} {'median':>7} {'p95':>7} {'max':>7} "
        f"{'k':>3}  levels ({method})",
    ]
    for c, name in enumerate(profile.classes):
        v = profile.values[c][~np.isnan(profile.values[c])]
        b = bin_values(v, method=method, tol=tol)
        counts = np.bincount(b.labels, minlength=b.k)
        lv = b.levels[np.argsort(b.labels, kind="stable")][np.cumsum(counts) - 1]
        levels = " ".join(f"{x:.4f}x{n}" for x, n in zip(lv, counts, strict=True))
        lines.append(
            f"{name:<12} {len(v):>5} {v.min():>7.4f} {np.median(v):>7.4f} "
            f"{np.percentile(v, 95):>7.4f} {v.max():>7.4f} {b.k:>3}  {levels}"
        )
    return "\n".join(lines)


def plot_profile(
    profile: VariabilityProfile, path: Path, method: str = "kmeans", tol: float = 0.02
) -> None:
    """Histogram of each class's values with its binned levels marked, as a PNG file.

    Parameters
    ----------
    profile : VariabilityProfile
    path : Path
        The PNG file to write (110 dpi); an existing file is overwritten.
    method : str, default "kmeans"
        The binning method (:func:`palopt.binning.bin_values`).
    tol : float, default 0.02
        The binning tolerance.

    Raises
    ------
    ImportError
        If matplotlib is missing.
    InputError
        For a bad ``method`` or ``tol`` (as :func:`palopt.binning.bin_values`).

    Examples
    --------
    >>> import tempfile
    >>> values = np.array([[1.0, 0.99, 1.01, 1.0, 1.2, 1.21, 1.19, 1.0]])
    >>> p = VariabilityProfile(("A",), tuple(f"g{i}" for i in range(8)), values)
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     plot_profile(p, Path(folder, "profile.png"))
    ...     Path(folder, "profile.png").stat().st_size > 0
    True
    """
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise ImportError(f"--plot needs matplotlib (pip install 'palopt[plot]'): {exc}") from None
    n = len(profile.classes)
    fig, axes = plt.subplots(n, 1, figsize=(7, 2.2 * n), squeeze=False)
    for c, (ax, name) in enumerate(zip(axes[:, 0], profile.classes, strict=True)):
        v = profile.values[c][~np.isnan(profile.values[c])]
        b = bin_values(v, method=method, tol=tol)
        ax.hist(v, bins=min(60, max(10, len(v) // 4)), color="0.6")
        for level in b.distinct_levels:
            ax.axvline(level, color="tab:red", linewidth=1)
        ax.set_title(f"{name}: {len(v)} GPUs, {b.k} levels ({method})", fontsize=9)
        ax.set_ylabel("GPUs")
    axes[-1, 0].set_xlabel("slowdown (1.0 = median GPU, larger = slower)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def cmd_show(args: argparse.Namespace) -> int:
    """Show a profile."""
    if not 0 <= args.tol < np.inf:  # inf was refused later, as "tol", after the checks
        raise InputError("--tol", args.tol, "must be a finite number >= 0")
    check_output(args.plot, [args.file], "--plot")
    profile = load_profile(args.file)
    print(summarise(profile, args.method, args.tol))
    if args.plot:
        with writing(args.plot, "--plot"):
            plot_profile(profile, args.plot, args.method, args.tol)
        print(f"wrote {args.plot}")
    return 0


def cmd_assign(args: argparse.Namespace) -> int:
    """Assign a profile to a cluster."""
    check_output(args.out, [args.file, args.topology], "--out")
    topology = cluster_of(args)
    profile = assign_profile(
        load_profile(args.file), topology, args.seed, args.missing, args.by, args.replace
    )
    with writing(args.out, "--out"):
        save_profile(profile, args.out)
    print(
        f"{args.out}: {topology.n_gpus} GPUs ({args.cluster or args.topology}), classes "
        f"{', '.join(profile.classes)}, from {len(set(profile.origin))} measured GPUs"
    )
    return 0
