"""Cell-hook cost: time of ``tracking.bindings.check()`` per cell vs tracked bindings and namespace
size (goal: <= 1 ms at 1,000 tracked, flat in namespace size), then with global arrays among the
1,000 tracked bindings (each compared with the copy its kernels were built from); then the whole
hook of the IPython extension (``post_run_cell``: the check, the collection of what old
definitions left, the rest) in a session of 10 and 100 kernels reading 100 globals each (1,000
and 10,000 tracked bindings), after a cell that changes nothing, one that rebinds one global a
kernel reads, one that defines a kernel (in place of one never launched), and one that rebinds a
global and launches its kernel or defines and launches a kernel (both recompile: what the old
code held is let go).  CPU only; runs anywhere (kernels in the simulator without a GPU)."""

import os
import tempfile
import time

import numpy as np

# (the session's kernels: in a disk cache of their own, never the user's)
os.environ.setdefault("GPUREPLACE_CACHE_DIR", tempfile.mkdtemp(prefix="gpureplace-cell-hook-"))

from gpureplace.tracking import bindings, contents  # noqa: E402


def measure(tracked, namespace_size, arrays=0, array_bytes=0, reps=50):
    bindings.clear()
    ns = {"__name__": "bench"}
    ns.update({f"junk{i}": i for i in range(namespace_size)})
    for i in range(tracked):
        value = np.random.rand(array_bytes // 8) if i < arrays else float(i)
        ns[f"v{i}"] = value
        bindings.track(ns, f"v{i}", value, None, contents.snapshot(value))
    bindings.check()
    t = time.perf_counter()
    for _ in range(reps):
        bindings.check()
    return (time.perf_counter() - t) / reps * 1e3


#: The cells whose hook is timed, after the session's set-up: (column, cell).
HOOK_CELLS = (
    ("pass", "pass"),
    ("rebinds a global", "g_0_0 += 1"),
    ("defines a kernel", "@cuda.jit\ndef t(x):\n    x[0] = 1"),
    ("rebinds + launches", "g_0_1 += 1\nk_0[1, 1](x)"),
    ("defines + launches", "@cuda.jit\ndef t(x):\n    x[0] = 2\nt[1, 1](x)"),
)


def measure_hook(kernel_counts=(10, 100), globals_per_kernel=100, reps=15):
    """{tracked bindings: {column: ms}}: the median time of the extension's ``post_run_cell``
    after each of ``HOOK_CELLS``, in one IPython session grown to each kernel count."""
    import contextlib
    import io
    import statistics

    from IPython.core.interactiveshell import InteractiveShell

    from gpureplace.ipython import magics

    times = []
    hook = magics.GPUReplace.post_run_cell

    def timed(self, *args, **kwargs):
        t = time.perf_counter()
        try:
            return hook(self, *args, **kwargs)
        finally:
            times.append(time.perf_counter() - t)

    magics.GPUReplace.post_run_cell = timed       # (before the extension registers it)
    ip = InteractiveShell.instance()
    ip.history_manager.enabled = False

    def run(src):
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            res = ip.run_cell(src, store_history=False)
        if not res.success:
            raise RuntimeError(f"cell failed: {src[:80]!r}: {res.error_in_exec!r}")

    try:
        run("%load_ext gpureplace")
        run("%config GPUReplace.recompile_ahead = False")
        run("import numpy as np\nfrom gpureplace import cuda\nx = np.zeros(4, np.float32)")
        out, made = {}, 0
        for kernels in kernel_counts:
            for k in range(made, kernels):
                run("\n".join(f"g_{k}_{j} = {j}.5" for j in range(globals_per_kernel)))
                run(f"@cuda.jit\ndef k_{k}(x):\n    x[0] = "
                    + " + ".join(f"g_{k}_{j}" for j in range(globals_per_kernel))
                    + f"\nk_{k}[1, 1](x)")
            made = kernels
            row = out[kernels * globals_per_kernel] = {}
            for column, src in HOOK_CELLS:
                run(src)                              # (what the first one owes: not timed)
                ts = []
                for _ in range(reps):
                    run(src)
                    ts.append(times[-1])
                row[column] = statistics.median(ts) * 1e3
        return out
    finally:
        magics.GPUReplace.post_run_cell = hook
        with contextlib.suppress(Exception), contextlib.redirect_stdout(io.StringIO()), \
                contextlib.redirect_stderr(io.StringIO()):
            ip.run_line_magic("unload_ext", "gpureplace")


if __name__ == "__main__":
    print(f"{'tracked':>8s} {'namespace':>10s} {'ms/cell':>8s}")
    for tracked in (10, 1000, 10000):
        for size in (100, 100000):
            print(f"{tracked:8d} {size:10d} {measure(tracked, size):8.3f}")
    print()
    print("global arrays among 1,000 tracked bindings (namespace of 100)")
    print(f"{'tracked':>8s} {'arrays':>7s} {'bytes each':>11s} {'ms/cell':>8s}")
    for arrays, nbytes in ((10, 4096), (100, 4096), (10, 65536), (100, 65536), (1000, 64),
                           (1, 16 << 20), (1, 80_000_000)):
        reps = 50 if nbytes * arrays <= 8 << 20 else 5
        ms = measure(1000, 100, arrays, nbytes, reps)
        print(f"{1000:8d} {arrays:7d} {nbytes:11d} {ms:8.3f}")
    bindings.clear()
    print()
    try:
        import IPython  # noqa: F401
    except ImportError:
        print("whole cell hook: skipped (IPython is not installed)")
    else:
        rows = measure_hook()
        print("whole cell hook in IPython (GPUReplace.post_run_cell), ms after a cell that ... "
              "(median of 15; 100 globals a kernel; recompile ahead off)")
        widths = [max(len(c), 8) for c, _ in HOOK_CELLS]
        print(f"{'tracked':>8s}  " + "  ".join(f"{c:>{w}s}" for (c, _), w in zip(HOOK_CELLS,
                                                                              widths)))
        for tracked, row in rows.items():
            # (the count with a thousands separator: run_all.py's parser reads only the rows
            # above)
            print(f"{tracked:>8,d}  " + "  ".join(f"{row[c]:>{w}.2f}" for (c, _), w in
                                                  zip(HOOK_CELLS, widths)))
