"""Timing a kernel where you write it: ``gpureplace.benchmark`` and ``%cuda_timeit``.

    r = gpureplace.benchmark(saxpy[blocks, threads], a, x, y, out)
    r.median, r.bandwidth, r.bandwidth_fraction        # seconds, bytes/s, share of the peak
    r = gpureplace.benchmark(kernel[g, b], *args, flops=2 * n)   # FLOP/s and the roofline too

On the GPU each run is timed by a pair of CUDA events around the launch, on the launch's stream,
as ``cupyx.profiler.benchmark`` and ``triton.testing.do_bench`` time kernels: ``warmup``
launches (one by default, never none: the first may compile and load) go untimed, then runs
repeat until ``min_time`` seconds or ``max_repeat`` runs, at least ``min_repeat``.  Before each
run the L2 cache is flushed (a write of twice its size, outside the events) so that a small
working set is not timed from cache; ``flush_l2=False`` times warm runs.

The bytes a run moves are the sizes of its array arguments (``nbytes``, else from their
``__cuda_array_interface__`` or DLPack), each counted once (read or written; ``bytes=`` gives the
true count, e.g. ``2 * x.nbytes`` for a read-modify-write), and of a ufunc's result where no
``out`` is given; the floating-point operations only when given (``flops=``).  A prepared launch
(``kernel[g, b].prepare(*args)``) or a ``functools.partial`` counts the arrays bound in it.
Both become rates and shares of the device's peak: its memory bandwidth (bus width x memory
clock, both from the driver) and its float32 FMA rate (multiprocessors x float32 lanes per
multiprocessor x 2 x clock).  In a notebook the result shows a table, the runs, and where the
kernel sits under the device's roofline (or, without both counts, why not).

In the simulator the same call runs the kernel on the CPU and times it with the host clock: the
result says so, and gives no rates (``bandwidth``, ``flop_rate`` and their shares are None: the
host clock says nothing of a GPU's).  Runs repeat as on the GPU, at least ``min_repeat``; without
one, at least 3 (the simulator is slow), then until ``min_time``.
"""

from __future__ import annotations

import functools
import math
import numbers
import time

import numpy as np

from . import errors
from .arch import arch_number
from .jit import backends
from .jit.launcher import PreparedLaunch
from .runtime.hints import ArgHint

#: float32 lanes per multiprocessor, by compute capability (major, minor); later ones as sm_90
_FP32_LANES = {(6, 0): 64, (6, 1): 128, (7, 0): 64, (7, 2): 64, (7, 5): 64, (8, 0): 64,
               (8, 6): 128, (8, 7): 128, (8, 9): 128, (9, 0): 128}

#: Driver attributes (CUdevice_attribute) read for the peaks
_ATTR = {"clock_khz": 13, "sms": 16, "memory_clock_khz": 36, "bus_width_bits": 37,
         "l2_bytes": 38}


class DevicePeaks:
    """What a device can do at most: ``bandwidth`` (bytes/s), ``fp32_flops`` (FLOP/s),
    ``l2_bytes``; None where the driver does not say."""

    def __init__(self, name, bandwidth, fp32_flops, l2_bytes):
        self.name, self.bandwidth, self.fp32_flops, self.l2_bytes = \
            name, bandwidth, fp32_flops, l2_bytes

    def __repr__(self):
        bw = f"{self.bandwidth / 1e9:,.0f} GB/s" if self.bandwidth else "bandwidth unknown"
        fl = f"{self.fp32_flops / 1e12:,.1f} TFLOP/s fp32" if self.fp32_flops else \
            "fp32 rate unknown"
        return f"<DevicePeaks {self.name}: {bw}, {fl}>"


