"""The ``GPUReplace`` configurable: ``%config GPUReplace.fastmath = True``, or in
``ipython_config.py`` / ``ipython_kernel_config.py`` as ``c.GPUReplace.fastmath = True``.

Every option takes effect at once (traitlets observers write ``gpureplace.config.settings`` and
the disk cache's settings).  An option not configured keeps what the process already has: its
default is read from those settings, so ``GPUREPLACE_CACHE=0`` or ``GPUREPLACE_BACKEND`` (and
anything set before the extension loaded) stay in force when it loads or reloads.
"""

from __future__ import annotations

from traitlets import Bool, TraitError, Unicode, default, observe, validate
from traitlets.config import Configurable


class GPUReplace(Configurable):
    arch = Unicode("", help="Compile for this sm_XX (e.g. 'sm_90'); empty: the current GPU's "
                            "(sm_90 without one).").tag(config=True)
    fastmath = Bool(False, help="Fast math for every kernel: f32 math through __nv_fast_*, "
                                "flush-to-zero, approximate division and square root.").tag(
        config=True)
    context = Unicode("default", help="Name of the Context that kernels without an explicit "
                                      "context compile in.").tag(config=True)
    verbose = Bool(False, help="After each cell, say which kernels will recompile and why; "
                               "at launch, how long recompiling took.").tag(config=True)
    cache = Bool(True, help="Keep compiled kernels in the disk cache across restarts.").tag(
        config=True)
    cache_dir = Unicode("", help="Disk cache directory (empty: the per-user default).").tag(
        config=True)
    backend = Unicode("auto", help="Where launches run: 'gpu', 'simulator' (the CPU simulator) "
                                   "or 'auto' (the GPU when there is one).").tag(config=True)
    check_redefinitions = Bool(True, help="After each cell, compare what compiled kernels "
                                          "depend on with the current bindings.").tag(config=True)

    # Defaults: what the process has now (environment variables, earlier settings).
    @default("arch")
    def _arch_now(self):
        from .. import config
        return config.settings.arch or ""

    @default("fastmath")
    def _fastmath_now(self):
        from .. import config
        return bool(config.settings.fastmath)

    @default("context")
    def _context_now(self):
        from .. import config
        ctx = config.settings.default_context
        return "default" if ctx is None else ctx.name

    @default("verbose")
    def _verbose_now(self):
        from .. import config
        return bool(config.settings.verbose)

    @default("cache")
    def _cache_now(self):
        from ..tracking import cache
        return bool(cache.enabled)

    @default("cache_dir")
    def _cache_dir_now(self):
        from ..tracking import cache
        return cache.explicit_directory() or ""

    @default("backend")
    def _backend_now(self):
        from .. import config
        return config.settings.backend

    @validate("arch")
    def _valid_arch(self, proposal):
        value = proposal["value"]
        if value:
            from ..compiler.backend import arch_number
            try:
                arch_number(value)
            except ValueError as exc:
                raise TraitError(str(exc)) from None
        return value

    @validate("context")
    def _valid_context(self, proposal):
        from ..dispatch.context import Context
        if proposal["value"] != "default":
            try:
                Context.named(proposal["value"])
            except KeyError as exc:
                raise TraitError(exc.args[0]) from None
        return proposal["value"]

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        for name in ("arch", "fastmath", "context", "verbose", "cache", "cache_dir", "backend"):
            self._apply({"name": name, "new": getattr(self, name)})

    @validate("backend")
    def _valid_backend(self, proposal):
        value = proposal["value"].strip().lower()
        if value not in ("auto", "gpu", "simulator"):
            raise TraitError(f"GPUReplace.backend must be 'auto', 'gpu' or 'simulator', got "
                             f"{proposal['value']!r}")
        return value

    @observe("arch", "fastmath", "context", "verbose", "cache", "cache_dir", "backend")
    def _apply(self, change):
        from .. import config
        from ..dispatch.context import Context
        from ..tracking import cache
        name, new = change["name"], change["new"]
        if name == "arch":
            config.settings.arch = new or None
        elif name == "fastmath":
            config.settings.fastmath = bool(new)
        elif name == "context":
            config.settings.default_context = None if new == "default" else Context.named(new)
        elif name == "verbose":
            config.settings.verbose = bool(new)
        elif name == "cache":
            cache.enabled = bool(new)
        elif name == "cache_dir":
            cache.set_directory(new or None)
        elif name == "backend":
            config.settings.backend = new
