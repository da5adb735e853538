"""Fetch-stage rules, as SQL: a fetchlist slice -> the engine's input -> the engine's results ->
table rows.

The network work happens in the fetch tasks (crawllib.engine.partition.FetchTask, run by
crawllib.store.db.Db.map_partitions): every task takes the input rows of its slots and yields
RESULT_SCHEMA rows. Everything here is SQL over relations.
"""

from __future__ import annotations

from crawllib.config import Config
from crawllib.core.vocab import Outcome, Record
from crawllib.engine.partition import (
    ENGINE_HOSTS,
    ENGINE_INPUT,
    ENGINE_ROBOTS,
    FOLLOW,
    PAGE_KEYS,
    ROBOTS_RENAMED,
)
from crawllib.store.schemas import (
    EXTRACTED,
    FETCHES,
    FETCHLIST,
    HOSTS,
    PAGES,
    ROBOTS,
    SITEMAPS,
    S,
    Struct,
    T,
    select_list,
)
from crawllib.transforms.sqltext import lit


def _epoch(column: str) -> str:
    return f"unix_micros({column}) / 1000000"


def engine_robots(robots: str = "{robots}") -> str:
    """Every robots row in the engine's format; an expired one without its body. In: the
    robots table. Out: ENGINE_ROBOTS columns (timestamps as epoch seconds). The engine uses
    only rows not yet expired (crawllib.engine.robots_fetch.fresh_rows); an expired row still
    travels, small, so that the fetch can tell a host whose stored row its new robots.txt
    replaces (outcome "refreshed") from a host with none (outcome "new")."""
    given = {f.name: _epoch(f.name) for f in ROBOTS.fields if f.type == T}
    given["body"] = "CASE WHEN expires_at > current_timestamp() THEN body END"
    return f"SELECT {select_list(ENGINE_ROBOTS, **given)} FROM {robots}"


def engine_hosts(hosts: str = "{hosts}") -> str:
    """Hosts rows in the engine's format (ENGINE_HOSTS: timestamps as epoch seconds)."""
    given = {n: _epoch(n) for n in ENGINE_HOSTS.names if HOSTS[n].type == T}
    return f"SELECT {select_list(ENGINE_HOSTS, **given)} FROM {hosts}"


def _struct(schema: Struct, alias: str = "") -> str:
    prefix = f"{alias}." if alias else ""
    return "named_struct(" + ", ".join(f"'{n}', {prefix}`{n}`" for n in schema.names) + ")"


def _input_row(kept: dict[str, str], struct: str | None = None, value: str = "NULL") -> str:
    """A select list of INPUT_COLUMNS (and slot): the ``kept`` expressions, one struct column
    set to ``value``, every other column a typed null."""
    out = []
    for c in ENGINE_INPUT:
        out.append(
            f"{kept[c]} AS `{c}`"
            if c in kept
            else f"CAST(NULL AS {FETCHLIST[c].type.ddl}) AS `{c}`"
        )
    for c, schema in (
        ("robots", ENGINE_ROBOTS),
        ("follow", FOLLOW),
        ("host_state", ENGINE_HOSTS),
        ("known_slot", S),
    ):
        out.append(f"{value} AS `{c}`" if c == struct else f"CAST(NULL AS {schema.ddl}) AS `{c}`")
    return ", ".join(out)


