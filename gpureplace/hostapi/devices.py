"""Devices and contexts: ``cuda.gpus``, ``get_current_device``, ``select_device``, device
attributes under numba-cuda's names, memory information, profiling."""

from __future__ import annotations

import contextlib
import operator
import os
from collections import namedtuple

from .. import probe
from .common import cupy, sim, simulated


def _attribute_key(name):
    return name.replace("_", "").lower()


class NumberFormats:
    """numba-cuda's ``Device.supports_float16`` / ``supports_bfloat16`` / ``supports_fp8``: the
    arithmetic of those formats its compute capability has (5.3, 8.0, 8.9 and newer)."""

    @property
    def supports_float16(self):
        return tuple(self.compute_capability) >= (5, 3)

    @property
    def supports_bfloat16(self):
        return tuple(self.compute_capability) >= (8, 0)

    @property
    def supports_fp8(self):
        return tuple(self.compute_capability) >= (8, 9)


class Device(NumberFormats):
    """A GPU (numba-cuda's ``Device``): ``id``, ``name``, ``compute_capability`` and the driver's
    attributes under numba-cuda's names (``MAX_THREADS_PER_BLOCK``, ``MULTIPROCESSOR_COUNT``,
    ``WARP_SIZE``, ...).  ``with device:`` makes it current for the block."""

    def __init__(self, devnum):
        self.id = int(devnum)
        self._stack = []

    @property
    def _cupy(self):
        return cupy().cuda.Device(self.id)

    @property
    def name(self):
        name = cupy().cuda.runtime.getDeviceProperties(self.id)["name"]
        return name.decode() if isinstance(name, bytes) else name

    @property
    def compute_capability(self):
        cc = self._cupy.compute_capability
        return int(cc[:-1]), int(cc[-1])

    @property
    def uuid(self):
        raw = cupy().cuda.runtime.getDeviceProperties(self.id).get("uuid", b"")
        h = raw.hex() if isinstance(raw, bytes) else str(raw)
        return f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"

    def __getattr__(self, name):
        if not name.isupper():
            raise AttributeError(name)
        attrs = {_attribute_key(k): v for k, v in self._cupy.attributes.items()}
        value = attrs.get(_attribute_key(name))
        if value is None:
            raise AttributeError(f"device attribute {name!r} is not known (the driver's "
                                 f"attributes: {', '.join(sorted(self._cupy.attributes))})")
        return value

    def reset(self):
        """Wait for the device and release CuPy's cached memory on it."""
        with self._cupy:
            cupy().cuda.runtime.deviceSynchronize()
            cupy().get_default_memory_pool().free_all_blocks()

    def __enter__(self):
        cupy_dev = self._cupy
        cupy_dev.__enter__()
        self._stack.append(cupy_dev)
        return self

    def __exit__(self, *exc):
        return self._stack.pop().__exit__(*exc)

    def __eq__(self, other):
        return isinstance(other, Device) and other.id == self.id

    def __hash__(self):
        return hash(("Device", self.id))

    def __repr__(self):
        return f"<CUDA device {self.id} '{self.name}'>"


def get_current_device():
    if simulated():
        return sim().SimDevice()
    return Device(cupy().cuda.runtime.getDevice())


def select_device(device_id):
    """Make GPU ``device_id`` current for this thread; returns it.  As in numba-cuda, the
    number is ``int(device_id)`` (``"1"`` and ``1.0`` are GPU 1)."""
    try:
        number = int(device_id)
    except (TypeError, ValueError):
        raise TypeError(f"select_device({device_id!r}): a device is chosen by its number, an "
                        f"int or what int() takes (1, '1', 1.0), which this "
                        f"{type(device_id).__name__} is not") from None
    if simulated():
        return sim().select_device(number, device_id)
    n = probe.device_count()
    if not 0 <= number < n:
        raise ValueError(f"select_device({device_id!r}): there are {n} GPU(s)")
    cupy().cuda.Device(number).use()
    return Device(number)


class _GPUs:
    """``cuda.gpus``: the GPUs, indexable and iterable; ``gpus.current`` is the current one."""

    def _count(self):
        return 1 if simulated() else probe.device_count()

    def __len__(self):
        return self._count()

    def __getitem__(self, i):
        n = self._count()
        if isinstance(i, slice):                 # gpus[1:]: a list of the GPUs in the slice
            return [self[k] for k in range(*i.indices(n))]
        try:
            i = operator.index(i)
        except TypeError:
            raise TypeError(f"gpus[{i!r}]: GPUs are indexed by int (or a slice), not "
                            f"{type(i).__name__}") from None
        if not -n <= i < n:
            raise IndexError(f"gpus[{i}]: there are {n} GPU(s)")
        return sim().SimDevice() if simulated() else Device(i % n)

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    @property
    def current(self):
        return get_current_device()

    def __repr__(self):
        return f"<gpureplace.cuda.gpus: {list(self)!r}>"


gpus = _GPUs()


def list_devices():
    return list(gpus)


