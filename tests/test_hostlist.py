"""Slurm host lists: expansion, compression and their round trip."""

from __future__ import annotations

import tracemalloc

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from palopt.errors import InputError
from palopt.hostlist import compress_hostlist, expand_hostlist


@pytest.mark.parametrize(
    ("text", "names"),
    [
        (
            "node[01-04,07],gpu-a[1-3]",
            ["node01", "node02", "node03", "node04", "node07", "gpu-a1", "gpu-a2", "gpu-a3"],
        ),
        ("n[8-10]", ["n8", "n9", "n10"]),
        ("n[08-10]", ["n08", "n09", "n10"]),
        ("login", ["login"]),
        (" a1,b2 ", ["a1", "b2"]),
        ("r[1-2]n[1-2]", ["r1n1", "r1n2", "r2n1", "r2n2"]),
        ("a[1-2]b[3]c[5-6]", ["a1b3c5", "a1b3c6", "a2b3c5", "a2b3c6"]),
        ("x[3]-ib", ["x3-ib"]),
        # white space separates as Slurm's does ("a1 a2" was one host name with a space)
        ("a1 a2", ["a1", "a2"]),
        ("a1 , b[1-2]\tc", ["a1", "b1", "b2", "c"]),
    ],
)
def test_expand(text: str, names: list[str]) -> None:
    assert expand_hostlist(text) == names


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("node[01-04", "not closed"),
        ("node01-04]", "without"),
        ("node[[1-2]]", "nested"),
        ("node[4-1]", "start above end"),
        ("node[a-c]", "bad range"),
        ("node[1-]", "bad range"),
        ("node[]", "bad range"),
        ("a,,b", "empty host name"),
        ("a , ,b", "empty host name"),
        ("n[1, 3]", "bad range"),
        # "n[\u0661-\u0662]" (Arabic-Indic digits) expanded to n1, n2, renaming the hosts
        ("n[\u0661-\u0662]", "bad range"),
        ("n[1-\u00b2]", "bad range"),  # was "invalid literal for int()"
        ("", "empty host name"),
        # compressing it back (palopt topology show) raised ValueError in int()
        ("n" + "9" * 4301, "a name of 4,302 characters"),
        ("n[1-2]" + "x" * 260, "a name of 262 characters"),
        ("a," + "x" * 300, "a name of 300 characters"),
        ("x" * 256, "a name of 256 characters"),
        # int() refused it: "Exceeds the limit (4300 digits) ... sys.set_int_max_str_digits()"
        ("n[" + "1" * 5000 + "]", "a number of 5,000 digits"),
        ("n[1-" + "1" * 5000 + "]", "a number of 5,000 digits"),
        ("n[1-2]x[01-100]" + "y" * 251, "a name of 257 characters"),
    ],
)
def test_expand_errors(text: str, problem: str) -> None:
    with pytest.raises(InputError, match=problem) as info:
        expand_hostlist(text, "topology.conf:3")
    assert info.value.field == "topology.conf:3"


@pytest.mark.parametrize(
    ("names", "text"),
    [
        (["node03", "node01", "node02", "node07"], "node[01-03,07]"),
        (["n9", "n10", "n11"], "n[9-11]"),
        (["n09", "n10"], "n[09-10]"),
        (["n1", "n01"], "n[1,01]"),
        (["node01"], "node01"),
        (["b", "a2", "a1", "a1"], "a[1-2],b"),
    ],
)
def test_compress(names: list[str], text: str) -> None:
    assert compress_hostlist(names) == text


def test_compress_rejects_bad_names() -> None:
    with pytest.raises(InputError):
        compress_hostlist(["a[1]"])
    with pytest.raises(InputError, match="at most 255 characters"):
        compress_hostlist(["n" + "9" * 4301])  # was ValueError from int()
    assert compress_hostlist(["n" + "9" * 254]) == "n" + "9" * 254


_prefix = st.text(alphabet="abz-.", min_size=0, max_size=4) | st.sampled_from(["r1n", "gpu-a"])
_host = st.one_of(
    st.text(alphabet="abz-", min_size=1, max_size=5),  # no trailing number
    st.builds(lambda p, v, w: p + str(v).zfill(w), _prefix, st.integers(0, 120), st.integers(0, 4)),
)


@given(st.lists(_host, max_size=40))
@settings(deadline=None)  # a pause of a loaded machine is not a failure
def test_round_trip(names: list[str]) -> None:
    text = compress_hostlist(names)
    back = expand_hostlist(text) if names else []
    assert len(back) == len(set(back))
    assert set(back) == set(names)
    if names:
        assert compress_hostlist(back) == text


@pytest.mark.parametrize("name", ["big box", "a\tb", "a\u00a0b", "", "a,b", "a[1]", "b]"])
def test_compress_rejects_names_that_would_not_expand_back(name: str) -> None:
    # "big box,other" expanded to three hosts
    with pytest.raises(InputError, match="white space"):
        compress_hostlist([name, "other"])


def test_compress_numbers_only_ascii_digits() -> None:
    # "n\u0661" (an Arabic-Indic 1) and "n2" were written "n[\u0661-2]", which expands to n1, n2
    names = ["n\u0661", "n2"]
    assert set(expand_hostlist(compress_hostlist(names))) == set(names)


@given(st.lists(st.text(max_size=5), min_size=1, max_size=8))
@settings(deadline=None)  # a pause of a loaded machine is not a failure
def test_compress_refuses_or_round_trips(names: list[str]) -> None:
    try:
        text = compress_hostlist(names)
    except InputError:
        return
    back = expand_hostlist(text)
    assert len(back) == len(set(back))
    assert set(back) == set(names)


@pytest.mark.parametrize("text", ["n[0-1048575,0-1048575,0-1048575]", "a[0-1048575]b[0-1048575]"])
def test_size_limit_is_checked_before_names_are_built(text: str) -> None:
    # each range was within the limit, so 3 (or 2) x 2**20 names were built, then refused
    tracemalloc.start()
    try:
        with pytest.raises(InputError, match="names more than 1,048,576 hosts"):
            expand_hostlist(text)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1_000_000


def test_name_length_is_checked_before_names_are_built() -> None:
    # 100,000 names of up to 307 characters (30 MB) were built, then refused for their length
    tracemalloc.start()
    try:
        with pytest.raises(InputError, match="a name of 307 characters"):
            expand_hostlist("x" * 300 + "[1-100000]y")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1_000_000


def test_a_name_of_the_longest_length_expands() -> None:
    """A host name of MAX_NAME (255) characters is taken, by expand as by compress."""
    name = "n" + "9" * 254
    assert expand_hostlist(f"a1,{name}") == ["a1", name]
    assert expand_hostlist("n" * 250 + "[1-2]x[09-100]")[-1] == "n" * 250 + "2x100"


def test_size_limit_counts_the_names_of_all_items() -> None:
    """The host limit is over the whole list, not each item: a second item past it is refused."""
    with pytest.raises(InputError, match="names more than 1,048,576 hosts"):
        expand_hostlist("n[1-1048576],m1")
