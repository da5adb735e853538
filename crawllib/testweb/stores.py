"""A writer-lease store for tests whose writes can be made to fail (a denied PUT, an expired
token, a network cut) or to land while their answer is lost."""

from __future__ import annotations

from crawllib.store.lease_store import Store, Stored


class Breakable:
    """Wraps a real store (`crawllib.store.lease_store`): ``broken`` makes every write raise,
    ``lose_answer`` makes the next write land and then raise."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.where = store.where
        self.broken = False
        self.lose_answer = False

    def create(self, data: bytes) -> str | None:
        return self.store.create(data)

    def read(self) -> Stored | None:
        return self.store.read()

    def swap(self, data: bytes, etag: str) -> str | None:
        if self.broken:
            raise OSError("the store refused the write (Breakable)")
        done = self.store.swap(data, etag)
        if self.lose_answer:
            self.lose_answer = False
            raise TimeoutError("the write landed, its answer was lost (Breakable)")
        return done
