"""Loading PTX per device and launching it through the CUDA driver (via CuPy).

Parameters are packed with ``struct`` into one buffer per specialisation and handed to
``cuLaunchKernel`` through ``CU_LAUNCH_PARAM_BUFFER_POINTER``: one C call per launch, no per-argument
Python objects.
"""

from __future__ import annotations

import ctypes
import operator
import re
import struct
import sys
import threading

from .. import probe
from ..arch import shared_opt_in_bytes
from ..compiler import toolchain
from ..compiler.exceptions import EXCEPTION_GLOBAL, EXCEPTION_WORDS, raise_from_record
from ..compiler.pipeline import KernelSpecialization
from ..config import env_size, settings
from ..errors import LaunchError, NoDeviceError
from . import linking

_GRID_BARRIER = "__gpureplace_grid_barrier"      # compiler/intrinsics/cg.py
_CU_LAUNCH_PARAM_END = 0
_CU_LAUNCH_PARAM_BUFFER_POINTER = 1
_CU_LAUNCH_PARAM_BUFFER_SIZE = 2


class ParamBuffer:
    """A kernel parameter buffer and the ``extra`` array that hands it to ``cuLaunchKernel``
    (``CU_LAUNCH_PARAM_BUFFER_POINTER``); keep this object alive while its pointers are used."""

    def __init__(self, size, data=None):
        self.buffer = ctypes.create_string_buffer(max(size, 1))
        if data:
            ctypes.memmove(self.buffer, data, len(data))
        self.size = ctypes.c_size_t(size)
        self.extra = (ctypes.c_void_p * 5)(_CU_LAUNCH_PARAM_BUFFER_POINTER,
                                           ctypes.addressof(self.buffer),
                                           _CU_LAUNCH_PARAM_BUFFER_SIZE,
                                           ctypes.addressof(self.size), _CU_LAUNCH_PARAM_END)
        self.extra_ptr = ctypes.addressof(self.extra) if size else 0


_CU_JIT_GENERATE_LINE_INFO = 13


class _LineInfoModule:
    """A kernel's module loaded with the JIT option that keeps the PTX's line directives in the
    machine code (``lineinfo=True``: profilers and debuggers then show source lines).  CuPy's
    ``Module.load`` passes no JIT options, so this one goes through the driver library."""

    def __init__(self, ptx, name):
        lib = probe.libcuda()
        handle, fn = ctypes.c_void_p(), ctypes.c_void_p()
        options = (ctypes.c_int * 1)(_CU_JIT_GENERATE_LINE_INFO)
        values = (ctypes.c_void_p * 1)(1)
        self._check(lib, lib.cuModuleLoadDataEx(ctypes.byref(handle), ctypes.c_char_p(
            ptx.encode()), 1, options, values), "loading the kernel's PTX")
        self.handle, self._unload = handle, lib.cuModuleUnload
        self._check(lib, lib.cuModuleGetFunction(ctypes.byref(fn), handle, name.encode()),
                    f"finding {name} in its module")
        self.ptr = fn.value

    @staticmethod
    def _check(lib, rc, what):
        if rc:
            text = ctypes.c_char_p()
            lib.cuGetErrorName(rc, ctypes.byref(text))
            raise LaunchError(f"{what} failed: {(text.value or b'').decode()} ({rc})")

    def __del__(self):
        try:
            self._unload(self.handle)
        except Exception:                    # the driver may be gone at interpreter exit
            pass


def _driver():
    lib = probe.libcuda()
    if lib is None:
        raise NoDeviceError("the CUDA driver library (libcuda.so.1) was not found")
    return lib


def global_address(module, symbol, nbytes):
    """Device address of the global ``symbol`` (of ``nbytes``) of a loaded module."""
    ptr, size = ctypes.c_uint64(), ctypes.c_size_t()
    rc = _driver().cuModuleGetGlobal_v2(ctypes.byref(ptr), ctypes.byref(size),
                                        ctypes.c_void_p(int(module)), symbol.encode())
    if rc or size.value != nbytes:
        raise LaunchError(f"internal error: the kernel's module has no global {symbol} of "
                          f"{nbytes} bytes (driver error {rc}, size {size.value})")
    return ptr