def device_peaks(device_id=None):
    """The current (or given) GPU's peaks, from the driver's attributes."""
    import ctypes

    from . import probe
    lib = probe.libcuda()
    dev = probe.current_device() if device_id is None else int(device_id)
    values = {}
    for key, attr in _ATTR.items():
        out = ctypes.c_int()
        ok = lib is not None and lib.cuDeviceGetAttribute(ctypes.byref(out), attr, dev) == 0
        values[key] = out.value if ok and out.value > 0 else None
    number = arch_number(probe.arch_of(dev))
    cc = (number // 10, number % 10)
    bandwidth = None
    if values["memory_clock_khz"] and values["bus_width_bits"]:
        # double data rate: two transfers a clock
        bandwidth = 2 * values["memory_clock_khz"] * 1e3 * values["bus_width_bits"] / 8
    flops = None
    if values["clock_khz"] and values["sms"] and cc is not None:
        lanes = _FP32_LANES.get(cc, 128)
        flops = values["sms"] * lanes * 2 * values["clock_khz"] * 1e3
    name = probe.cupy_module().cuda.runtime.getDeviceProperties(dev)["name"]
    name = name.decode() if isinstance(name, bytes) else str(name)
    return DevicePeaks(name, bandwidth, flops, values["l2_bytes"])


def argument_bytes(args):
    """Bytes of the array arguments (device arrays, NumPy arrays, arrays known only by their
    ``__cuda_array_interface__`` or DLPack, arrays in tuples or in ``cuda.In`` / ``Out`` /
    ``InOut``), each counted once however often it appears."""
    seen, total = set(), 0
    stack = list(args)
    while stack:
        a = stack.pop()
        value = a.value if isinstance(a, ArgHint) else a
        if isinstance(value, tuple):
            stack.extend(value)
            continue
        if np.isscalar(value) or id(value) in seen:
            continue
        nbytes = _array_bytes(value)
        if nbytes is None:
            continue
        seen.add(id(value))
        total += nbytes
    return total


def _array_bytes(value):
    """The bytes of the array ``value``, from its ``nbytes``, else its
    ``__cuda_array_interface__`` (shape and typestr), else its DLPack export (viewed, not copied,
    by the library a launch reads it with: NumPy for host memory, CuPy for a GPU's); None for
    what is no array."""
    nbytes = getattr(value, "nbytes", None)
    if nbytes is not None:
        return int(nbytes)
    interface = getattr(value, "__cuda_array_interface__", None)
    if interface is not None:
        return math.prod(interface["shape"]) * np.dtype(interface["typestr"]).itemsize
    if hasattr(value, "__dlpack__") and hasattr(value, "__dlpack_device__"):
        from . import probe
        kind, _ = value.__dlpack_device__()
        xp = np if int(kind) in (1, 3) else probe.cupy_module()    # (kDLCPU, kDLCUDAHost)
        return int(xp.from_dlpack(value).nbytes)
    return None


class BenchmarkResult:
    """Times of the runs (``times``, seconds) and what they give: ``median``, ``mean``, ``min``,
    ``std``; ``bandwidth`` and ``flop_rate`` (per second, at the median); their shares of the
    device's peaks (``bandwidth_fraction``, ``flop_fraction``); ``intensity`` (FLOP per byte, from
    the counts alone); ``simulated``.  A simulated result has no rates: ``bandwidth``,
    ``flop_rate`` and their fractions are None."""

    def __init__(self, name, times, nbytes, flops, peaks, simulated, warm, note=""):
        self.name = name
        self.times = np.asarray(times, dtype=np.float64)
        self.bytes = nbytes
        self.flops = flops
        self.peaks = peaks
        self.simulated = simulated
        self.flushed = not warm
        self.note = note

    median = property(lambda self: float(np.median(self.times)))
    mean = property(lambda self: float(np.mean(self.times)))
    min = property(lambda self: float(np.min(self.times)))
    std = property(lambda self: float(np.std(self.times)))

    @property
    def bandwidth(self):
        """Bytes a second at the median; None in the simulator (host-clock times)."""
        if self.simulated or not self.bytes or self.median <= 0:
            return None
        return self.bytes / self.median

    @property
    def flop_rate(self):
        """FLOP a second at the median; None in the simulator (host-clock times)."""
        if self.simulated or not self.flops or self.median <= 0:
            return None
        return self.flops / self.median

    @property
    def intensity(self):
        """FLOP per byte moved (the roofline's x axis)."""
        return self.flops / self.bytes if self.flops and self.bytes else None

    @property
    def bandwidth_fraction(self):
        peak = self.peaks.bandwidth if self.peaks else None
        return self.bandwidth / peak if self.bandwidth and peak else None

    @property
    def flop_fraction(self):
        peak = self.peaks.fp32_flops if self.peaks else None
        return self.flop_rate / peak if self.flop_rate and peak else None

    def lines(self):
        """The summary, one fact a line."""
        where = "simulator (CPU; host-clock times, not a GPU's)" if self.simulated else \
            (self.peaks.name if self.peaks else "GPU")
        out = [f"{self.name} on {where}: median {_time(self.median)}, min {_time(self.min)}, "
               f"mean {_time(self.mean)} ± {_time(self.std)} over {len(self.times)} runs"
               + ("" if self.simulated else
                  (" (L2 flushed before each)" if self.flushed else " (warm L2)"))]
        if self.simulated:
            counts = [f"{_size(self.bytes)}" if self.bytes else "",
                      f"{self.flops:,} FLOP" if self.flops else ""]
            counts = " and ".join(c for c in counts if c)
            out.append((f"{counts} a run; " if counts else "") +
                       "no rates: the simulator's times say nothing of a GPU's")
            return out + ([self.note] if self.note else [])
        if self.bandwidth:
            share = f" = {self.bandwidth_fraction:.0%} of {self.peaks.bandwidth / 1e9:,.0f} GB/s" \
                if self.bandwidth_fraction else ""
            out.append(f"memory: {_size(self.bytes)} a run, {self.bandwidth / 1e9:,.1f} GB/s"
                       f"{share}")
        if self.flop_rate:
            share = f" = {self.flop_fraction:.0%} of {self.peaks.fp32_flops / 1e12:,.1f} " \
                    f"TFLOP/s fp32" if self.flop_fraction else ""
            per_byte = f"; {self.intensity:.2f} FLOP/byte" if self.intensity else ""
            out.append(f"compute: {self.flops:,} FLOP a run, {self.flop_rate / 1e9:,.1f} GFLOP/s"
                       f"{share}{per_byte}")
        if self.note:
            out.append(self.note)
        return out

    def __repr__(self):
        return "\n".join(self.lines())

    def _repr_html_(self):
        import html
        rows = "".join(f"<div>{html.escape(line)}</div>" for line in self.lines())
        return (f'<div class="gpureplace-timeit" style="font-family: monospace; '
                f'font-size: 12px">{rows}{self.svg()}</div>')

    def svg(self):
        """A small picture: the runs (left) and, on a GPU with a known FLOP count, the kernel's
        place under the device's roofline (right; else its share of the peak bandwidth)."""
        w, h, pad = 260, 120, 24
        times = self.times * 1e6
        lo, hi = float(times.min()), float(times.max())
        span = (hi - lo) or max(hi, 1e-9) * 0.1
        n = len(times)
        dots = "".join(
            f'<circle cx="{pad + (w - 2 * pad) * (i / max(n - 1, 1)):.1f}" '
            f'cy="{h - pad - (h - 2 * pad) * ((t - lo) / span):.1f}" r="2" fill="#4878d0"/>'
            for i, t in enumerate(times))
        med_y = h - pad - (h - 2 * pad) * ((self.median * 1e6 - lo) / span)
        runs = (f'<svg width="{w}" height="{h}" xmlns="http://www.w3.org/2000/svg">'
                f'<rect x="0" y="0" width="{w}" height="{h}" fill="white" stroke="#ccc"/>'
                f'<line x1="{pad}" y1="{med_y:.1f}" x2="{w - pad}" y2="{med_y:.1f}" '
                f'stroke="#d65f5f" stroke-dasharray="3,2"/>{dots}'
                f'<text x="4" y="12" font-size="10">runs (µs): {lo:,.2f} – {hi:,.2f}, median '
                f'dashed</text></svg>')
        return f'<div style="display: flex; gap: 8px">{runs}{self._roof_svg(w, h, pad)}</div>'

    def _roof_svg(self, w, h, pad):
        peaks = self.peaks
        if self.simulated or peaks is None or not peaks.bandwidth:
            return ""
        head = (f'<svg width="{w}" height="{h}" xmlns="http://www.w3.org/2000/svg">'
                f'<rect x="0" y="0" width="{w}" height="{h}" fill="white" stroke="#ccc"/>')
        if not (self.intensity and self.flop_rate and peaks.fp32_flops):
            # no roofline without both counts and both peaks: what is missing, and the share of
            # the peak that is known (bandwidth from the bytes, else FLOP/s from the FLOP)
            if not self.bytes:
                why = (f"no bytes counted: give bytes={'' if self.flops else ' and flops='} "
                       f"for the roofline")
            elif not self.flops:
                why = "give flops= for the roofline"
            else:
                why = "fp32 peak unknown: no roofline"
            share, of = (self.bandwidth_fraction or 0.0, "peak bandwidth") if self.bytes else \
                (self.flop_fraction, "peak fp32 FLOP/s")
            if share is None:
                return f'{head}<text x="4" y="12" font-size="10">{why}</text></svg>'
            share = min(share, 1.0)
            bar = (w - 2 * pad) * share
            return (f'{head}<rect x="{pad}" y="{h / 2 - 10}" width="{w - 2 * pad}" height="20" '
                    f'fill="#eee"/><rect x="{pad}" y="{h / 2 - 10}" width="{bar:.1f}" '
                    f'height="20" fill="#4878d0"/><text x="4" y="12" font-size="10">'
                    f'{share:.0%} of {of}</text><text x="4" y="24" font-size="10">{why}</text>'
                    f'</svg>')
        # log-log: x = FLOP/byte from 1/64 to 256, y = FLOP/s from peak/1e4 to 2 x peak
        x0, x1 = math.log10(1 / 64), math.log10(256)
        y1 = math.log10(2 * peaks.fp32_flops)
        y0 = y1 - 4.5

        def px(ai):
            return pad + (w - 2 * pad) * (math.log10(ai) - x0) / (x1 - x0)

        def py(rate):
            return h - pad - (h - 2 * pad) * (max(math.log10(rate), y0) - y0) / (y1 - y0)
        ridge = peaks.fp32_flops / peaks.bandwidth
        xs = [1 / 64, ridge, 256]
        roof = " ".join(f"{px(a):.1f},{py(min(peaks.fp32_flops, a * peaks.bandwidth)):.1f}"
                        for a in xs)
        return (f'{head}<polyline points="{roof}" fill="none" stroke="#333"/>'
                f'<circle cx="{px(min(max(self.intensity, 1 / 64), 256)):.1f}" '
                f'cy="{py(self.flop_rate):.1f}" r="4" fill="#d65f5f"/>'
                f'<text x="4" y="12" font-size="10">roofline: {self.intensity:.2f} FLOP/byte, '
                f'{self.flop_rate / 1e9:,.0f} GFLOP/s</text></svg>')


def _time(seconds):
    if seconds >= 1:
        return f"{seconds:.3f} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.3f} ms"
    return f"{seconds * 1e6:.2f} µs"


def _size(n):
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:,.1f} {unit}"
    return f"{n} bytes"


