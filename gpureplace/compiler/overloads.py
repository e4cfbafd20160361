"""Numba-style ``@overload`` generators as the device meaning of a host callable.

``gpureplace.cuda.extending.overload(func)`` (numba-cuda's ``@overload(func, target="cuda")``)
registers a ``NumbaOverload`` as an override of ``func`` in a Context, so an overload is tracked
like any override: it shows in the dispatch report, a redefinition (the cell run again) replaces
it and recompiles exactly the kernels that called ``func``, and another Context can override it
again.  The compiler types a call through Numba's own overload template (the generator is called
with the argument types and returns the implementation, which compiles as a device function in
the calling kernel's Context); the simulator calls the generator with the values' types and runs
the implementation in Python.
"""

from __future__ import annotations

from numba.core import types


class NumbaOverload:
    """``host``'s device implementation chosen by ``generator(*argument types)``."""

    def __init__(self, host, generator, jit_options=None, strict=True, inline="never",
                 prefer_literal=False, **metadata):
        if not callable(generator):
            raise TypeError(f"overload({getattr(host, '__qualname__', host)!r}) decorates a "
                            f"function that returns the implementation, got {generator!r}")
        self.host = host
        self.generator = generator
        self.jit_options = dict(jit_options or {})
        self.strict, self.inline, self.prefer_literal = strict, inline, prefer_literal
        self.metadata = dict(metadata)
        self.__name__ = getattr(generator, "__name__", "overload")
        self.__qualname__ = getattr(generator, "__qualname__", self.__name__)
        self.__module__ = getattr(generator, "__module__", None)
        self._type = None

    def numba_type(self):
        """A ``types.Function`` over Numba's overload template for this generator (made once;
        a redefinition is a new ``NumbaOverload``)."""
        if self._type is None:
            from numba.core.typing.templates import make_overload_template
            template = make_overload_template(
                self.host, self.generator, self.jit_options, self.strict, self.inline,
                self.prefer_literal, **{**self.metadata, "target": "gpureplace"})
            self._type = types.Function(template)
        return self._type

    def __call__(self, *args, **kwargs):
        """What the simulator runs: the implementation for the values' types."""
        from numba import typeof
        impl = self.generator(*[typeof(a) for a in args],
                              **{k: typeof(v) for k, v in kwargs.items()})
        if impl is None:
            shown = ", ".join(str(typeof(a)) for a in args)
            raise TypeError(f"{self.__qualname__}, the overload of "
                            f"{getattr(self.host, '__qualname__', self.host)}, has no "
                            f"implementation for ({shown})")
        if isinstance(impl, tuple):          # (signature, implementation)
            impl = impl[1]
        return impl(*args, **kwargs)

    def __repr__(self):
        return f"<overload {self.__qualname__} of {getattr(self.host, '__qualname__', self.host)}>"
