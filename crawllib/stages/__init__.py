"""The four stages of a generation, each a separate Spark job with Delta commits between them.

Each module exposes ``run(spark, root, cfg, gen) -> dict[str, int]`` (the counts recorded in the
``generations`` table). Every stage is idempotent: rerunning it for the same generation replaces
its own output (``replaceWhere``) or MERGEs on keys with guards, so a crash at any point is
repaired by running the stage again.
"""
