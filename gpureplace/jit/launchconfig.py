"""The launch configuration of the launch that is compiling a kernel (numba-cuda's
``numba.cuda.launchconfig``, offered as ``gpureplace.cuda.launchconfig``).

While a launch compiles the specialisation it needs (``kernel._compile_for_args``), code that
runs in that compile (an ``@overload``'s typing or lowering, a user's wrapper around
``_compile_for_args``) can ask which grid, block and dynamic shared memory the kernel is being
launched with, and with which arguments.  Outside such a compile there is none.  It is per
thread: two threads launching the same kernel each see their own.

Code generated from the launch configuration makes the kernel *launch-config sensitive*: the
compile calls ``kernel.mark_launch_config_sensitive()``, and every further launch configuration
(grid, block, dynamic shared memory) then gets a specialisation compiled for it.  Such kernels
launch through the general path (no generated fast launch) and are not written to the disk
cache, whose entries do not record a launch configuration.
"""

from __future__ import annotations

import contextlib
import functools
import threading
import types

_state = threading.local()        # .config: the LaunchConfig of the compile on this thread


class LaunchConfig:
    """A launch that is compiling: ``dispatcher`` (the kernel), ``griddim`` and ``blockdim``
    (3-tuples), ``stream``, ``sharedmem`` (dynamic shared memory, bytes), ``args``."""

    __slots__ = ("launcher", "args", "sensitive")

    def __init__(self, launcher, args):
        self.launcher = launcher
        self.args = tuple(args)
        self.sensitive = False            # set by kernel.mark_launch_config_sensitive()

    @property
    def dispatcher(self):
        return self.launcher.kernel

    @property
    def griddim(self):
        return self.launcher.grid

    @property
    def blockdim(self):
        return self.launcher.block

    @property
    def stream(self):
        return self.launcher.stream if self.launcher.stream is not None else 0

    @property
    def sharedmem(self):
        return self.launcher.shared

    @property
    def pre_launch_callbacks(self):
        return self.launcher.pre_launch_callbacks

    def key(self):
        """What a launch-config-sensitive kernel is specialised on."""
        return key_of(self.launcher)

    def __repr__(self):
        return (f"<LaunchConfig {self.dispatcher.__qualname__}[{self.griddim}, "
                f"{self.blockdim}, shared={self.sharedmem}]>")


def key_of(launcher):
    return launcher.grid, launcher.block, launcher.shared


@contextlib.contextmanager
def compiling_for(launcher, args):
    """The launch configuration ``launcher`` with ``args`` is current on this thread while the
    block runs (the previous one, if any, after it)."""
    previous = getattr(_state, "config", None)
    config = LaunchConfig(launcher, args)
    _state.config = config
    try:
        yield config
    finally:
        _state.config = previous


def current_launch_config():
    """The launch configuration of the launch compiling on this thread, or None."""
    return getattr(_state, "config", None)


def ensure_current_launch_config():
    """The current launch configuration; a RuntimeError when no launch is compiling."""
    config = current_launch_config()
    if config is None:
        raise RuntimeError("No launch config set for this thread: the launch configuration is "
                           "known only while a kernel launch compiles its specialisation")
    return config


@contextlib.contextmanager
def capture_compile_config(dispatcher):
    """``with capture_compile_config(kernel) as seen: kernel[grid, block](...)``: ``seen
    ["config"]`` is the launch configuration a compile during the block saw (None when the
    launches compiled nothing)."""
    if dispatcher is None:
        raise TypeError("capture_compile_config(dispatcher): a cuda.jit kernel is required, "
                        "got None")
    record = {"config": None}
    own = dispatcher.__dict__.get("_compile_for_args")
    original = dispatcher._compile_for_args

    @functools.wraps(original)
    def wrapped(self, *args, **kws):
        record["config"] = current_launch_config()
        return original(*args, **kws)

    dispatcher._compile_for_args = types.MethodType(wrapped, dispatcher)
    try:
        yield record
    finally:
        if own is None:
            del dispatcher._compile_for_args
        else:
            dispatcher._compile_for_args = own


__all__ = ["current_launch_config", "ensure_current_launch_config", "capture_compile_config"]