#: The least number of timed runs when ``min_repeat`` is not given: on the GPU, in the simulator
DEFAULT_MIN_REPEAT, SIMULATED_MIN_REPEAT = 10, 3
#: The most timed runs when ``max_repeat`` is not given (or ``min_repeat``, if that is more)
DEFAULT_MAX_REPEAT = 1000


def benchmark(launch, *args, warmup=1, min_repeat=None, max_repeat=None, min_time=0.1,
              flops=None, bytes=None, flush_l2=True, name=None):  # noqa: A002 (numba's names)
    """Time ``launch(*args)`` (a configured kernel, ``kernel[blocks, threads]``, a prepared launch,
    or any callable that launches GPU work on the current stream); see the module's docstring.

    ``launch`` runs ``warmup`` times untimed first (at least once: the first run may compile and
    load, which is no part of its time), then once for each timed run, so a kernel that updates
    its arguments in place (``x[i] += 1``) or prints from the device does so that many times.
    ``min_repeat``: at least this many timed runs (default 10 on the GPU, 3 in the simulator,
    never more than ``max_repeat``); ``max_repeat``: at most this many (default 1000, or
    ``min_repeat`` if that is more); in between, runs repeat until ``min_time`` seconds of them.
    ``flops`` / ``bytes``: what a run computes and moves (any non-negative finite real number,
    NumPy's included).  Returns a ``BenchmarkResult``."""
    # (an error of the code timed -- a function of the user's -- shows the user's frames in
    # IPython and pytest, which leave out the frames that set this)
    __tracebackhide__ = True  # noqa: F841
    warmup = checked_option("warmup", warmup)
    min_time = checked_option("min_time", min_time)
    flops = checked_option("flops", flops)
    bytes = checked_option("bytes", bytes)  # noqa: A001
    min_repeat = checked_option("min_repeat", min_repeat)
    max_repeat = checked_option("max_repeat", max_repeat)
    if not callable(launch):
        raise TypeError(f"benchmark(launch, *args): launch must be a configured kernel "
                        f"(kernel[blocks, threads]) or a callable, got {_shown(launch)}")
    if min_repeat is not None and max_repeat is not None and min_repeat > max_repeat:
        raise ValueError(f"benchmark: min_repeat ({min_repeat}) is more than max_repeat "
                         f"({max_repeat})")
    simulated = backends.simulated()
    # A default gives way to the other bound, given explicitly
    if min_repeat is None:
        least = SIMULATED_MIN_REPEAT if simulated else DEFAULT_MIN_REPEAT
        min_repeat = least if max_repeat is None else min(least, max_repeat)
    if max_repeat is None:
        max_repeat = max(DEFAULT_MAX_REPEAT, min_repeat)
    # A prepared launch holds its configuration and arguments; a partial, its callable and
    # arguments (``%cuda_timeit``'s keyword arguments: ``ufunc(x, y, out=o)``)
    config, bound, keywords = launch, (), {}
    if isinstance(launch, PreparedLaunch):
        config, bound = launch.config, launch.args
    elif isinstance(launch, functools.partial):
        config, bound, keywords = launch.func, launch.args, launch.keywords
    if name is None:
        kernel = getattr(config, "kernel", None)
        name = getattr(kernel, "__qualname__", None) or getattr(config, "__qualname__", None) \
            or repr(launch)
        if kernel is not None:
            name += f"[{_dims(config.grid)}, {_dims(config.block)}]"
    given = bound + args + tuple(keywords.values())
    note = ""
    if any(type(a.value if isinstance(a, ArgHint) else a) is np.ndarray for a in given) and \
            not simulated:
        note = ("note: host NumPy arrays among the arguments are copied to the device and back "
                "around each launch, and those copies are timed too; pass device arrays "
                "(cuda.to_device) to time the kernel alone")
    try:
        if not simulated:
            from .runtime.launch import require_device
            require_device(f"timing {name}")      # (before CUDA events are asked for)
        for _ in range(warmup):
            result = launch(*args)            # (the first launch may compile and load)
        # a ufunc's result, which it writes: counted now, not held through the runs
        written = argument_bytes((result,)) if bytes is None and \
            _returns_what_it_writes(config, bound + args, keywords) else 0
        result = None
        if simulated:
            times, peaks = _host_timed(launch, args, min_repeat, max_repeat, min_time), None
        else:
            times, peaks = _event_timed(launch, args, min_repeat, max_repeat, min_time,
                                        flush_l2, getattr(config, "stream_ptr", None))
    except Exception as exc:
        _blame_the_timed_code(exc)
        raise
    # (counted after the runs: an array the launch cannot read fails there, in its own words)
    nbytes = argument_bytes(given) + written if bytes is None else bytes
    return BenchmarkResult(name, times, nbytes, flops, peaks, simulated,
                           simulated or not flush_l2, note)


