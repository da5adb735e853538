"""The three stages of a generation, each a separate Spark job with Delta commits between them.

Each module exposes ``run(run: StageRun) -> <Stage>Result`` (:mod:`crawllib.stages.base`;
the result's counts are recorded in the ``generations`` table). Every stage is idempotent:
rerunning it for the same generation replaces its own output (``replaceWhere``; a stage's first
run appends, having nothing to replace), MERGEs on keys with guards, or skips what it has
committed (fetch's slices), so a crash at any point is repaired by running the stage again.
"""
