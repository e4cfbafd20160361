"""Launches from several host threads at once, in the simulator as on a GPU:

* atomics on global memory are atomic across launches running at the same time (each launch had
  a lock of its own: two kernels counting into one array lost updates);
* the launches of one stream -- the default stream, or one ``cuda.stream()`` shared by threads --
  run one after another (they ran interleaved, in each caller's thread); launches on different
  streams still run at once.
"""

import threading

import numpy as np

from gpureplace import cuda


@cuda.jit
def count(c):
    for _ in range(50):
        cuda.atomic.add(c, 0, 1)


@cuda.jit
def bump(c):
    for _ in range(300):
        c[0] += 1                      # (one thread: no atomic, the stream's order makes it exact)


def _in_threads(work, n=3):
    errors = []

    def run():
        try:
            work()
        except BaseException as exc:    # noqa: BLE001 (reported by the test)
            errors.append(exc)
    threads = [threading.Thread(target=run) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors
    assert not any(t.is_alive() for t in threads)


def test_atomics_of_launches_on_different_streams_at_once_lose_nothing():
    c = cuda.to_device(np.zeros(1, np.int64))
    count[1, 32](c)
    c = cuda.to_device(np.zeros(1, np.int64))

    def work():
        s = cuda.stream()
        for _ in range(4):
            count[2, 32, s](c)
        s.synchronize()
    _in_threads(work)
    assert int(c.copy_to_host()[0]) == 3 * 4 * 2 * 32 * 50


def test_launches_of_one_stream_from_several_threads_run_one_after_another():
    c = cuda.to_device(np.zeros(1, np.int64))
    bump[1, 1](c)
    shared = cuda.stream()
    for stream in (0, shared, cuda.legacy_default_stream()):
        c = cuda.to_device(np.zeros(1, np.int64))

        def work():
            for _ in range(6):
                bump[1, 1, stream](c)
        _in_threads(work)
        cuda.synchronize()
        assert int(c.copy_to_host()[0]) == 3 * 6 * 300, stream
