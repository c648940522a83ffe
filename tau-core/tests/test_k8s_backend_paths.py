"""Artifact paths can never escape the result directory (property-based)."""

from __future__ import annotations

import posixpath

from hypothesis import given, settings
from hypothesis import strategies as st

from tau_core.backends.kubernetes import safe_relative
from tau_core.errors import UsageError

SEGMENTS = st.sampled_from(["a", "b.txt", "..", ".", "", "~", "x -> /etc", "c\\d", "e\x00", "/", "f@", "g\n"])


@settings(max_examples=400, deadline=None)
@given(st.lists(SEGMENTS, min_size=1, max_size=6), st.booleans())
def test_accepted_paths_stay_inside_the_root(parts: list[str], absolute: bool) -> None:
    path = ("/" if absolute else "") + "/".join(parts)
    try:
        normalized = safe_relative(path)
    except UsageError:
        return
    joined = posixpath.normpath(posixpath.join("/root/results", normalized))
    assert joined.startswith("/root/results/")
    assert "\x00" not in normalized and "\\" not in normalized and "->" not in normalized
    assert not normalized.startswith("/") and ".." not in normalized.split("/")


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=40))
def test_any_text_is_either_refused_or_contained(text: str) -> None:
    try:
        normalized = safe_relative(text)
    except UsageError:
        return
    assert posixpath.normpath(posixpath.join("/r", normalized)).startswith("/r/")


def test_kueue_reasons_tell_a_quota_shortage_from_a_flavor_mismatch() -> None:
    from tau_core.status_tree import _short_of_quota

    prefix = "couldn't assign flavors to pod set main: "
    taint = "untolerated taint {sku gpu noschedule} in flavor gpu"
    assert _short_of_quota(prefix + f"insufficient quota for cpu in flavor cpu, request > maximum capacity "
                                    f"(500 > 32), {taint}")
    assert _short_of_quota(prefix + "insufficient unused quota for cpu in flavor cpu, 4 more needed")
    assert not _short_of_quota(prefix + f"insufficient quota for nvidia.com/gpu in flavor cpu, request > maximum "
                                        f"capacity (8 > 0), {taint}")
    assert not _short_of_quota(prefix + "flavor cpu doesn't match node affinity")