def _returns_what_it_writes(launch, args, keywords):
    """Whether ``launch(*args, **keywords)`` returns an array it writes and its arguments do
    not hold: a ufunc's (``cuda.vectorize``, ``cuda.guvectorize``, NumPy's: ``nin`` inputs,
    ``nout`` outputs) without ``out``."""
    nin, nout = getattr(launch, "nin", None), getattr(launch, "nout", None)
    return isinstance(nin, int) and isinstance(nout, int) and len(args) == nin and \
        keywords.get("out") is None


def checked_option(option, value, label=None):
    """``value`` for ``benchmark``'s option ``option`` (``flops``, ``bytes``, ``min_time``,
    ``warmup``, ``min_repeat``, ``max_repeat``), NumPy numbers made Python's; None stays None.
    A wrong one is a ``TypeError`` naming it as ``label``, the caller's name for it (default
    ``benchmark(option=...)``; ``%cuda_timeit`` says ``--flops``)."""
    if value is None and option not in ("warmup", "min_time"):
        return None
    label = label or f"benchmark({option}=...)"
    if option in ("warmup", "min_repeat", "max_repeat"):
        # (warmup too: the first run may compile and load, which no timed run may include)
        if not isinstance(value, numbers.Integral) or isinstance(value, bool) or value < 1:
            raise TypeError(f"{label} takes a positive int, got {_shown(value)}")
        return int(value)
    what = "number of seconds" if option == "min_time" else "number"
    if not isinstance(value, numbers.Real) or isinstance(value, bool):
        raise TypeError(f"{label} takes a non-negative {what}, got {_shown(value)}")
    if value < 0 or not (isinstance(value, numbers.Integral) or math.isfinite(value)):
        raise TypeError(f"{label} takes a non-negative finite {what}, got {_shown(value)}")
    return int(value) if isinstance(value, numbers.Integral) else float(value)