MemoryInfo = namedtuple("MemoryInfo", "free total")      # (numba-cuda's is one too)


def _read(path):
    try:
        with open(path) as fh:
            return fh.read()
    except OSError:
        return None


def host_memory_info():
    """The host's (free, total) memory in bytes: the simulator's device memory, since its device
    arrays are host arrays.  Linux's ``MemAvailable`` and ``MemTotal`` (``/proc/meminfo``),
    bounded by the process's cgroup's memory limit where it has one (a container's); elsewhere
    ``os.sysconf``'s physical pages.  numba-cuda's simulator answers (inf, inf); numbers the
    host can give let code that sizes batches from free memory work as it would on a GPU."""
    free = total = None
    meminfo = _read("/proc/meminfo")
    if meminfo:
        fields = dict(line.split(":", 1) for line in meminfo.splitlines() if ":" in line)
        try:
            total = int(fields["MemTotal"].split()[0]) * 1024
            free = int(fields.get("MemAvailable", fields["MemFree"]).split()[0]) * 1024
        except (KeyError, ValueError, IndexError):
            free = total = None
    if total is None:
        try:
            page = os.sysconf("SC_PAGE_SIZE")
            total = os.sysconf("SC_PHYS_PAGES") * page
            free = os.sysconf("SC_AVPHYS_PAGES") * page
        except (ValueError, OSError, AttributeError):       # (no sysconf names: not POSIX)
            return MemoryInfo(0, 0)
    limit, used = _read("/sys/fs/cgroup/memory.max"), _read("/sys/fs/cgroup/memory.current")
    if limit and limit.strip().isdigit():                   # (cgroup v2; "max": no limit)
        total = min(total, int(limit))
        if used and used.strip().isdigit():
            free = min(free, max(int(limit) - int(used), 0))
    return MemoryInfo(min(free, total), total)


class _Context:
    """``cuda.current_context()``: the current device's context (memory information,
    synchronisation)."""

    def __init__(self, dev):
        self.device = dev

    def get_memory_info(self):
        """``(free, total)`` bytes of the device's memory; in the simulator, the host's
        (``host_memory_info``), where its device arrays live."""
        if simulated():
            return host_memory_info()
        with cupy().cuda.Device(self.device.id):
            free, total = cupy().cuda.runtime.memGetInfo()
        return MemoryInfo(free, total)

    def synchronize(self):
        if not simulated():
            with cupy().cuda.Device(self.device.id):
                cupy().cuda.runtime.deviceSynchronize()

    def reset(self):
        self.device.reset()

    def get_ipc_handle(self, memory):
        """An ``IpcHandle`` to ``memory`` (a device array's ``gpu_data``) that another process
        opens (``handle.open_array(ctx, shape, dtype)``, or its bytes with
        ``cuda.open_ipc_array``).  Linux only; not in the simulator."""
        from .ipc import context_ipc_handle
        return context_ipc_handle(self, memory)

    def __repr__(self):
        return f"<CUDA context on {self.device!r}>"


def current_context(devnum=None):
    dev = get_current_device() if devnum is None else gpus[devnum]
    return _Context(dev)


def close():
    """Wait for the current device and release CuPy's cached device memory (the context itself
    stays: CuPy and other libraries share it)."""
    if not simulated():
        get_current_device().reset()


def detect():
    """Print the GPUs found; True when there is at least one.  In the simulator, its one
    device, as numba-cuda's simulator prints it (with the simulated device's compute
    capability), and True: the simulated device is there and takes every launch, as
    numba-cuda's simulator says with ``cuda.is_available()`` (gpureplace's
    ``cuda.is_available()`` says whether a GPU can be used, and stays False there)."""
    if simulated():
        cc = sim().SimDevice.compute_capability
        print("Found 1 CUDA devices")
        print("id %d    %20s %40s" % (0, "SIMULATOR", "[SUPPORTED]"))
        print("%40s: %d.%d" % ("compute capability", *cc))
        print("%40s: No" % "FP8 Hardware Acceleration")
        return True
    n = probe.device_count()
    print(f"Found {n} CUDA device(s)")
    for dev in gpus:
        cc = dev.compute_capability
        print(f"id {dev.id} {dev.name!r:>30}  compute capability {cc[0]}.{cc[1]}")
    return n > 0


@contextlib.contextmanager
def defer_cleanup():
    """numba-cuda delays freeing device memory inside this block; CuPy frees an array when its
    last reference goes, in stream order, so there is nothing to defer."""
    yield


def profile_start():
    if not simulated():
        cupy().cuda.runtime.profilerStart()


def profile_stop():
    if not simulated():
        cupy().cuda.runtime.profilerStop()


@contextlib.contextmanager
def profiling():
    profile_start()
    try:
        yield
    finally:
        profile_stop()


def is_float16_supported():
    return True


def is_bfloat16_supported():
    """Whether the current device has bfloat16 arithmetic (compute capability 8.0 or newer).
    The simulator computes in bfloat16 too: True there."""
    if simulated():
        return True
    return tuple(get_current_device().compute_capability) >= (8, 0)