def fill_device_arrays(module, arrays):
    """Copy each global array a kernel reads from device memory (``[(symbol, host copy)]``, see
    compiler/target.py) into its module's global of that name: once per load, from the copy
    the kernel's dependency records keep, which is what the cell hook compares."""
    lib = _driver()
    for symbol, array in arrays:
        ptr = global_address(module, symbol, array.nbytes)
        rc = lib.cuMemcpyHtoD_v2(ptr, ctypes.c_void_p(array.ctypes.data),
                                 ctypes.c_size_t(array.nbytes))
        if rc:
            raise LaunchError(f"copying a global array of {array.nbytes} bytes to the device "
                              f"failed (driver error {rc})")


#: The per-thread stack a kernel with recursive device functions gets (the CUDA default is
#: 1 KiB: fib(15), at some 72 bytes a frame, overflows it, and an overflow is an illegal
#: address that ends the CUDA context).  The driver reserves it for every resident thread:
#: 8 KiB is about 2.2 GB on an H200.  ``GPUREPLACE_RECURSION_STACK`` (bytes: ``16384``,
#: ``16K``, ``16KiB``; ``config.SIZE_FORMS``; anything else is a warning and the default) changes it.
RECURSION_STACK_BYTES = env_size("GPUREPLACE_RECURSION_STACK", 8192)
_stack_raised = set()          # devices whose stack limit was raised for recursion
_FUNC_BODY = re.compile(r"^\.func\s+(?:\([^)]*\)\s*)?(\w+)\s*\((.*?)^\}", re.M | re.S)


def is_recursive(ptx):
    """Whether a device function of ``ptx`` calls itself (its stack depth is then unknown to
    ptxas; mutual recursion is refused by the compiler)."""
    if ptx.count(".func") < 2:
        return False
    return any(re.search(rf"\bcall(?:\.uni)?\s+(?:\([^)]*\),\s*)?{re.escape(name)}\b", body)
               for name, body in _FUNC_BODY.findall(ptx))


def ensure_recursion_stack(device_id):
    """Raise the device's per-thread stack limit to RECURSION_STACK_BYTES (once)."""
    if device_id in _stack_raised:
        return
    runtime = probe.cupy_module().cuda.runtime
    with probe.cupy_module().cuda.Device(device_id):
        if runtime.deviceGetLimit(runtime.cudaLimitStackSize) < RECURSION_STACK_BYTES:
            runtime.deviceSetLimit(runtime.cudaLimitStackSize, RECURSION_STACK_BYTES)
    _stack_raised.add(device_id)