def fetch_inputs(
    follow: bool = False,
    hosts: bool = False,
    slice_rows: str = "{slice_rows}",
    robots: str = "{robots}",
    follow_rel: str = "{follow}",
    hosts_rel: str = "{hosts}",
) -> str:
    """The engine's input for one slice: its URLs, plus the cached robots.txt of their hosts,
    what their slots need to follow links and their slots' stored politeness.

    In: fetchlist rows (ENGINE_INPUT: slot, url, url_key, host, depth, ...); robots rows as
    :func:`engine_robots` gives them; with ``follow``, rows as :func:`follow_inputs` gives
    them (slot, room, known, trapped); with ``hosts``, rows as :func:`engine_hosts` gives
    them. Out: INPUT_COLUMNS: one row per URL, one per host of the slice that has a robots
    row (only slot and host set), one per slot of the slice with room to follow links and one
    per slot or host of the slice with a hosts row (only slot set: the slot whose task takes
    it; the struct's slot is the row's own, a host's name under politeness.key = ip). A robots
    row travels once per host rather than once per URL (it can be 500 KiB), known keys and
    politeness once per slot and host."""
    urls = f"SELECT {_input_row({c: f'`{c}`' for c in ENGINE_INPUT})} FROM {slice_rows}"
    of_slice = f"(SELECT DISTINCT host, slot FROM {slice_rows})"
    cached = (
        f"SELECT {_input_row({'slot': 's.slot', 'host': 's.host'}, 'robots', _struct(ENGINE_ROBOTS, 'r'))} "
        f"FROM {robots} r JOIN {of_slice} s ON r.host = s.host"
    )
    parts = [urls, cached]
    slots = f"(SELECT DISTINCT slot FROM {slice_rows})"
    if follow:
        parts.append(
            f"SELECT {_input_row({'slot': 'f.slot'}, 'follow', _struct(FOLLOW, 'f'))} FROM "
            f"{follow_rel} f JOIN {slots} s ON f.slot = s.slot"
        )
    if hosts:
        # a slot's row, and with politeness.key = ip each of its hosts' rows (key: the row's)
        keys = (
            f"(SELECT DISTINCT _key, slot FROM (SELECT slot AS _key, slot FROM {slice_rows} "
            f"UNION ALL SELECT host AS _key, slot FROM {slice_rows}))"
        )
        state = (
            "named_struct("
            + ", ".join(
                f"'{n}', k._key" if n == "slot" else f"'{n}', h.`{n}`" for n in ENGINE_HOSTS.names
            )
            + ")"
        )
        parts.append(
            f"SELECT {_input_row({'slot': 'k.slot'}, 'host_state', state)} FROM {hosts_rel} h "
            f"JOIN {keys} k ON h.slot = k._key"
        )
    return " UNION ALL ".join(parts)


def _with_slot(cfg: Config, df: str, fetchlist: str) -> str:
    """Rows (url_key, host, [domain], ...) -> (url_key, slot): the politeness slot from the
    host. With politeness.key = ip, the slot the generation's fetchlist gives the host (rows of
    hosts it does not hold are dropped: the engine follows links to its slot's hosts only)."""
    key = cfg.politeness.key
    if key == "ip":
        return (
            f"SELECT d.url_key, s.slot FROM {df} d JOIN (SELECT DISTINCT host, slot FROM "
            f"{fetchlist}) s ON d.host = s.host"
        )
    slot = "host" if key != "domain" else "coalesce(domain, crawl_domain(host))"
    return f"SELECT url_key, {slot} AS slot FROM {df}"


def with_known_keys(
    cfg: Config,
    fetchlist: str = "{fetchlist}",
    crawldb: str = "{crawldb}",
    new_keys: str = "{new_keys}",
) -> str:
    """The fetchlist with the url_keys known for each slot that has room to follow links, so
    that the fetch reads them with the fetchlist instead of reading crawldb (whose size is the
    crawl's, not the generation's).

    In: the generation's fetchlist rows (FETCHLIST columns but known), crawldb as plan read it
    (url_key, host, domain) and the new URLs plan writes into crawldb (url_key, host, domain).
    A slot has room when it planned fewer than generate.max_per_host URLs; its known keys are
    crawldb's keys of its slot (with politeness.key = ip: of the slot's hosts in the
    fetchlist) and the new ones, that is crawldb's keys of the slot once plan's writes commit.
    Out: FETCHLIST columns; ``known`` is set on one row of each slot with room (an array,
    maybe empty) and null on every other row."""
    rooms = (
        f"SELECT slot FROM {fetchlist} GROUP BY slot HAVING count(*) < {cfg.generate.max_per_host}"
    )
    # Only the keys of slots with room are grouped: a broadcast semi-join on the slot (a
    # generation's slots) narrows crawldb's scan before any shuffle.
    keyed = (
        f"SELECT url_key, slot FROM ({_with_slot(cfg, f'(SELECT url_key, host, domain FROM {crawldb})', fetchlist)}) "
        f"UNION ALL SELECT url_key, slot FROM ({_with_slot(cfg, f'(SELECT url_key, host, domain FROM {new_keys})', fetchlist)})"
    )
    keys = f"SELECT /*+ BROADCAST(r) */ k.url_key, k.slot FROM ({keyed}) k LEFT SEMI JOIN ({rooms}) r ON k.slot = r.slot"
    known = (
        "SELECT r.slot, coalesce(array_sort(collect_set(k.url_key)), CAST(array() AS array<bigint>)) AS _known FROM "
        f"({rooms}) r LEFT JOIN ({keys}) k ON r.slot = k.slot GROUP BY r.slot"
    )
    ranked = (
        "SELECT *, row_number() OVER (PARTITION BY slot ORDER BY slice, url_key) AS _row "
        f"FROM {fetchlist}"
    )
    given = {n: f"f.`{n}`" for n in FETCHLIST.names}
    given["known"] = "CASE WHEN f._row = 1 THEN k._known END"
    return (
        f"SELECT {select_list(FETCHLIST, **given)} FROM ({ranked}) f LEFT JOIN ({known}) k "
        "ON f.slot = k.slot"
    )


