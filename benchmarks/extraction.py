"""Main-text extraction against human annotations: the crawl's extraction (``extract_record``,
what the fetch task stores in ``texts.text``) and bare trafilatura, on trafilatura's own
evaluation set.

The set (not shipped: clone https://github.com/adbar/trafilatura and pass its ``tests`` folder
as ``--data``): ``evaldata.json`` names, per page, the HTML file (``eval/`` or ``cache/``) and up
to six passages of its main text that a good extraction holds (``with``) and up to six of its
boilerplate that it must not (``without``). Scored as trafilatura's ``tests/evaluate.py``
scores it: per passage, whitespace-normalised substring matching; precision = found ``with``
/ (found ``with`` + found ``without``), recall = found ``with`` / all ``with``, F1 their
harmonic mean. Pages per second per core: process CPU time of the extraction alone.

Pages that ask not to be indexed (``noindex``: the crawl keeps no text of them, by design) are
left out for every extractor, so all are judged on the same pages. The pages are split in two
by a hash of their URL: ``tune`` (what settings may be chosen on)
and ``held-out`` (what a choice is judged on); both are printed.

    python -m benchmarks.extraction --data trafilatura/tests [--limit 200]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

import mmh3
import trafilatura

from crawllib.config import load_config
from crawllib.content.extract import decode_html, extract_page, extract_record

_SPACE = re.compile(r"\s+")


def norm(text: str) -> str:
    return _SPACE.sub(" ", text).strip()


@dataclass
class Score:
    tp: int = 0
    fp: int = 0
    fn: int = 0
    cpu: float = 0.0
    pages: int = 0
    empty: int = 0
    errors: list[str] = field(default_factory=list)

    def add(self, item: dict, text: str | None, cpu: float) -> None:
        self.pages += 1
        self.cpu += cpu
        found = norm(text) if text else ""
        self.empty += not found
        with_found = sum(1 for w in item["with"] if norm(w) in found)
        self.tp += with_found
        self.fn += len(item["with"]) - with_found
        self.fp += sum(1 for w in item["without"] if norm(w) in found)

    def figures(self) -> dict[str, float]:
        precision = self.tp / (self.tp + self.fp) if self.tp + self.fp else 0.0
        recall = self.tp / (self.tp + self.fn) if self.tp + self.fn else 0.0
        f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
        return {
            "precision": precision,
            "recall": recall,
            "f1": f1,
            "pages_per_s": self.pages / self.cpu if self.cpu else 0.0,
            "empty": self.empty,
        }


def corpus(data: str, limit: int | None) -> list[tuple[str, dict, bytes]]:
    """(url, annotation, HTML bytes) of every page whose file is present and that does not
    ask for noindex."""
    with open(os.path.join(data, "evaldata.json"), encoding="utf-8") as f:
        evaldata = json.load(f)
    out = []
    for url in sorted(evaldata):
        item = evaldata[url]
        for sub in ("eval", "cache"):
            path = os.path.join(data, sub, item["file"])
            if os.path.isfile(path):
                with open(path, "rb") as f:
                    body = f.read()
                if not noindex(body, url):
                    out.append((url, item, body))
                break
    return out[:limit] if limit else out


CFG = load_config()


def noindex(body: bytes, url: str) -> bool:
    return "noindex" in extract_page(body, url, None, CFG)["directives"]


def part_of(url: str) -> str:
    return "tune" if mmh3.hash(url, signed=False) % 2 == 0 else "held-out"


def extractors() -> dict[str, Callable[[bytes, str], str | None]]:
    """name -> (HTML bytes, URL) -> main text. trafilatura runs with the options of its own
    evaluation (tests/eval_common.py: no comments, tables, no formatting)."""
    cfg = load_config()

    def ours(body: bytes, url: str, cfg=cfg) -> str | None:
        return extract_record(body, url, None, cfg)["text"]

    def bare(
        body: bytes,
        url: str,
        fast: bool = False,
        favor_recall: bool = False,
        favor_precision: bool = False,
    ) -> str | None:
        return trafilatura.extract(
            decode_html(body, None),
            url=url,
            include_comments=False,
            include_tables=True,
            include_formatting=False,
            fast=fast,
            favor_recall=favor_recall,
            favor_precision=favor_precision,
        )

    out: dict[str, Callable[[bytes, str], str | None]] = {
        "crawllib (extract_record)": ours,
        "trafilatura (fallback, its default)": partial(bare, fast=False),
        "trafilatura fast": partial(bare, fast=True),
        "trafilatura favor_recall": partial(bare, favor_recall=True),
        "trafilatura favor_precision": partial(bare, favor_precision=True),
    }
    return out


def measure(data: str, limit: int | None) -> dict[str, dict[str, dict[str, float]]]:
    pages = corpus(data, limit)
    results: dict[str, dict[str, dict[str, float]]] = {}
    for name, extract in extractors().items():
        scores = {"tune": Score(), "held-out": Score(), "all": Score()}
        for url, item, body in pages:
            started = time.process_time()
            try:
                text = extract(body, url)
            except Exception as exc:  # noqa: BLE001 - a page that fails scores as empty
                text = None
                scores["all"].errors.append(f"{url}: {exc!r}"[:200])
            spent = time.process_time() - started
            scores[part_of(url)].add(item, text, spent)
            scores["all"].add(item, text, spent)
        results[name] = {part: s.figures() for part, s in scores.items()}
        results[name]["all"]["errors"] = len(scores["all"].errors)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", required=True, help="trafilatura's tests folder")
    parser.add_argument("--limit", type=int, default=None, help="the first N pages only")
    args = parser.parse_args()
    pages = corpus(args.data, args.limit)
    parts = {p: sum(part_of(u) == p for u, _, _ in pages) for p in ("tune", "held-out")}
    print(f"{len(pages)} pages ({parts['tune']} tune, {parts['held-out']} held out)")
    print("extractor | part | precision | recall | F1 | pages/s per core | empty")
    for name, by_part in measure(args.data, args.limit).items():
        for part, f in by_part.items():
            print(
                f"{name} | {part} | {f['precision']:.3f} | {f['recall']:.3f} | {f['f1']:.3f} | "
                f"{f['pages_per_s']:.1f} | {f['empty']:.0f}"
            )


if __name__ == "__main__":
    main()
