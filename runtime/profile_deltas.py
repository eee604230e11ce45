"""One flush's profile deltas, merged per call path (`_by_path`): the recorder's flush writes one
`profile` record per path, not one per thread and path."""

from __future__ import annotations

from .runfile import ProfileStats


def _by_path(deltas: list[tuple]) -> list[tuple]:
    """One flush's deltas, one per call path: those of the threads that have it added up
    (`ProfileStats.add`), as docs/format.md says of `profile` records (review 54 F3: one per
    thread and path, 16 records of each path per flush from a pool of 16 threads, 491,777 records
    for 3 call paths from a thread per task)."""
    first: dict[tuple, int] = {}
    merged: dict[int, ProfileStats] = {}
    out: list[tuple] = []
    for d in deltas:
        key = tuple(d[0])
        i = first.get(key)
        if i is None:
            first[key] = len(out)
            out.append(d)
            continue
        st = merged.get(i)
        if st is None:
            st = merged[i] = ProfileStats(*out[i][1:])
        st.add(ProfileStats(*d[1:]))
    for i, st in merged.items():
        out[i] = (out[i][0], st.visits, st.incl_ns, st.excl_ns, st.min_ns, st.max_ns, st.sumsq_ns, st.recursive)
    return out