def follow_inputs(
    cfg: Config,
    carried: bool,
    trapped: bool = False,
    fetchlist: str = "{fetchlist}",
    fetches: str = "{fetches}",
    crawldb: str = "{crawldb}",
    trapped_rel: str = "{trapped}",
) -> str:
    """Per slot of a generation, its room to follow links, the url_keys known for it and its
    hosts' URL patterns judged traps.

    In: the generation's fetchlist (slot, known), its fetches so far (url_key, host,
    source_url), and unless ``carried`` (plan wrote the known keys into the fetchlist:
    :func:`with_known_keys`) crawldb (url_key, host, domain); with ``trapped`` the trapped
    patterns (host, pattern: crawllib.transforms.traps.trapped_patterns). room =
    generate.max_per_host - planned - followed so far; known: the slot's url_keys in crawldb
    (or the fetchlist's) and in the generation's fetches, for slots with room only (a slot plan
    already filled gets none; with known keys from the fetchlist, neither does a slot plan gave
    none); trapped: "host pattern" strings. Out: slot, room, known (array of url_key), trapped
    (array of string)."""
    # no domain of the fetches rows is read (an older crawllib's are null): with
    # politeness.key = domain their slot is their host's registered domain
    fetched_rows = (
        f"SELECT url_key, host, CAST(NULL AS string) AS domain, source_url FROM {fetches}"
    )
    fetched = _with_slot(cfg, f"({fetched_rows})", fetchlist)
    followed_slots = _with_slot(cfg, f"({fetched_rows} WHERE source_url IS NOT NULL)", fetchlist)
    planned = f"SELECT slot, count(*) AS planned FROM {fetchlist} GROUP BY slot"
    followed = f"SELECT slot, count(*) AS followed FROM ({followed_slots}) GROUP BY slot"
    rooms = (
        f"SELECT * FROM (SELECT p.slot, CAST({cfg.generate.max_per_host} - p.planned - "
        f"coalesce(f.followed, 0) AS int) AS room FROM ({planned}) p LEFT JOIN ({followed}) f "
        "ON p.slot = f.slot) WHERE room > 0"
    )
    if carried:
        carried_rows = f"SELECT slot, known FROM {fetchlist} WHERE known IS NOT NULL"
        rooms = f"SELECT r.* FROM ({rooms}) r LEFT SEMI JOIN ({carried_rows}) c ON r.slot = c.slot"
        keys = f"SELECT slot, explode(known) AS url_key FROM ({carried_rows})"
    else:
        keys = _with_slot(cfg, f"(SELECT url_key, host, domain FROM {crawldb})", fetchlist)
    known = (
        f"SELECT k.slot, array_sort(collect_set(k.url_key)) AS known FROM (SELECT url_key, slot FROM "
        f"({keys}) UNION ALL SELECT url_key, slot FROM ({fetched})) k JOIN ({rooms}) r "
        "ON k.slot = r.slot GROUP BY k.slot"
    )
    out = (
        f"SELECT r.slot, r.room, k.known FROM ({rooms}) r LEFT JOIN ({known}) k ON r.slot = k.slot"
    )
    if trapped:
        tagged = f"SELECT t.host, concat_ws(' ', t.host, t.pattern) AS _line FROM {trapped_rel} t"
        slotted = f"SELECT s.slot, t._line FROM ({tagged}) t JOIN ({_with_slot(cfg, f'(SELECT host AS url_key, host, crawl_domain(host) AS domain FROM {trapped_rel})', fetchlist)}) s ON t.host = s.url_key"
        patterns = (
            f"SELECT p.slot, array_sort(collect_set(p._line)) AS trapped FROM ({slotted}) p JOIN ({rooms}) r "
            "ON p.slot = r.slot GROUP BY p.slot"
        )
        out = f"SELECT o.*, p.trapped FROM ({out}) o LEFT JOIN ({patterns}) p ON o.slot = p.slot"
    else:
        out = f"SELECT *, CAST(NULL AS array<string>) AS trapped FROM ({out})"
    return (
        "SELECT slot, room, coalesce(known, CAST(array() AS array<bigint>)) AS known, "
        f"coalesce(trapped, CAST(array() AS array<string>)) AS trapped FROM ({out})"
    )


