"""The instances of one launch (SPMD programs / LNC cores, times collective ranks), run as
cooperatively scheduled threads.

Exactly one instance runs at a time.  An instance runs until it finishes or must wait at a
synchronization point (``core_barrier``, ``sendrecv``, a collective); the next runnable
instance in launch order then takes over.  When the instances run concurrently on hardware
(the two cores of a Logical NeuronCore share HBM), they are interleaved instruction by
instruction instead, so a core's early writes (e.g. zero-initializing its share of an output)
land before the peer's later writes to the same HBM, as they do on the device.  Execution is
deterministic either way, and a synchronization no instance can ever satisfy is reported as a
deadlock instead of hanging.
"""

import threading

from .errors import NkiValidationError


class World:
    """Instances ``0..size-1`` of one launch and the state their synchronizations share."""

    def __init__(self, size, describe, interleave=False):
        self.size = size
        self.interleave = interleave and size > 1
        self.describe = describe  # instance number -> readable name, e.g. "rank 1 core 0"
        self.cond = threading.Condition()
        self.turn = 0
        self.done = [False] * size
        self.blocked = {}  # instance -> (ready predicate, what it waits for)
        self.error = None
        self.deadlock = None
        self.board = {}  # rendezvous state of the synchronization instructions

    def run(self, body):
        """Run ``body(instance)`` for every instance; re-raise the first failure."""
        if self.size == 1:
            body(0)
            return
        threads = [
            threading.Thread(target=self._thread, args=(i, body), name=f"nki-{self.describe(i)}")
            for i in range(self.size)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if self.error is not None:
            raise self.error

    def _thread(self, instance, body):
        with self.cond:
            self.cond.wait_for(lambda: self.turn == instance or self.deadlock is not None)
        try:
            if self.error is None and self.deadlock is None:
                body(instance)
        except BaseException as e:  # noqa: BLE001 - re-raised by run()
            if self.error is None:
                self.error = e
        finally:
            with self.cond:
                self.done[instance] = True
                self._hand_over(instance)

    def _runnable(self, i):
        if self.done[i]:
            return False
        waiting = self.blocked.get(i)
        return waiting is None or waiting[0]()

    def _hand_over(self, instance):
        """Give the turn to the next runnable instance after ``instance``; flag a deadlock if
        unfinished instances remain and none can run."""
        if self.deadlock is not None:
            return
        for k in range(1, self.size + 1):
            j = (instance + k) % self.size
            if self._runnable(j):
                self.turn = j
                self.cond.notify_all()
                return
        if not all(self.done):
            stuck = ", ".join(
                f"{self.describe(i)} waits for {what}"
                for i, (_, what) in sorted(self.blocked.items())
            )
            finished = [self.describe(i) for i in range(self.size) if self.done[i]]
            self.deadlock = f"deadlock: {stuck}" + (
                f" (finished: {', '.join(finished)})" if finished else ""
            )
            self.turn = None
            self.cond.notify_all()

    def tick(self, instance):
        """After each instruction of a concurrent launch, let the next runnable instance run
        one instruction."""
        if not self.interleave:
            return
        with self.cond:
            self._hand_over(instance)
            self.cond.wait_for(lambda: self.turn == instance or self.deadlock is not None)
            if self.turn != instance:
                raise NkiValidationError(self.deadlock)

    def wait(self, instance, ready, what, op):
        """Block ``instance`` until ``ready()`` holds, letting the other instances run."""
        with self.cond:
            if ready():
                return
            self.blocked[instance] = (ready, what)
            self._hand_over(instance)
            self.cond.wait_for(lambda: self.turn == instance or self.deadlock is not None)
            del self.blocked[instance]
            if self.turn != instance:
                raise NkiValidationError(f"{op}: {self.deadlock}")
