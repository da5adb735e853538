"""CPU per page of texts.quality (crawllib.content.quality), against the extraction it is part of.

Pages: the built-in test web's article pages (crawllib.testweb.content.article_html), whose main
text is about 5 KB. Per page, in one process: ``extract_record`` as the fetch task runs it
(quality included), and ``quality_signals`` of its text alone; process CPU time, the median of
``repeat`` rounds over ``pages`` pages. ``warm``: the word splitter's per-word cache already
holds the pages' words (a fetch task after its first pages); ``cold``: emptied before each page.

    python -m benchmarks.quality [--pages 200] [--repeat 5]
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

from crawllib.config import load_config
from crawllib.content import words
from crawllib.content.extract import extract_record
from crawllib.content.quality import quality_signals
from crawllib.testweb.content import article_html


def measure(pages: int, repeat: int) -> dict[str, float]:
    """Median CPU microseconds per page: extraction (quality included), quality warm, quality
    cold; and the pages' mean text length."""
    cfg = load_config()
    rng = random.Random(1)
    bodies = [
        article_html(rng, f"site{i}.test", f"Story {i}", [("/a.html", "A")]).encode()
        for i in range(pages)
    ]
    texts = [
        extract_record(b, "http://site.test/p.html", "utf-8", cfg)["text"] or "" for b in bodies
    ]

    def per_page(work: object, items: list, clear: bool = False) -> float:
        rounds = []
        for _ in range(repeat):
            spent = 0.0
            for item in items:
                if clear:
                    words._split_chunk.cache_clear()
                started = time.process_time()
                work(item)  # type: ignore[operator]
                spent += time.process_time() - started
            rounds.append(spent / len(items) * 1e6)
        return statistics.median(rounds)

    def extract(body: bytes) -> None:
        extract_record(body, "http://site.test/p.html", "utf-8", cfg)

    return {
        "text_chars": statistics.mean(len(t) for t in texts),
        "extract_us": per_page(extract, bodies),
        "quality_warm_us": per_page(quality_signals, texts),
        "quality_cold_us": per_page(quality_signals, texts, clear=True),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pages", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    figures = measure(args.pages, args.repeat)
    for key, value in figures.items():
        print(f"{key}: {value:.0f}")
    share = figures["quality_warm_us"] / (figures["extract_us"] - figures["quality_warm_us"])
    print(f"quality / extraction without it: {share:.2f}")


if __name__ == "__main__":
    main()