def with_task(
    cfg: Config, hosts: bool, partitions: int, inputs: str = "{inputs}", hosts_rel: str = "{hosts}"
) -> str:
    """Add ``task`` (what one task holds together) and ``part`` (its task's number, 0 ..
    ``partitions`` - 1: crawl_partition of the task key, a deterministic function of it).

    With politeness.key = ip, the task is the slot (an address already). With host or domain,
    the server address the slot's hosts row says its requests last reached, when that
    address's URLs in the slice are at most politeness.max_address_task_urls: every slot of
    one address then sits in one task, whose engine caps the address (max_hosts_per_address)
    for the whole job. Else the slot: a slot not yet asked has no known address, and a larger
    address is spread over tasks (each caps it on its own), lest one task take a whole
    shared-hosting giant. In: fetch_inputs rows (slot, url); with ``hosts``, hosts table rows
    (slot, address). Out: + task, part."""
    limit = cfg.politeness.max_address_task_urls
    if cfg.politeness.key == "ip" or not hosts or limit <= 0:
        tasked = f"SELECT *, slot AS task FROM {inputs}"
    else:
        known = f"SELECT slot AS _slot, max(address) AS _address FROM {hosts_rel} WHERE address IS NOT NULL GROUP BY slot"
        slotted = (
            f"SELECT i.*, a._address, count(i.url) OVER (PARTITION BY a._address) AS _urls "
            f"FROM {inputs} i LEFT JOIN ({known}) a ON i.slot = a._slot"
        )
        tasked = (
            "SELECT * EXCEPT (_address, _urls), CASE WHEN _address IS NOT NULL AND _urls <= "
            f"{limit} THEN concat('address ', _address) ELSE slot END AS task FROM ({slotted})"
        )
    return f"SELECT *, crawl_partition(task, {partitions}) AS part FROM ({tasked})"


def _slot_of_host(cfg: Config) -> str:
    """The politeness slot of a row's host (politeness.key host or domain) as SQL."""
    return "crawl_domain(host)" if cfg.politeness.key == "domain" else "host"


def known_slots(cfg: Config, crawldb: str = "{crawldb}") -> str:
    """The slot keys crawldb knows, once each: its hosts (politeness.key = domain: their
    registered domains). In: crawldb (host, domain). Out: slot. A distinct of one column of
    the whole table: read once per fetch run, not per slice."""
    slot = "coalesce(domain, crawl_domain(host))" if cfg.politeness.key == "domain" else "host"
    return f"SELECT DISTINCT {slot} AS slot FROM {crawldb}"


def _fetched_slots(cfg: Config, fetches: str) -> str:
    return f"SELECT {_slot_of_host(cfg)} AS slot FROM {fetches}"