class LoadedKernel:
    """A specialisation's PTX loaded on one device, with its parameter buffer."""

    def __init__(self, spec, device_id, link=(), carveout=None):
        cp = probe.cupy_module()
        probe.cuda_used = True          # (a fork from now on cannot use CUDA: probe.py)
        self.device_id = device_id
        if is_recursive(spec.ptx):
            ensure_recursion_stack(device_id)
        with cp.cuda.Device(device_id):
            self.module = cp.cuda.function.Module()
            externs = linking.external_symbols(spec.ptx) if ".extern .func" in spec.ptx else ()
            files = linking.files_for(spec.ptx, link) if (link or externs) else ()
            if files or externs:
                self.module.load(linking.link(spec.ptx, files, probe.arch_of(device_id)))
                self.function = self.module.get_function(spec.name)
                self._linked = [f for f in files if getattr(f, "setup_callback", None) or
                                getattr(f, "teardown_callback", None)]
                for code in self._linked:
                    if code.setup_callback is not None:
                        code.setup_callback(self.module)
            elif spec.options.lineinfo and probe.libcuda() is not None:
                self.module = self.function = _LineInfoModule(spec.ptx, spec.name)
            else:
                self.module.load(spec.ptx.encode())
                self.function = self.module.get_function(spec.name)
            handle = self.module.handle.value if isinstance(self.module, _LineInfoModule) \
                else self.module.ptr
            if spec.device_arrays:
                fill_device_arrays(handle, spec.device_arrays)
            # debug=True: where a failing thread records its exception (compiler/exceptions.py)
            self.exception_ptr = global_address(handle, EXCEPTION_GLOBAL, 4 * EXCEPTION_WORDS) \
                if spec.options.debug else None
        self.spec = spec
        self.fn_ptr = self.function.ptr
        if carveout is not None:             # cuda.jit(shared_memory_carveout=...)
            driver = cp.cuda.driver
            driver.funcSetAttribute(self.fn_ptr,
                                    driver.CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT,
                                    carveout)
        self.packer = struct.Struct(spec.param_format)
        self.params = ParamBuffer(self.packer.size)
        self.buffer, self.extra_ptr = self.params.buffer, self.params.extra_ptr
        self.lock = threading.Lock()
        # The fast launch (binder.make_fast_launch) whose arguments the buffer holds, if any.
        self.packed_by = None
        self.launch_kernel = cp.cuda.driver.launchKernel
        # A block has 48 KiB of shared memory without asking, its static arrays' and its dynamic
        # bytes together; a launch wanting more dynamic bytes than are left (``free_shared``)
        # raises the function's dynamic limit first (allow_shared), up to the device's opt-in.
        try:
            static = int(self.attribute("shared_size_bytes"))
        except Exception:                    # (a driver that cannot say: the dynamic bytes alone)
            static = 0
        self.free_shared = self._dynamic_smem_limit = max(48 * 1024 - static, 0)
        self._cooperative_limits = {}
        self._offsets = None                 # parameter offsets (cooperative launches)
        self.cooperative = _GRID_BARRIER in spec.ptx
        if self.cooperative:
            # cuda.cg.this_grid().sync(): every block must be resident at once
            self.launch_kernel = self._launch_cooperative

    def __del__(self):
        for code in getattr(self, "_linked", ()):     # linked code's teardown_callback
            if code.teardown_callback is not None:
                try:
                    code.teardown_callback(self.module)
                except Exception:                   # (at interpreter exit: nothing to do)
                    pass
        # The module unloads from its own device's context (cuModuleUnload acts on the current
        # one): where another device may be current, it is dropped with its device current.
        if getattr(self, "module", None) is not None and probe.device_count() > 1:
            try:
                with probe.cupy_module().cuda.Device(self.device_id):
                    self.function = self.module = None
            except Exception:                       # (at interpreter exit: nothing to do)
                pass

    def allow_shared(self, shared):
        """Raise the function's dynamic shared-memory limit to ``shared`` bytes when needed (past
        48 KiB with the static arrays, the driver wants it set before the launch)."""
        if shared > self._dynamic_smem_limit:
            driver = probe.cupy_module().cuda.driver
            driver.funcSetAttribute(self.fn_ptr,
                                    driver.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, shared)
            self._dynamic_smem_limit = shared

    def _launch_cooperative(self, fn, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
        """``cuLaunchCooperativeKernel`` with the arguments of ``cuLaunchKernel`` (the parameters
        come as kernelParams: pointers into the buffer ``extra`` names)."""
        import ctypes
        blocks, threads = gx * gy * gz, bx * by * bz
        limit = self.max_cooperative_blocks(threads, shared)
        if blocks > limit:
            raise LaunchError(
                f"{self.spec.name} synchronises the grid (cuda.cg.this_grid().sync()), so all "
                f"its blocks must be resident at once: at most {limit} blocks of {threads} "
                f"threads ({shared} bytes of dynamic shared memory) on this GPU, got {blocks}")
        buf = ctypes.cast(extra, ctypes.POINTER(ctypes.c_void_p))[1] if extra else 0
        offsets = self._offsets
        if offsets is None:
            offsets = self._offsets = param_offsets(self.spec.param_format)[0]
        ptrs = (ctypes.c_void_p * max(len(offsets), 1))(*[buf + o for o in offsets])
        probe.cupy_module().cuda.driver.launchCooperativeKernel(
            fn, gx, gy, gz, bx, by, bz, shared, stream, ctypes.addressof(ptrs))

    def max_cooperative_blocks(self, threads, shared=0):
        """How many blocks of ``threads`` threads can be resident at once on this device."""
        key = (threads, shared)
        limit = self._cooperative_limits.get(key)
        if limit is None:
            cp = probe.cupy_module()
            per_sm = cp.cuda.driver.occupancyMaxActiveBlocksPerMultiprocessor(
                self.fn_ptr, threads, shared)
            sms = cp.cuda.Device(self.device_id).attributes["MultiProcessorCount"]
            limit = self._cooperative_limits[key] = per_sm * sms
        return limit

    def attribute(self, name):
        """The driver's ``CU_FUNC_ATTRIBUTE_<NAME>`` of the loaded function (``num_regs``,
        ``shared_size_bytes``, ``local_size_bytes``, ...)."""
        driver = probe.cupy_module().cuda.driver
        return driver.funcGetAttribute(getattr(driver, f"CU_FUNC_ATTRIBUTE_{name.upper()}"),
                                       self.fn_ptr)

    def launch(self, grid, block, stream, shared, values):
        self.allow_shared(shared)
        with self.lock:
            self.packed_by = None
            try:
                self.packer.pack_into(self.buffer, 0, *values)
            except struct.error as exc:
                raise LaunchError(f"an argument does not fit its parameter type: {exc}") from None
            self.launch_kernel(self.fn_ptr, grid[0], grid[1], grid[2], block[0], block[1],
                               block[2], shared, stream, 0, self.extra_ptr)
        if self.exception_ptr is not None:
            self.raise_device_exception(stream)

    def raise_device_exception(self, stream):
        """debug=True: wait for the launch on ``stream`` and raise the exception a thread
        recorded, if one did (the record is cleared for the next launch)."""
        lib = _driver()
        with probe.cupy_module().cuda.Device(self.device_id):
            rc = lib.cuStreamSynchronize(ctypes.c_void_p(int(stream)))
            if rc:
                raise LaunchError(f"{self.spec.name}: synchronising after the launch failed "
                                  f"(driver error {rc})")
            words = (ctypes.c_int32 * EXCEPTION_WORDS)()
            lib.cuMemcpyDtoH_v2(words, self.exception_ptr, ctypes.c_size_t(ctypes.sizeof(words)))
            if words[0]:
                lib.cuMemsetD32_v2(self.exception_ptr, ctypes.c_uint(0),
                                   ctypes.c_size_t(EXCEPTION_WORDS))
                raise_from_record(self.spec.name, self.spec.exceptions, list(words))


class Specialization(KernelSpecialization):
    """A compiled kernel as ``kernel.overloads`` gives it: the compiler's record, and what asking
    the GPU about it needs (numba-cuda's ``_Kernel``: ``regs_per_thread`` and the other resource
    properties, ``max_cooperative_grid_blocks``, ``inspect_types``, ``inspect_sass_cfg``)."""

    #: what loading it on its own needs: the kernel's ``cuda.jit(link=...)`` files and
    #: ``shared_memory_carveout`` (set by the kernel that compiled it, jit/function.py)
    link = ()
    carveout = None

    def max_cooperative_grid_blocks(self, blockdim, dynsmemsize=0):
        """How many blocks of ``blockdim`` threads a cooperative launch of this kernel (one that
        syncs the grid) can have on the current GPU (numba-cuda's name).  In the simulator: as
        many as it runs at once (``SIMULATED_GRID_THREADS`` threads in all, the limit its
        cooperative launch enforces), none where a block cannot have ``dynsmemsize`` bytes of
        dynamic shared memory with its static arrays on the simulated device, an sm_90 (its
        launch would be refused: jit/launcher.py's ``shared_limit``)."""
        dims = normalize_dims(blockdim, "block")
        threads = dims[0] * dims[1] * dims[2]
        dynsmemsize = dynamic_shared_size(dynsmemsize, "max_cooperative_grid_blocks()")
        if settings.launch_backend() == "simulator":
            most = shared_opt_in_bytes("sm_90")
            static = toolchain.ptx_static_shared(self.ptx)
            if dynsmemsize + static > most:
                return 0
            return simulated_cooperative_blocks(threads, dynsmemsize + static)
        require_device("max_cooperative_grid_blocks()")
        return self.loaded(probe.current_device()).max_cooperative_blocks(threads, dynsmemsize)

    def loaded(self, device_id):
        """This specialisation loaded on device ``device_id`` (once: kept for further
        questions)."""
        kept = self.__dict__.setdefault("_loaded", {})
        loaded = kept.get(device_id)
        if loaded is None:
            ensure_context(device_id)
            loaded = kept[device_id] = LoadedKernel(self, device_id, self.link, self.carveout)
        return loaded

    def resource(self, name, what):
        """The driver's attribute ``name`` of this kernel (``num_regs``, ``shared_size_bytes``,
        ``local_size_bytes``, ``const_size_bytes``, ``max_threads_per_block``) on the current
        GPU; without a GPU, what ptxas reports for the kernel's architecture (the same numbers).
        ``what``: the user's call, named in the errors."""
        if not probe.available():
            return assembled_resource(self, name, what)
        return int(self.loaded(probe.current_device()).attribute(name))

    # numba-cuda's ``_Kernel`` properties
    @property
    def regs_per_thread(self):
        """The registers each thread of this kernel uses."""
        return self.resource("num_regs", "regs_per_thread")

    @property
    def shared_mem_per_block(self):
        """The bytes of static shared memory a block of this kernel has."""
        return self.resource("shared_size_bytes", "shared_mem_per_block")

    @property
    def local_mem_per_thread(self):
        """The bytes of local memory (stack frame) each thread of this kernel uses."""
        return self.resource("local_size_bytes", "local_mem_per_thread")

    @property
    def const_mem_size(self):
        """The bytes of constant memory this kernel's module uses."""
        return self.resource("const_size_bytes", "const_mem_size")

    @property
    def max_threads_per_block(self):
        """The most threads a block of this kernel may have (its registers and
        ``launch_bounds`` allowing)."""
        return self.resource("max_threads_per_block", "max_threads_per_block")

    @property
    def metadata(self):
        """What its compile recorded (numba-cuda's ``overloads[sig].metadata``, also
        ``kernel.get_metadata(sig)``): its options, whether it came from the disk cache, how
        long it took, whether it was compiled for its launch's configuration."""
        return {"options": self.options, "from_disk": self.from_disk,
                "compile_seconds": self.compile_seconds,
                "launch_config_sensitive": self.launch_config_sensitive}

    def inspect_sass_cfg(self):
        """The control-flow graph of its SASS in DOT (``nvdisasm -cfg``, from NVIDIA's wheels;
        no GPU needed), as numba-cuda's."""
        return toolchain.sass_of_ptx(self.ptx, self.options.arch, "inspect_sass_cfg", cfg=True)

    def inspect_types(self, file=None):
        """Numba's typed IR of the kernel's body, written to ``file`` (standard output by
        default), headed and ruled off as numba-cuda's ``overloads[sig].inspect_types()``."""
        out = sys.stdout if file is None else file
        print(f"{self.name} {self.argtypes}", file=out)
        print("-" * 80, file=out)
        print(self._type_annotation, file=out)
        print("=" * 80, file=out)


#: The simulator runs a kernel that syncs the grid with all its threads at once, as Python
#: threads: at most this many (simulator/runner.py refuses a larger cooperative launch).
SIMULATED_GRID_THREADS = 16384

#: The simulated device's multiprocessors and shared memory (simulator/host.py's device
#: attributes take them from here): what its cooperative launches may hold at once.
SIMULATED_DEVICE = {"MULTIPROCESSOR_COUNT": 1,
                    "MAX_SHARED_MEMORY_PER_MULTIPROCESSOR": 228 * 1024,
                    "RESERVED_SHARED_MEMORY_PER_BLOCK": 1024}


def simulated_cooperative_blocks(threads, block_shared):
    """How many blocks of ``threads`` threads, each with ``block_shared`` bytes of shared memory
    (static and dynamic), a cooperative launch may have in the simulator: no more than its
    grid mode runs at once (``SIMULATED_GRID_THREADS`` threads), and, for blocks that use shared
    memory, no more than the simulated device (simulator/host.py's attributes: one sm_90
    multiprocessor, 228 KiB of shared memory, 1 KiB of it reserved per block) could hold at
    once -- what ``occupancyMaxActiveBlocksPerMultiprocessor`` times the multiprocessors says on
    a GPU, as far as shared memory limits it.  (Blocks without shared memory are limited by the
    thread cap alone: the simulator stands in for a whole GPU's threads there, not for one
    multiprocessor's 32 blocks.)"""
    by_threads = SIMULATED_GRID_THREADS // threads
    if block_shared <= 0:
        return by_threads
    per_block = block_shared + SIMULATED_DEVICE["RESERVED_SHARED_MEMORY_PER_BLOCK"]
    per_sm = SIMULATED_DEVICE["MAX_SHARED_MEMORY_PER_MULTIPROCESSOR"] // per_block
    return min(by_threads, per_sm * SIMULATED_DEVICE["MULTIPROCESSOR_COUNT"])


def dynamic_shared_size(value, what=None):
    """``value``, bytes of dynamic shared memory (a launch's fourth value), as an int; anything
    but a non-negative integer (NumPy's too, as ``as_index`` takes them) is refused, as a
    ``LaunchError`` (a ``ValueError``), naming ``what`` (the user's call) when given."""
    size = as_index(value)
    if size is None or size < 0:
        raise LaunchError(f"{what + ': ' if what else ''}dynamic shared memory must be a "
                          f"non-negative int of bytes, got {value!r}{describe_kind(value)}")
    return size


#: the user's name for each of the driver's function attributes, by ``Reflection`` method
RESOURCE_METHODS = {"num_regs": "get_regs_per_thread",
                    "shared_size_bytes": "get_shared_mem_per_block",
                    "local_size_bytes": "get_local_mem_per_thread",
                    "const_size_bytes": "get_const_mem_size",
                    "max_threads_per_block": "get_max_threads_per_block"}


def assembled_resource(spec, name, what):
    """The driver attribute ``name`` of kernel ``spec`` as ptxas reports it, for the kernel's
    architecture (``toolchain.resources``); ``what`` is the user's call the errors name."""
    kept = spec.__dict__          # (one ptxas run a specialisation: its answers do not change)
    found = kept.get("_assembled_resources")
    if found is None:
        found = kept["_assembled_resources"] = toolchain.resources(spec.ptx, spec.name)
    if found is not None:
        return found[name]
    if toolchain.find_tool("ptxas") is None:
        raise NoDeviceError(f"{what}(): without a GPU, a kernel's resource usage comes from "
                            f"NVIDIA's ptxas, which was not found: pip install "
                            f"{toolchain.PACKAGES['ptxas']} (or set GPUREPLACE_PTXAS to its path)")
    raise RuntimeError(f"{what}(): ptxas ({toolchain.find_tool('ptxas')}) reported no resource "
                       f"usage for {spec.name} (it refused the PTX for {spec.options.arch}: "
                       f"kernel.inspect_sass(sig) shows its error)")


def param_offsets(fmt):
    """(byte offset of each value, format letters) of the native ('@') struct format ``fmt``
    (one letter a value), as the parameter buffer lays them out."""
    letters = fmt.lstrip("@")
    return [struct.calcsize("@" + letters[:k] + "0" + letters[k])
            for k in range(len(letters))], letters


def require_device(what="", then=""):
    """Raise NoDeviceError unless a GPU can be used: why there is none, and how to run anyway
    (probe.no_device_message); ``what`` (who needs the GPU) is said before it, ``then`` after."""
    if not probe.available():
        raise NoDeviceError(f"{what}: " * bool(what) + probe.no_device_message() + then)


def current_stream(device_id=-1):  # noqa: F811 (rebinds itself to CuPy's on first use)
    """CuPy's current stream on ``device_id`` (default: the current device); this function
    replaces itself with CuPy's on first use."""
    global current_stream
    current_stream = probe.cupy_module().cuda.get_current_stream
    return current_stream(device_id)


def current_stream_ptr():
    return current_stream().ptr


_tls = threading.local()
_printf = {"pending": False}     # a kernel that prints was launched since the last cell ended


def note_printf():
    _printf["pending"] = True
    listener = _printf.get("listener")
    if listener is not None:
        listener()


def set_printf_listener(fn):
    """``fn()`` is called when a kernel that prints is launched (the IPython extension starts
    capturing the process's standard output there)."""
    _printf["listener"] = fn


def printf_pending():
    return _printf["pending"]


def clear_printf_pending():
    _printf["pending"] = False


def ensure_context(dev):
    """Make ``dev``'s primary context current in this thread (the driver API launches into the
    thread's current context, and a new thread has none until a runtime call sets it)."""
    if getattr(_tls, "device", -1) != dev:
        probe.cupy_module().cuda.runtime.setDevice(dev)
        _tls.device = dev


def retry_errors():
    """Launch errors after which the general path should try again (see binder.make_fast_launch)."""
    try:
        from cupy_backends.cuda.api.driver import CUDADriverError
    except ImportError:
        return ()
    return (CUDADriverError,)


def stream_ptr(stream):
    if stream is None:
        return current_stream_ptr()
    handle = as_index(stream)
    if handle is not None:
        return handle
    for attr in ("ptr", "cuda_stream", "handle"):
        val = getattr(stream, attr, None)
        if isinstance(val, int):
            STREAM_TYPES.add(type(stream))
            return val
    from .streams import protocol_handle
    handle = protocol_handle(stream)      # (cuda.core's streams and others of the protocol)
    if handle is not None:
        STREAM_TYPES.add(type(stream))
        return handle
    raise LaunchError(f"stream must be a CuPy or PyTorch stream, an object with "
                      f"__cuda_stream__, an int handle or None, got {stream!r}"
                      f"{describe_kind(stream)}")


#: Types of the stream objects launches were given (see same_kinds).
STREAM_TYPES = set()


def as_index(value):
    """``value`` as an int where it is one or integer-like (NumPy's integers: anything
    ``operator.index`` takes, as numba-cuda's ``numbers.Integral``), else None; a bool (or
    NumPy's) is None too: ``k[True, 32]`` is a mistake rather than a grid of one block."""
    if type(value) is int:
        return value
    if isinstance(value, bool) or getattr(type(value), "__index__", None) is None:
        return None
    try:
        return operator.index(value)
    except TypeError:                 # NumPy's bool has __index__, which refuses
        return None


def describe_kind(value):
    """`` (a float)``: what ``value`` is, where its repr does not say."""
    name = type(value).__name__
    return "" if isinstance(value, (int, str, tuple, list)) and not isinstance(value, bool) \
        else f" (a {name})"


_DIM_LIMITS_GRID = (2**31 - 1, 65535, 65535)
_DIM_LIMITS_BLOCK = (1024, 1024, 64)


def normalize_dims(value, what):
    """``value`` (an int, or a tuple or list of 1 to 3: any integer-like values, as numba-cuda
    takes them) as a 3-tuple of ints within the device's limits for ``what`` ("grid" or
    "block"); a LaunchError naming ``what`` otherwise."""
    n = as_index(value)
    if n is not None:
        dims = (n, 1, 1)
    elif isinstance(value, (tuple, list)) and 1 <= len(value) <= 3:
        dims = tuple(as_index(v) for v in value)
        if None in dims:
            axis = dims.index(None)
            raise LaunchError(f"{what} must be an int or a tuple of 1 to 3 ints, got "
                              f"{value!r}: its {'xyz'[axis]} dimension is "
                              f"{value[axis]!r}{describe_kind(value[axis])}")
        dims += (1,) * (3 - len(dims))
    else:
        raise LaunchError(f"{what} must be an int or a tuple of 1 to 3 ints, got "
                          f"{value!r}{describe_kind(value)}")
    limits = _DIM_LIMITS_GRID if what == "grid" else _DIM_LIMITS_BLOCK
    for axis, (n, lim) in enumerate(zip(dims, limits)):
        if n <= 0:
            raise LaunchError(f"{what} dimension {'xyz'[axis]} is {n}: it must be at least 1")
        if n > lim:
            raise LaunchError(f"{what} dimension {'xyz'[axis]} is {n}, over the device limit "
                              f"of {lim}")
    if what == "block" and dims[0] * dims[1] * dims[2] > 1024:
        raise LaunchError(f"block {dims} has {dims[0] * dims[1] * dims[2]} threads, over the "
                          f"limit of 1024 threads per block")
    return dims
