"""A worker adopting a newer definition of a function it rebuilt from an earlier pickle: the
new pickle's functions made to read the namespaces the old ones read (``adopt_globals``), so that
the values a redefined helper reads reach the compiled code's records (see jit/pickling.py)."""

from __future__ import annotations

import sys
import types

from ..tracking.pickled import same_value
from .pickling import _MISSING, global_names


def adopt_globals(new, old):
    """Bring ``old`` -- a function rebuilt here from an earlier pickle -- in place to what
    ``new``, of the same code, unpickled from a later one, reads: its globals, and those of
    every plain function it reaches (at any depth: through globals and closures), as the
    notebook has them now.

    A pickle's functions read a namespace of their own (one per namespace they had where they
    were pickled: cloudpickle rebuilds ``__main__``'s as a new dict with each pickle), so the
    new functions are made to read the namespaces the old ones read, which stand for the same:
    a function whose code, defaults and attributes are those of the old one under its name is
    the old one, kept (nothing to compile again for it), and a new one is bound as a copy that
    reads the old namespace, as a notebook cell rebinds a name.  Then every value read where
    compiled code read it -- a helper's global included -- is the notebook's, and the cell
    hook's check (``bindings.check``) finds what changed.  A new function left reading the
    pickle's namespace would read a dict that no later pickle updates; a new function of the
    same code as the old one has the same fingerprint, so the tracking would take it for the
    old one and keep the code compiled from what the old one read (a helper's ``C = 3`` on a
    worker after the notebook set ``C = 4``)."""
    if _by_value(new) and _by_value(old):
        _Adoption(new, old).run()


def _by_value(f):
    """Whether ``f`` is a function reading a namespace made by unpickling it (cloudpickle
    pickled it by value), not its module's."""
    if not isinstance(f, types.FunctionType):
        return False
    module = sys.modules.get(f.__module__) if isinstance(f.__module__, str) else None
    return module is None or getattr(module, "__dict__", None) is not f.__globals__