def owned_known_slots(
    cfg: Config, partitions: int, known: str = "{known}", fetches: str = "{fetches}"
) -> str:
    """The fetch input's rows that tell each task which slots are not new: one per slot key
    crawldb (``known``: :func:`known_slots`) or the generation's fetches so far (host) know,
    for the task its own key gives it (crawl_partition of the key: a new slot's task). A
    slot followed in an earlier slice is known from then on, so no two slices' tasks take it.
    Every task gets its keys, one with no URL in the slice too (it ignores them): a filter
    on the tasks that have URLs would read the slice's fetch input, the stage's costliest
    query (crawldb's known url_keys per slot), a second time in every slice. Out:
    INPUT_COLUMNS with only known_slot set, and part."""
    keys = f"SELECT slot FROM {known} UNION SELECT slot FROM ({_fetched_slots(cfg, fetches)})"
    return (
        f"SELECT {_input_row({}, 'known_slot', 'slot')}, "
        f"crawl_partition(slot, {partitions}) AS part FROM ({keys}) WHERE slot IS NOT NULL"
    )


def new_slot_urls(
    cfg: Config, partitions: int, known: str = "{known}", fetches: str = "{fetches}"
) -> str:
    """The generation's fetches so far of slots crawldb does not know (``known``:
    :func:`known_slots`), that is URLs followed to new hosts, per task (crawl_partition of
    the slot: its owner). In: fetches (host). Out: part, urls."""
    return (
        f"SELECT crawl_partition(f.slot, {partitions}) AS part, count(*) AS urls FROM "
        f"({_fetched_slots(cfg, fetches)}) f LEFT ANTI JOIN {known} k ON f.slot = k.slot "
        "GROUP BY 1"
    )


def _table_columns(table: Struct, renamed: dict[str, str] | None = None, **given: str) -> str:
    """A select list of ``table``'s columns from RESULT_SCHEMA rows: the expression given for a
    column, else the result column of its name (or of ``renamed[name]``), a timestamp
    converted from epoch seconds."""
    for f in table.fields:
        source = (renamed or {}).get(f.name, f.name)
        if f.name in given:
            continue
        if f.type == T:
            given[f.name] = f"timestamp_seconds(`{source}`)"
        elif source != f.name:
            given[f.name] = f"`{source}`"
    return select_list(table, **given)


def _records(kind: str, results: str) -> str:
    return f"(SELECT * FROM {results} WHERE record = {lit(kind)})"


def pages_from_results(gen: int, slice_: int, results: str = "{results}") -> str:
    """Successful HTML fetches -> pages rows (content_hash: hex SHA-256 of the body)."""
    columns = _table_columns(PAGES, gen=lit(gen), slice=lit(slice_), content_hash="sha2(body, 256)")
    return (
        f"SELECT {columns} FROM {_records(Record.FETCH, results)} "
        f"WHERE outcome = {lit(Outcome.OK)} AND body IS NOT NULL"
    )


def extracted_from_results(gen: int, slice_: int, results: str = "{results}") -> str:
    """The pages the engine extracted -> extracted pages (PAGE_KEYS and the EXTRACTED fields),
    for texts rows (crawllib.transforms.parse.texts_of) and links rows (links_table)."""
    keys = [f"`{c}`" for c in PAGE_KEYS if c not in ("gen", "slice")]
    fields = [f"extracted.`{n}` AS `{n}`" for n in EXTRACTED.names]
    return (
        f"SELECT {lit(gen)} AS gen, {lit(slice_)} AS slice, {', '.join(keys)}, "
        f"{', '.join(fields)} FROM {_records(Record.FETCH, results)} WHERE extracted IS NOT NULL"
    )


def fetches_from_results(gen: int, slice_: int, results: str = "{results}") -> str:
    """Every fetch record (failures and deferrals included) -> fetches rows."""
    columns = _table_columns(FETCHES, gen=lit(gen), slice=lit(slice_))
    return f"SELECT {columns} FROM {_records(Record.FETCH, results)}"


