"""An engine call that goes on from where earlier attempts of the same task stopped.

A fetch task whose attempt was lost (its executor died, its worker was killed) runs again;
its journal (``crawllib.store.journal``) holds what the earlier attempts emitted up to their last
write: their records, in order, and each slot's :class:`~crawllib.core.records.HostRecord` at
their last checkpoint. :class:`Resume` is that, as the engine takes it. The caller yields the
records again itself; the engine then fetches only the rest:

- a URL with a fetch record is not requested again; every robots.txt, sitemap and soft-404
  probe with a record neither (a journaled robots.txt serves as the host's cached one);
- the links of the journaled pages are offered to the follower again, in their order, so the
  slots' queues are what they were, the new slots those links led to included (their
  followed URLs are known; those with a record are done);
- a slot starts from its checkpoint (last request, backoff, Crawl-delay, its counts so far),
  and, the attempt being a retry, as if it had just made a request;
- the sitemaps and the probe a journaled robots.txt led to are queued again, less those done.

``requested``: URLs an earlier attempt had requested without a record in the journal (the
answer was lost with it). Requesting one again is a refetch: its fetch record says so
(``refetched``), and the fetch stage counts them (``refetched_after_retry``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from crawllib.core.records import Resume
from crawllib.core.vocab import Record
from crawllib.engine.servers import Server

if TYPE_CHECKING:
    from crawllib.engine.engine import _Run
    from crawllib.engine.slots import Slot


def continue_slot(slot: Slot, checkpoint: Mapping[str, Any]) -> None:
    """Carry a slot's checkpoint over: its Crawl-delay, addresses and counts so far (the
    hosts row's totals add them up). Its politeness is restored by ``Slot.restore``."""
    slot.set_crawl_delay(checkpoint.get("crawl_delay"))
    slot.addresses.update(checkpoint.get("addresses") or ())
    slot.attempted += int(checkpoint.get("slice_urls") or 0)
    slot.pages += int(checkpoint.get("slice_pages") or 0)
    slot.bytes += int(checkpoint.get("slice_bytes") or 0)
    slot.tried += int(checkpoint.get("slice_urls_tried") or 0)


def replay(run: _Run, slots: Mapping[str, Slot], resume: Resume) -> None:
    """Bring a new engine call (``run``, its ``slots`` built from all of the task's rows) to
    the point the journal records; see the module's text."""
    host_slot = {host: slot for slot in slots.values() for host in slot.hosts}

    def slot_of(host: str) -> Slot | None:
        if host in host_slot:
            return host_slot[host]
        key = run.follower.slot_of(host) if run.follower is not None else None
        return slots.get(key) if key is not None else None

    run.sitemaps_done.update(r["url"] for r in resume.of_kind(Record.SITEMAP))
    run.probed.update(r["host"] for r in resume.of_kind(Record.PROBE))
    replayed: set[str] = set()

    def replay_robots() -> None:
        for robots in resume.of_kind(Record.ROBOTS):
            slot = slot_of(robots["host"])
            if slot is not None and robots["host"] not in replayed:
                replayed.add(robots["host"])
                run.robots_replayed(slot, robots, run.first_url.get(robots["host"]))

    replay_robots()
    fetched = resume.fetched()
    for record in resume.of_kind(Record.FETCH):
        slot = slot_of(record["host"])
        if slot is None:
            continue
        run.per_host[record["host"]] += 1
        if run.follower is None:
            continue
        known = run.follower.known.get(slot.key)
        if known is not None and record["url_key"] is not None:
            known.add(record["url_key"])
        if isinstance(slot, Server):
            rows = run.follower.links(slot.key, record, run._time_room(slot), slot.rows)
            slot.rows.extend(rows)
        else:  # new slots its links led to are made again, in the same order
            run.queue_links(slot, record)
    replay_robots()  # of the new slots, made by their pages' links
    for slot in slots.values():
        slot.rows.discard(fetched)
    for sitemap in resume.of_kind(Record.SITEMAP):
        slot = slot_of(sitemap["host"])
        if slot is not None:
            run.queue_sitemap_children(slot, sitemap)
