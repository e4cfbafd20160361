"""The live ``cuda.jit`` functions are listed (by every collection, every cell's hook and
launches) while other threads make new ones: the WeakSet they are kept in raised "Set changed
size during iteration" into a launch or the cell hook."""

import threading

from gpureplace import cuda
from gpureplace.jit import definitions


def test_listing_live_functions_while_another_thread_makes_them():
    stop = threading.Event()
    made = []

    def make():
        while not stop.is_set():
            made.append(cuda.jit(lambda x: None))
            if len(made) > 200:
                del made[:100]             # (some die: the set shrinks too)

    maker = threading.Thread(target=make)
    maker.start()
    errors = []
    try:
        for _ in range(20000):
            try:
                definitions.live_functions()
            except RuntimeError as exc:
                errors.append(exc)
                break
    finally:
        stop.set()
        maker.join()
    assert not errors, errors