def hosts_from_results(gen: int, slice_: int, results: str = "{results}") -> str:
    """Host records -> hosts rows of this slice: totals = the slice's share (the MERGE into
    the table adds them to the stored ones), first and last generation = gen."""
    columns = _table_columns(
        HOSTS,
        urls_attempted="slice_urls",
        pages="slice_pages",
        bytes="slice_bytes",
        urls_tried="slice_urls_tried",
        first_gen=lit(gen),
        last_gen=lit(gen),
        gen=lit(gen),
        slice=lit(slice_),
        updated_at="current_timestamp()",
    )
    return f"SELECT {columns} FROM {_records(Record.HOST, results)}"


# hosts MERGE: a stored row takes the slice's state; its totals add the slice's share, or
# replace it when the same slice is written again (a rerun of a slice whose commit crashed).
_SAME_SLICE = "t.gen = s.gen AND t.slice = s.slice"
HOSTS_UPDATE: dict[str, str] = {
    **{f.name: f"s.{f.name}" for f in HOSTS.fields},
    **{
        # (coalesce: a row of an older crawllib, or one plan's backfill made, lacks some)
        total: f"coalesce(t.{total}, 0)"
        f" - CASE WHEN {_SAME_SLICE} THEN coalesce(t.{share}, 0) ELSE 0 END + s.{share}"
        for total, share in (
            ("urls_attempted", "slice_urls"),
            ("pages", "slice_pages"),
            ("bytes", "slice_bytes"),
            ("urls_tried", "slice_urls_tried"),
        )
    },
    "domain": "coalesce(s.domain, t.domain)",
    "address": "coalesce(s.address, t.address)",
    "last_request_at": "coalesce(s.last_request_at, t.last_request_at)",
    "crawl_delay": "coalesce(s.crawl_delay, t.crawl_delay)",
    "robots_state": "coalesce(s.robots_state, t.robots_state)",
    "addresses": "slice(array_distinct(concat(s.addresses, t.addresses)), 1, 16)",
    "first_gen": "least(t.first_gen, s.first_gen)",
}


def sitemaps_from_results(gen: int, slice_: int, results: str = "{results}") -> str:
    """Sitemap records -> sitemaps rows of this slice."""
    columns = _table_columns(SITEMAPS, gen=lit(gen), slice=lit(slice_))
    return f"SELECT {columns} FROM {_records(Record.SITEMAP, results)}"


# The columns of a probe row, without ``record``: fetched_at a timestamp, the others of
# RESULT_SCHEMA's types.
PROBE_COLUMNS = (
    "host",
    "url",
    "fetched_at",
    "http_status",
    "error_kind",
    "redirect_to",
    "content_type",
    "text_chars",
    "content_hash",
    "simhash",
)


def probes_from_results(gen: int, slice_: int, results: str = "{results}") -> str:
    """Probe records -> one row per soft-404 probe made: gen, slice and PROBE_COLUMNS."""
    columns = ", ".join(
        f"timestamp_seconds(`{c}`) AS `{c}`" if c == "fetched_at" else f"`{c}`"
        for c in PROBE_COLUMNS
    )
    return (
        f"SELECT {lit(gen)} AS gen, {lit(slice_)} AS slice, {columns} "
        f"FROM {_records(Record.PROBE, results)}"
    )


def robots_from_results(results: str = "{results}") -> str:
    """robots.txt records -> robots rows (one per host fetched)."""
    columns = _table_columns(ROBOTS, renamed=ROBOTS_RENAMED)
    return f"SELECT {columns} FROM {_records(Record.ROBOTS, results)}"


def result_tally(results: str = "{results}") -> str:
    """A slice's results counted: rows by record, outcome and whether they carry a page body,
    an extraction, a source (followed) and were requested again after a lost attempt."""
    return (
        "SELECT record, outcome, body IS NOT NULL AS page, extracted IS NOT NULL AS extracted, "
        "source_url IS NOT NULL AS followed, coalesce(refetched, FALSE) AS refetched, "
        f"count(*) AS count FROM {results} GROUP BY 1, 2, 3, 4, 5, 6"
    )