def _shown(value):
    """``value`` as a message shows it: its repr where that is short, else its type (and shape),
    not a whole array."""
    text = repr(value)
    if len(text) <= 40 and "\n" not in text:
        return text
    shape = getattr(value, "shape", None)
    return type(value).__name__ + (f" of shape {shape}" if isinstance(shape, tuple) else
                                   " object")


def _blame_the_timed_code(exc):
    """Where the code timed is the user's (a function that launches kernels) and it raised an
    error that gpureplace renders in IPython as one block naming the user's line (a bad launch),
    name the line inside that code, as a direct call would, not the line that called benchmark
    (or ``%cuda_timeit``): the rendering reads the traceback from the timed call inward."""
    render = getattr(exc, "_render_traceback_", None)
    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename == __file__:
        tb = tb.tb_next                        # (benchmark's own frames)
    if render is None or tb is None or errors.call_site(tb) is None:
        return                                 # (timed code of gpureplace's: a launch)
    inner = tb

    def rendered():
        outer = exc.__traceback__
        exc.__traceback__ = inner
        try:
            return render()
        finally:
            exc.__traceback__ = outer
    try:
        exc._render_traceback_ = rendered
    except (AttributeError, TypeError):        # a class without an instance dictionary
        pass


def _dims(d):
    d = tuple(d)
    while len(d) > 1 and d[-1] == 1:
        d = d[:-1]
    return str(d[0]) if len(d) == 1 else str(d)


