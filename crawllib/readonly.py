"""Read-only SQL over a crawl's tables: what `crawl sql` runs, and what it refuses.

A statement is parsed (never run) by Spark's own parser and its plan is walked, subqueries and
CTEs included, against allow-lists: only query nodes (SELECT, WITH, VALUES, joins, windows, ...)
and the read-only commands SHOW, DESCRIBE and EXPLAIN (whose explained statement is checked
too); only relations that are the crawl's tables by name, its CTEs, or ``delta.`path``` where
the path is one of its tables (for time travel and DESCRIBE HISTORY); no function that calls
into the JVM. Anything else (DML, DDL, SET, CACHE, EXECUTE IMMEDIATE, files by path) is refused
before Spark touches a table, so a refused statement cannot change or read anything.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame, SparkSession

from crawllib import tables
from crawllib.catalog import ONLY_QUERIES, not_a_table
from crawllib.errors import QueryRefused

# Logical plan nodes (simple class names) a read-only statement may contain.
QUERY_NODES = frozenset(
    {
        "Project", "Filter", "Aggregate", "Sort", "GlobalLimit", "LocalLimit", "Offset", "Tail",
        "Distinct", "Deduplicate", "Join", "LateralJoin", "Union", "Intersect", "Except",
        "SubqueryAlias", "UnresolvedRelation", "UnresolvedWith", "WithCTE", "CTERelationDef",
        "CTERelationRef", "Window", "WithWindowDefinition", "Generate", "Pivot", "Unpivot",
        "Sample", "RepartitionByExpression", "Repartition", "RebalancePartitions",
        "OneRowRelation", "LocalRelation", "UnresolvedInlineTable", "UnresolvedHint",
        "UnresolvedSubqueryColumnAliases", "UnresolvedHaving", "UnresolvedTableValuedFunction",
        "UnresolvedTVFAliases", "RelationTimeTravel", "Expand", "Range",
        # read-only commands and their operands
        "ShowTables", "ShowViews", "ShowColumns", "ShowFunctions", "DescribeRelation",
        "DescribeColumn", "DescribeFunction", "DescribeQueryCommand", "ExplainCommand",
        "DescribeDeltaHistory", "CurrentNamespace$", "UnresolvedNamespace",
        "UnresolvedTableOrView", "UnresolvedTable", "UnresolvedFunctionName",
    }
)  # fmt: skip
# Nodes naming a relation, and table-valued functions that read nothing but their arguments.
RELATION_NODES = frozenset({"UnresolvedRelation", "UnresolvedTableOrView", "UnresolvedTable"})
SAFE_TABLE_FUNCTIONS = frozenset(
    {
        "range", "explode", "explode_outer", "inline", "inline_outer", "posexplode",
        "posexplode_outer", "json_tuple", "stack", "variant_explode", "variant_explode_outer",
    }
)  # fmt: skip
# Functions that call arbitrary JVM methods (System.exit, file access through reflection).
REFUSED_FUNCTIONS = frozenset({"reflect", "java_method", "try_reflect"})
SUBQUERY = "org.apache.spark.sql.catalyst.expressions.SubqueryExpression"
LOGICAL_PLAN = "org.apache.spark.sql.catalyst.plans.logical.LogicalPlan"


def check_query(spark: SparkSession, root: str, query: str) -> None:
    """Raise QueryRefused (one line: what, and what is allowed) unless ``query`` only reads
    the crawl's tables; a statement Spark cannot parse is refused with the parser's message."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    try:
        plan = spark._jsparkSession.sessionState().sqlParser().parsePlan(query)
    except Exception as exc:  # py4j wraps ParseException
        raise QueryRefused(f"cannot parse the query: {first_line(exc)}") from None
    guard = _Guard(jvm, root)
    guard.plan(plan)


def run_query(spark: SparkSession, root: str, query: str) -> DataFrame:
    """The result of a read-only ``query`` over the crawl's tables and views (lazy: it runs
    when read); QueryRefused when it is not read-only or Spark cannot resolve it."""
    from pyspark.errors import AnalysisException

    check_query(spark, root, query)  # before Spark runs anything of it
    tables.register_views(spark, root)
    try:
        return spark.sql(query)
    except AnalysisException as exc:
        raise QueryRefused(str(exc).strip().splitlines()[0]) from None


def first_line(exc: BaseException) -> str:
    text = str(exc)
    for marker in ("ParseException:", "Exception:"):
        if marker in text:
            text = text.split(marker, 1)[1]
            break
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[0] if lines else type(exc).__name__


class _Guard:
    def __init__(self, jvm: Any, root: str) -> None:
        self.subquery = jvm.java.lang.Class.forName(SUBQUERY)
        self.logical_plan = jvm.java.lang.Class.forName(LOGICAL_PLAN)
        self.names = set(tables.TABLES) | set(tables.VIEWS)
        self.paths = {tables.table_path(root, n).rstrip("/") for n in tables.TABLES}
        self.ctes: set[str] = set()

    def plan(self, node: Any) -> None:
        name = node.getClass().getSimpleName()
        if name not in QUERY_NODES:
            raise QueryRefused(f"{ONLY_QUERIES}; refused: {_statement(node)}")
        if name in RELATION_NODES:
            self.relation(list(_seq(node.multipartIdentifier())))
        elif name == "UnresolvedTableValuedFunction":
            function = ".".join(_seq(node.name())).lower()
            if function not in SAFE_TABLE_FUNCTIONS:
                raise QueryRefused(f"table function {function!r} is not allowed here")
        elif name == "UnresolvedWith":
            for pair in _seq(node.cteRelations()):
                self.ctes.add(str(pair._1()).lower())
        elif name == "RelationTimeTravel":
            self.plan(node.relation())
        elif name == "ExplainCommand":
            self.plan(node.logicalPlan())
        elif name == "DescribeQueryCommand":
            self.plan(node.plan())
        for expression in _seq(node.expressions()):
            self.expression(expression)
        for child in _seq(node.children()):
            self.plan(child)
        # CTE definitions and subquery plans hang off a node outside its children.
        for inner in _seq(node.innerChildren()):
            if self.logical_plan.isInstance(inner):
                self.plan(inner)

    def expression(self, node: Any) -> None:
        if node.getClass().getSimpleName() == "UnresolvedFunction":
            function = str(_seq(node.nameParts())[-1]).lower()
            if function in REFUSED_FUNCTIONS:
                raise QueryRefused(f"function {function}() is not allowed here")
        if self.subquery.isInstance(node):
            self.plan(node.plan())
        for child in _seq(node.children()):
            self.expression(child)

    def relation(self, parts: list[str]) -> None:
        if len(parts) == 1 and (parts[0].lower() in self.names or parts[0].lower() in self.ctes):
            return
        if len(parts) == 2 and parts[0].lower() == "delta" and parts[1].rstrip("/") in self.paths:
            return
        raise QueryRefused(not_a_table(".".join(parts), spark=True))


def _statement(node: Any) -> str:
    """A short name of what a node does: 'DeleteFromTable', 'SetCommand', ..."""
    return str(node.nodeName())


def _seq(seq: Any) -> list[Any]:
    return [seq.apply(i) for i in range(seq.length())]
