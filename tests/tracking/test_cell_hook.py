"""The cell hook's bulk comparison (tracking/bindings.py): names bound to the object seen are
compared in C loops, the rest one at a time; every way a binding can change is still reported,
exactly once, and a change reported brings the bulk view up to date."""

import numpy as np

from gpureplace.tracking import bindings, contents


def _mine(ns):
    return sorted((c[1], c[2]) for c in bindings.check() if c.namespace is ns)


def _track(ns, name, snap=False):
    value = ns.get(name, __builtins__["len"] if name == "len" else None)
    bindings.track(ns, name, value, None, contents.snapshot(value) if snap else None)


def test_every_kind_of_change_is_reported_once():
    ns = {"__name__": "hook_kinds", "nothing": None, "a": 1.5, "b": "text",
          "arr": np.arange(4.0)}
    for name in ("nothing", "a", "b", "len"):
        _track(ns, name)
    _track(ns, "arr", snap=True)
    assert _mine(ns) == []
    assert _mine(ns) == []

    del ns["nothing"]                      # a value of None, deleted (not read back as None)
    assert _mine(ns) == [("nothing", "deleted")]
    assert _mine(ns) == []

    ns["len"] = lambda x: 0                # a builtin shadowed by a new global
    assert _mine(ns) == [("len", "redefined")]

    ns["arr"][1] = 7.0                     # an array changed in place, every name unchanged
    assert _mine(ns) == [("arr", "changed in place")]
    assert _mine(ns) == []

    ns["a"] = 2.5                          # after a report, the next change is still seen
    assert _mine(ns) == [("a", "redefined")]
    ns["b"] = "other"
    ns["nothing"] = 3
    assert _mine(ns) == [("b", "redefined"), ("nothing", "redefined")]
    assert _mine(ns) == []


def test_a_name_added_after_the_first_check_is_compared_too():
    ns = {"__name__": "hook_added", "x": 1.0, "y": 2.0}
    _track(ns, "x")
    assert _mine(ns) == []
    _track(ns, "y")                        # tracked later: the bulk view is rebuilt
    ns["y"] = 3.0
    assert _mine(ns) == [("y", "redefined")]


def test_one_plain_name_and_a_deleted_plain_name_among_many():
    one = {"__name__": "hook_one", "x": 1.0}
    _track(one, "x")                       # one name: no tuple to compare in bulk
    assert _mine(one) == []
    one["x"] = 1                           # equal to the old value, another type
    assert _mine(one) == [("x", "redefined")]

    many = {"__name__": "hook_many", **{f"v{i}": float(i) for i in range(50)}}
    for i in range(50):
        _track(many, f"v{i}")
    assert _mine(many) == []
    del many["v17"]                        # the bulk fetch fails; each name is looked at
    assert _mine(many) == [("v17", "deleted")]
    many["v3"] = 3                         # == the old 3.0, but another object and type
    assert _mine(many) == [("v3", "redefined")]
    assert _mine(many) == []


class _Defaulting(dict):
    def __missing__(self, key):
        self[key] = "made up"
        return self[key]


def test_a_namespace_with_missing_is_not_read_through_it():
    ns = _Defaulting({"__name__": "hook_missing", "a": 1.0, "b": 2.0, "c": 3.0})
    for name in ("a", "b", "c"):
        _track(ns, name)
    assert _mine(ns) == []
    del ns["b"]
    assert _mine(ns) == [("b", "deleted")]
    assert "b" not in ns                   # the check did not call __missing__