def _host_timed(launch, args, min_repeat, max_repeat, min_time):
    """The simulator: host-clock times of whole runs (the simulator runs a launch to its end):
    at least ``min_repeat`` (benchmark's default is small here: the simulator is slow), then
    until ``min_time`` seconds have passed, at most ``max_repeat``."""
    __tracebackhide__ = True  # noqa: F841  (see benchmark)
    times, start = [], time.perf_counter()
    # (the simulator is slow: min_time bounds the runs past the first few)
    while len(times) < max_repeat and (len(times) < min_repeat or
                                       time.perf_counter() - start < min_time):
        t0 = time.perf_counter()
        launch(*args)
        times.append(time.perf_counter() - t0)
    return times


def _event_timed(launch, args, min_repeat, max_repeat, min_time, flush_l2, stream_of=None):
    """``stream_of``: the launch's stream's pointer (a launch configuration's ``stream_ptr``);
    None for the current stream."""
    __tracebackhide__ = True  # noqa: F841  (see benchmark)
    from . import probe
    cp = probe.cupy_module()
    ptr = stream_of() if callable(stream_of) else cp.cuda.get_current_stream().ptr
    from .runtime.streams import external_cupy_stream
    stream = external_cupy_stream(cp, ptr)
    peaks = device_peaks()
    scratch = None
    if flush_l2:
        size = 2 * (peaks.l2_bytes or 64 * 2**20)
        scratch = cp.empty(size // 4, dtype=cp.int32)
    stream.synchronize()                # (the warm-up's launches end before any event)
    starts = [cp.cuda.Event() for _ in range(max_repeat)]
    ends = [cp.cuda.Event() for _ in range(max_repeat)]
    times, total, n = [], 0.0, 0
    while n < max_repeat:
        batch = min(max_repeat - n, max(1, min_repeat - n) if n < min_repeat else
                    max(1, n))                             # double the runs each round
        for i in range(n, n + batch):
            if scratch is not None:
                with stream:
                    scratch.fill(i)
            starts[i].record(stream)
            launch(*args)
            ends[i].record(stream)
        ends[n + batch - 1].synchronize()
        for i in range(n, n + batch):
            t = cp.cuda.get_elapsed_time(starts[i], ends[i]) / 1e3
            times.append(t)
            total += t
        n += batch
        if n >= min_repeat and total >= min_time:
            break
    return times, peaks
