"""What a function's lowering used that the checks after it need (``compiler/validate.py``).

The limits of one thread, block or module (512 KiB of local memory, 48 KiB of static shared
memory, 64 KiB of constant memory) hold for the sum of the arrays of a whole kernel, its device
functions included, which no single call site sees; and a compare-and-swap on a local array is
only found once LLVM has inlined everything.  Each lowering notes its site here: the kind, the
bytes, the user's line.  Sites are kept by the code library they were lowered into, which is the
compiled function's ``library`` (a relinked function keeps it), and go with it.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass

from numba.core import errors as nb_errors

LOCAL, SHARED, CONST, CAS = "local", "shared", "const", "cas"

_sites = weakref.WeakKeyDictionary()     # code library -> [Site]


@dataclass(frozen=True)
class Site:
    kind: str          # LOCAL, SHARED, CONST or CAS
    what: str          # "cuda.shared.array of 1,024 float32", "cuda.atomic.cas()"
    nbytes: int = 0
    symbol: str = ""   # the LLVM global of a shared or constant array
    function: str = ""
    filename: str = ""
    line: int = 0

    def where(self):
        return f"{self.function}, line {self.line}" if self.function else "?"


def note(context, kind, what, nbytes=0, symbol=""):
    """Record a site of the function being lowered (its line: the statement being lowered)."""
    from .. import frontend
    cf = frontend.current_compiled()
    loc = nb_errors.loc_info.get("loc")
    function = filename = ""
    line = 0
    if cf is not None:
        function = cf.pyfunc.__qualname__
        filename = cf.pyfunc.__code__.co_filename
        line = cf.pyfunc.__code__.co_firstlineno
        if loc is not None and getattr(loc, "filename", None) == filename:
            line = loc.line
    try:
        library = context.active_code_library
    except IndexError:              # lowered outside any library (not through the driver)
        return
    _sites.setdefault(library, []).append(Site(kind, what, nbytes, symbol, function, filename,
                                               line))


def sites(library, kind):
    """The sites of ``kind`` lowered into ``library``."""
    return [s for s in _sites.get(library, ()) if s.kind == kind]