class _Adoption:
    """One ``adopt_globals``: which of the new pickle's namespaces stands for which one here
    (``homes``), found by pairing the functions under the same names from the roots; then each
    new namespace merged into its home (``run``)."""

    def __init__(self, new, old):
        self.root = new
        self.homes = {}          # id(namespace of the pickle) -> (it, the namespace here)
        self.made = {}           # id(function of the pickle) -> the function that stands for it
        self.kept = set()        # ids of the functions here kept for one of the pickle's
        self.reads = {}          # id(namespace of the pickle) -> names its functions read
        self._pair(new, old)

    def _pair(self, new, old):
        taken, seen, stack = set(), set(), [(new, old)]
        while stack:
            fn, fo = stack.pop()
            if id(fn) in seen:
                continue
            seen.add(id(fn))
            gn, go = fn.__globals__, fo.__globals__
            if id(gn) not in self.homes and id(go) not in taken:
                self.homes[id(gn)] = (gn, go)
                taken.add(id(go))
                stack += [(vn, go[name]) for name, vn in gn.items()
                          if _by_value(vn) and _by_value(go.get(name))]
            if self.homes.get(id(gn), (None, None))[1] is not go or \
                    fn.__code__.co_freevars != fo.__code__.co_freevars:
                continue
            for vn, vo in [*((_contents(cn), _contents(co))
                             for cn, co in zip(fn.__closure__ or (), fo.__closure__ or ())),
                           *_default_pairs(fn, fo)]:
                if _by_value(vn) and _by_value(vo):
                    stack.append((vn, vo))

    def run(self):
        self._reads_of(self.root)
        for gn, go in list(self.homes.values()):
            for name, vn in list(gn.items()):
                value = self._convert(vn, go.get(name, _MISSING))
                if go.get(name, _MISSING) is not value:
                    go[name] = value
        for key, (gn, go) in self.homes.items():
            for name in self.reads.get(key, ()):
                # read by a function, not pickled with it: deleted where it was defined (a
                # launch there says so), so here too -- never the value an earlier task brought
                if name not in gn and name in go and not name.startswith("__"):
                    del go[name]

    def _reads_of(self, f):
        self.reads.setdefault(id(f.__globals__), set()).update(global_names(f.__code__))

    def _convert(self, vn, vo):
        """What stands here for the pickle's value ``vn``, where ``vo`` was (see
        ``adopt_globals``)."""
        if not _by_value(vn):
            return vn
        made = self.made.get(id(vn))
        if made is not None:
            return made
        self._reads_of(vn)
        home = self.homes.get(id(vn.__globals__))
        if home is None:
            self.made[id(vn)] = vn           # (a namespace new here: as it came)
            return vn
        if _by_value(vo) and vo.__globals__ is home[1] and id(vo) not in self.kept and \
                _same_function(vo, vn):
            self.made[id(vn)] = vo
            self.kept.add(id(vo))
            for co, cn in zip(vo.__closure__ or (), vn.__closure__ or ()):
                # a closure variable, bound anew as a global is (tracked as one)
                now = _contents(co)
                value = self._convert(_contents(cn), now)
                if value is not now:
                    if value is _MISSING:
                        del co.cell_contents
                    else:
                        co.cell_contents = value
            self._adopt_defaults(vo, vn, vo)
            return vo
        cells = tuple(types.CellType() for _ in vn.__closure__ or ()) or None
        copy = types.FunctionType(vn.__code__, home[1], vn.__name__, vn.__defaults__, cells)
        copy.__kwdefaults__ = vn.__kwdefaults__
        copy.__qualname__, copy.__module__ = vn.__qualname__, vn.__module__
        copy.__dict__.update(vn.__dict__)
        self.made[id(vn)] = copy
        for cell, cn in zip(cells or (), vn.__closure__ or ()):
            value = self._convert(_contents(cn), _MISSING)
            if value is not _MISSING:
                cell.cell_contents = value
        self._adopt_defaults(copy, vn, vo if _by_value(vo) else None)
        return copy

    def _adopt_defaults(self, f, vn, vo):
        """``f`` (standing here for the pickle's ``vn``) given ``vn``'s default arguments as
        they stand here: a helper bound as a default (``def g(v, f=h)``) is converted as a
        global is, against ``vo``'s default in its place where there was one."""
        defaults = list(vn.__defaults__ or ())
        old_defaults = list(vo.__defaults__ or ()) if vo is not None else []
        if len(old_defaults) != len(defaults):
            old_defaults = [_MISSING] * len(defaults)
        converted = tuple(self._convert(d, o) for d, o in zip(defaults, old_defaults))
        if vn.__defaults__ is not None and any(
                a is not b for a, b in zip(converted, f.__defaults__ or ())):
            f.__defaults__ = converted
        if vn.__kwdefaults__:
            old_kw = (vo.__kwdefaults__ or {}) if vo is not None else {}
            kw = {name: self._convert(d, old_kw.get(name, _MISSING))
                  for name, d in vn.__kwdefaults__.items()}
            if any(kw[name] is not (f.__kwdefaults__ or {}).get(name, _MISSING) for name in kw):
                f.__kwdefaults__ = kw


def _contents(cell):
    try:
        return cell.cell_contents
    except ValueError:
        return _MISSING


def _default_pairs(fn, fo):
    """[(a default argument of ``fn``, ``fo``'s in its place)], positional and keyword."""
    pairs = list(zip(fn.__defaults__ or (), fo.__defaults__ or ())) \
        if len(fn.__defaults__ or ()) == len(fo.__defaults__ or ()) else []
    kw_old = fo.__kwdefaults__ or {}
    return pairs + [(v, kw_old[k]) for k, v in (fn.__kwdefaults__ or {}).items() if k in kw_old]


def _same_function(old, new, depth=0):
    """Whether ``old`` is ``new``'s definition but for the values it reads (its code,
    defaults and attributes the same; a function bound as a default is the same where it is
    the same definition, since it is converted as a global is)."""
    return old.__code__ == new.__code__ and old.__qualname__ == new.__qualname__ and \
        len(old.__closure__ or ()) == len(new.__closure__ or ()) and \
        _same_defaults(old.__defaults__ or (), new.__defaults__ or (), depth) and \
        sorted(old.__kwdefaults__ or ()) == sorted(new.__kwdefaults__ or ()) and \
        _same_defaults(_values(old.__kwdefaults__), _values(new.__kwdefaults__), depth) and \
        same_value(_items(old.__dict__), _items(new.__dict__))


def _same_defaults(old, new, depth):
    if len(old) != len(new):
        return False
    for a, b in zip(old, new):
        if _by_value(a) and _by_value(b):
            if depth > 8 or not _same_function(a, b, depth + 1):
                return False
        elif not same_value(a, b):
            return False
    return True


def _values(mapping):
    return tuple(v for _, v in _items(mapping))


def _items(mapping):
    return tuple(sorted(mapping.items())) if mapping else ()
