"""Recompile ahead: after a notebook cell moved the world (a redefined helper, global, override
or kernel) or defined kernels, the kernels it made stale (and those it defined) are compiled and
loaded in the background while the user types, so that the launch that follows finds them ready
instead of compiling in it.

What a round prepares, for kernels launched on a GPU before:

* each launched specialisation (argument types, device) whose code went stale: recompiled
  (only what changed: a redefined helper costs the helper and a relink) and loaded on its
  device, exactly as its next launch would have done;
* a kernel redefined under its old name with as many parameters (a ``%%cuda`` cell run again,
  a ``@cuda.jit`` cell re-run): the new definition compiled and loaded for the argument types
  and devices the old one was launched with.  That is a guess (the launch after an edit usually
  passes the same arguments); a guess that does not compile is dropped without a word, and the
  launch compiles and reports as it would have;
* a kernel the notebook defined and has not launched yet: compiled and loaded once for the
  argument types its parameter names were last launched with in the notebook (``guesses.py``;
  ``scale(a, x, out)`` after ``saxpy(a, x, y, out)`` ran), when every name was seen.

When: a round starts ``DELAY`` seconds after the cell that moved the world, in a daemon thread,
and stops before each kernel once another cell has started (``go_on``), so a Run All or cells
run in quick succession get no background work; a compile already under way when a cell starts
finishes (the cell shares the GIL with it for that long, ~20-40 ms, and a launch of that very
kernel waits for it and takes its result rather than compiling it again).  At most ``LIMIT``
specialisations a round.

What it leaves alone (each recompiles at its launch, as without rounds): kernels replaced by
a later definition of their name (alive until the collector frees them, or kept under another
name), device functions (compiled with their callers), kernels that show their code when they
compile (``%%cuda --show``: at launch, where the user looks), kernels compiled from their launch
configuration or with argument extensions, kernels restricted to declared signatures that a
guess would not match, and launches in the CPU simulator (nothing is loaded there).  Verbose
recompile lines are held and shown at the top of the next cell, not printed into whichever cell
is running.  The compiles count in ``gpureplace.stats()`` as any other;
``report()`` counts the rounds.  As with the warm-up, a warning a compile raises here is shown
where Python shows it at that moment, and a process that forks while a round runs may copy a
lock it holds into the child (``wait()`` first).
"""

from __future__ import annotations

import threading
import time

from .. import probe
from ..tracking import world
from . import backends, guesses
from . import function as _function

#: Seconds between the end of the cell and the round's start (a person takes longer to run the
#: next cell; Run All does not, and its next cell stops the round before it compiles anything).
DELAY = 0.1
#: The most specialisations one round prepares.
LIMIT = 32

_report = {"rounds": 0, "prepared": 0, "failed": 0, "stopped": 0}
_held = []                       # verbose recompile lines of the rounds, for the next cell
_lock = threading.Lock()
_running = set()                 # threads of rounds under way
_idle = threading.Condition(_lock)


def _always():
    return True


def pending():
    """[(kernel, (argument type keys, device))] a round would prepare now, at most ``LIMIT``:
    first the guesses for kernels redefined under their old name or newly defined (the launch
    that most likely comes next), then stale launches; newer kernels before older ones, and
    each kernel's latest launches first."""
    if backends.simulated() or not probe.available():
        return []
    guessed, stale = [], []
    for fn in sorted(_function.live_functions(), key=lambda fn: fn._born, reverse=True):
        if fn.device or fn.on_compile is not None or fn._config_key is not None or \
                fn._extensions or _function.superseded(fn):
            continue
        cache = list(fn._launch_cache.items())
        stale += [(fn, key) for key, entry in reversed(cache)
                  if entry.spec.world != world.age
                  and not getattr(entry.spec, "launch_config_sensitive", False)]
        if fn._ahead_hints and not fn.specialized:
            guessed += [(fn, key) for key in reversed(fn._ahead_hints)
                        if key not in fn._launch_cache]
        elif not fn._launch_cache and not fn._guessed and not fn.specialized and \
                fn.py_func.__module__ == "__main__":
            # a kernel of the notebook never launched: the types its parameter names had
            key = guesses.guess(fn)
            if key is not None:
                guessed.append((fn, key))
    return (guessed + stale)[:LIMIT]


def run_round(go_on=_always):
    """Prepare what ``pending()`` lists, in this thread, while ``go_on()`` says so; returns the
    number of specialisations prepared."""
    prepared = 0
    held = _function._messages.held = []
    try:
        for fn, key in pending():
            if not go_on():
                _report["stopped"] += 1
                break
            fn._guessed = True             # (a kernel never launched is guessed for once)
            try:
                if fn._prepare_ahead(key):
                    prepared += 1
            except Exception as exc:    # the launch compiles it again and says what is wrong
                _report["failed"] += 1
                _report["last_failure"] = f"{fn.__qualname__}: {type(exc).__name__}: {exc}"
                fn._ahead_hints = ()    # (a guess that failed is not tried again)
            else:                       # (a guess is used once)
                fn._ahead_hints = tuple(k for k in fn._ahead_hints if k != key)
    finally:
        _function._messages.held = None
        with _lock:
            _held.extend(held)
            _report["rounds"] += 1
            _report["prepared"] += prepared
    return prepared


def schedule(go_on, delay=DELAY, first=None):
    """Run a round in a daemon thread ``delay`` seconds from now, while ``go_on()`` says so
    (``first()`` before it: the extension sends redefinitions to Dask workers there); returns
    the thread."""
    def round_():
        try:
            time.sleep(delay)
            if go_on() and first is not None:
                try:
                    first()
                except Exception as exc:
                    _report["first_error"] = f"{type(exc).__name__}: {exc}"
            if go_on():
                run_round(go_on)
        except Exception as exc:        # background work must never disturb the session
            _report["error"] = f"{type(exc).__name__}: {exc}"
        finally:
            with _lock:
                _running.discard(thread)
                _idle.notify_all()

    thread = threading.Thread(target=round_, name="gpureplace-ahead", daemon=True)
    with _lock:
        _running.add(thread)
    thread.start()
    return thread


def wait(timeout=None):
    """Wait for the rounds under way to finish; True when they have."""
    deadline = None if timeout is None else time.monotonic() + timeout
    with _lock:
        while _running:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return False
            _idle.wait(left)
    return True


def take_messages():
    """The verbose recompile lines the rounds held since the last call."""
    with _lock:
        out = list(_held)
        _held.clear()
    return out


def report():
    """Counts of the rounds so far: rounds, prepared, failed, stopped (and the last failure)."""
    return dict(_report)
