"""What Store and RowCache share: a library object that sessions use, open until close(), which refuses while a
session uses it or another thread is in a call on it; without close(), freed with the last reference."""
import contextlib
import threading
import weakref
from typing import Any, Callable, Iterator, NoReturn


class NoCopy:
    """A library object that cannot be copied or pickled: a copy would share the C handle, which the first of the
    two to close or be collected frees under the other (a use after free); a pickle cannot carry an open mapping,
    reads in flight or a thread's state. _HOW says what to do instead."""

    _HOW = "open the store by path in each process (engram.Store(path)) and make its sessions there"

    def _refuse(self, what: str) -> NoReturn:
        raise TypeError(f"cannot {what} an engram.{type(self).__name__}: it owns a libengram handle that a copy "
                        f"would share; {self._HOW}")

    def __copy__(self) -> NoReturn:
        self._refuse("copy")

    def __deepcopy__(self, memo: Any) -> NoReturn:
        self._refuse("deepcopy")

    def __reduce_ex__(self, protocol: Any) -> NoReturn:
        self._refuse("pickle")

    def __reduce__(self) -> NoReturn:
        self._refuse("pickle")

    def __getstate__(self) -> NoReturn:
        self._refuse("pickle")


class Handle(NoCopy):
    def _open(self, ptr: int, free: Callable[[int], None], what: str) -> None:
        """Own ptr, released by free(ptr); what names the object in messages ("store 'x.engram'")."""
        self._ptr = ptr
        self._what = what
        self._lock = threading.Lock()
        self._users = 0
        self._sessions = weakref.WeakSet()
        self._finalizer = weakref.finalize(self, free, ptr)
        self._finalizer.atexit = False  # at exit, threads may still be in calls: leave it to the process's end

    # True: one thread at a time (a simulation's state is not shared), a second one gets RuntimeError
    _EXCLUSIVE = False

    @contextlib.contextmanager
    def _use(self) -> Iterator[int]:
        """The pointer, kept open for the duration of a call."""
        with self._lock:
            if not self._ptr:
                raise ValueError(f"{self._what} is closed")
            if self._EXCLUSIVE and self._users:
                raise RuntimeError(f"engram.{type(self).__name__} used by two threads at once: {self._what} belongs "
                                   f"to one thread at a time")
            self._users += 1
        try:
            yield self._ptr
        finally:
            with self._lock:
                self._users -= 1

    def _adopt(self, session: Any) -> None:
        """Count a session created while in _use() among the users that keep close() from closing."""
        self._sessions.add(session)

    @property
    def closed(self) -> bool:
        return not self._ptr

    def close(self) -> None:
        """Release it now. RuntimeError while one of its sessions is open or another thread is in a call on it."""
        with self._lock:
            if not self._ptr:
                return
            if self._users or any(not s.closed for s in self._sessions):
                raise RuntimeError(f"{self._what} is in use: close its sessions first")
            self._ptr = None
        self._finalizer()

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
