"""Read-only SQL over a crawl's tables: what `crawl sql` runs, and what it refuses.

A statement is checked twice before Spark runs any of it:

1. Parsed (Spark's own parser), its plan is walked, CTE bodies, subqueries, explained statements
   and the named WINDOW definitions (kept in a map of their own) included, against allow-lists:
   only query nodes (SELECT, WITH, VALUES, joins, windows, ...) and the read-only commands SHOW,
   DESCRIBE and EXPLAIN; only relations that are the crawl's tables by name, a CTE in scope (a
   CTE's own body does not see it), or ``delta.`path``` where the path is one of its tables;
   only functions on the allow-list (`crawllib.sql.functions`), by name, with literal options
   that name no file; no IDENTIFIER(), whose name would be resolved after this check; time
   travel to a constant only (Spark evaluates it while analysing). Nothing has touched a file.
2. Analysed (functions resolved, views expanded, nothing run: analysis lists only the tables'
   Delta logs), every expression of every node, subqueries included, must be an allowed
   function's or plain structure (columns, literals, aliases, windows, subqueries), and every
   relation read one of the crawl's tables.

Anything else (DML, DDL, SET, CACHE, EXECUTE IMMEDIATE, files by path, JVM calls) is refused
with one line, so a refused statement cannot change or read anything.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from crawllib.config import Config
from crawllib.core.errors import QueryRefused
from crawllib.sql.functions import ALLOWED_FUNCTIONS, OPTION_FUNCTIONS
from crawllib.sql.register import register_views
from crawllib.sql.views import ONLY_QUERIES, VIEWS, not_a_table
from crawllib.store import tables

__all__ = ["ALLOWED_FUNCTIONS", "check_query", "run_query", "failure", "time_limit"]

# Logical plan nodes (simple class names) a read-only statement may contain, as parsed.
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
# Analysed expressions that are no function a user names: references, literals, aliases,
# aggregation and window structure, subqueries, lambdas, field access, and what SQL syntax
# (LIKE ANY, IS DISTINCT FROM, casts the analyser adds) builds.
STRUCTURE = frozenset(
    {
        "Alias", "AttributeReference", "OuterReference", "Literal", "AggregateExpression",
        "SortOrder", "WindowExpression", "WindowSpecDefinition", "SpecifiedWindowFrame",
        "UnspecifiedFrame$", "UnboundedPreceding$", "UnboundedFollowing$", "CurrentRow$",
        "ScalarSubquery", "Exists", "ListQuery", "InSubquery", "LateralSubquery",
        "NamedLambdaVariable", "LambdaFunction", "GetStructField", "GetArrayItem",
        "GetMapValue", "GetArrayStructFields", "CreateNamedStruct", "Cast", "UpCast",
        "KnownNotNull", "LikeAll", "LikeAny", "NotLikeAll", "NotLikeAny", "InSet",
        "GeneratorOuter", "MultiAlias", "TimeAdd", "TimestampAddInterval", "DatetimeSub",
        "Grouping", "GroupingID", "SpecialFrameBoundary", "ResolvedStar",
    }
)  # fmt: skip
# Leaves of an analysed plan that read nothing but the statement itself, and the read-only
# commands SHOW and DESCRIBE resolve to; their operands (``Resolved*``) were checked by name
# before analysis.
LEAVES = frozenset(
    {
        "LocalRelation", "OneRowRelation", "Range", "CTERelationRef", "DescribeTableCommand",
        "DescribeColumnCommand", "DescribeDeltaHistoryCommand", "ShowTablesCommand",
        "ShowViewsCommand", "ShowColumnsCommand", "ShowFunctionsCommand",
        "DescribeFunctionCommand",
    }
)  # fmt: skip
# An option whose name says it names a file or a place to read from.
FILE_OPTION = re.compile(r"path|file|url|uri|dir|xsd|location", re.IGNORECASE)
SUBQUERY = "org.apache.spark.sql.catalyst.expressions.SubqueryExpression"
LOGICAL_PLAN = "org.apache.spark.sql.catalyst.plans.logical.LogicalPlan"
INHERIT = "org.apache.spark.sql.catalyst.expressions.InheritAnalysisRules"
BUILTIN = (["system", "builtin"], ["builtin"])


def check_query(spark: SparkSession, root: str, query: str) -> Any:
    """The parsed plan of ``query`` (a JVM object) once it passed the first check (module
    text); QueryRefused (one line: what, and what is allowed) otherwise, or the parser's
    message when Spark cannot parse it. Touches no table or file."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    try:
        plan = spark._jsparkSession.sessionState().sqlParser().parsePlan(query)
    except Exception as exc:  # py4j wraps ParseException
        raise QueryRefused(f"cannot parse the query: {failure(exc)}") from None
    _Parsed(jvm, root).plan(plan, frozenset())
    return plan


def run_query(spark: SparkSession, root: str, query: str, cfg: Config) -> DataFrame:
    """The result of a read-only ``query`` over the crawl's tables and views (lazy: it runs
    when read); QueryRefused when it is not read-only or Spark cannot resolve it."""
    plan = check_query(spark, root, query)  # before Spark touches anything
    register_views(spark, root, cfg)
    try:
        _Analysed(spark, root).statement(plan)
        return spark.sql(query)
    except QueryRefused:
        raise
    except Exception as exc:  # AnalysisException and the like, through py4j
        if not _from_spark(exc):
            raise
        raise QueryRefused(failure(exc)) from None


def failure(exc: BaseException) -> str:
    """One line saying why Spark failed: the message of the deepest JVM cause (a task's error,
    not 'Job aborted due to stage failure'), without exception class names or stack."""
    message = str(exc)
    java = getattr(exc, "java_exception", None) or getattr(exc, "_origin", None)
    try:
        while java is not None:
            if java.getMessage():
                message = str(java.getMessage())
            java = java.getCause()
    except Exception:  # a JVM object that is gone: the message so far
        pass
    lines = [line.strip() for line in message.strip().splitlines() if line.strip()]
    if not lines:
        return type(exc).__name__
    return re.sub(r"^([\w.$]+(Exception|Error): )+", "", lines[0])


def _from_spark(exc: BaseException) -> bool:
    return type(exc).__module__.startswith(("pyspark", "py4j"))


def hard_stop_after(seconds: float) -> float:
    """How long past its limit a query's cancelled jobs may take before its process ends."""
    return max(10.0, seconds / 2)


@contextmanager
def time_limit(
    spark: SparkSession, seconds: float, hard_stop: Callable[[], None] | None = None
) -> Iterator[threading.Event]:
    """Cancel the Spark jobs this thread starts in the block once ``seconds`` have passed (and
    again every moment after, so a job that starts later is cancelled too); the event yielded
    is set once that time has passed. Work on the driver that is no job (planning: a constant
    expression folded, a regular expression backtracking) cannot be cancelled: ``hard_stop``
    is called when the block still runs `hard_stop_after` seconds (a process ending itself)."""
    sc = spark.sparkContext
    tag = f"crawllib-sql-{threading.get_ident()}"
    fired, done = threading.Event(), threading.Event()

    def watch() -> None:
        if done.wait(seconds):
            return
        fired.set()
        waited = 0.0
        while not done.is_set():
            sc.cancelJobsWithTag(tag)
            done.wait(0.2)
            waited += 0.2
            if hard_stop is not None and waited >= hard_stop_after(seconds) and not done.is_set():
                hard_stop()

    sc.addJobTag(tag)
    threading.Thread(target=watch, name="crawl-sql-time-limit", daemon=True).start()
    try:
        yield fired
    finally:
        done.set()
        sc.removeJobTag(tag)


class _Parsed:
    """The first check, on the parsed plan (module text)."""

    def __init__(self, jvm: Any, root: str) -> None:
        self.subquery = jvm.java.lang.Class.forName(SUBQUERY)
        self.logical_plan = jvm.java.lang.Class.forName(LOGICAL_PLAN)
        self.names = set(tables.TABLES) | set(VIEWS)
        self.paths = {tables.table_path(root, n).rstrip("/") for n in tables.TABLES}

    def plan(self, node: Any, ctes: frozenset[str]) -> None:
        """Check ``node`` and what hangs off it; ``ctes``: the CTE names in scope."""
        name = node.getClass().getSimpleName()
        if name == "PlanWithUnresolvedIdentifier":
            raise QueryRefused("IDENTIFIER() is not allowed here: name the table directly")
        if name not in QUERY_NODES:
            raise QueryRefused(f"{ONLY_QUERIES}; refused: {node.nodeName()}")
        if name == "UnresolvedWith":
            self.with_ctes(node, ctes)
            return
        if name in RELATION_NODES:
            self.relation(list(_seq(node.multipartIdentifier())), ctes)
        elif name == "UnresolvedTableValuedFunction":
            function = ".".join(_seq(node.name())).lower()
            if function not in SAFE_TABLE_FUNCTIONS:
                raise QueryRefused(f"table function {function!r} is not allowed here")
        elif name == "RelationTimeTravel":
            if node.timestamp().isDefined() and self.has_subquery(node.timestamp().get()):
                raise QueryRefused("time travel takes a constant (TIMESTAMP AS OF '...')")
            self.plan(node.relation(), ctes)
        elif name == "ExplainCommand":
            self.plan(node.logicalPlan(), ctes)
        elif name == "DescribeQueryCommand":
            self.plan(node.plan(), ctes)
        elif name == "WithWindowDefinition":  # the named windows: a map, not expressions
            definitions = node.windowDefinitions().valuesIterator()
            while definitions.hasNext():
                self.expression(definitions.next(), ctes)
        for expression in _seq(node.expressions()):
            self.expression(expression, ctes)
        for child in _seq(node.children()):
            self.plan(child, ctes)
        # subquery plans and the like hang off a node outside its children
        for inner in _seq(node.innerChildren()):
            if self.logical_plan.isInstance(inner):
                self.plan(inner, ctes)

    def with_ctes(self, node: Any, ctes: frozenset[str]) -> None:
        """WITH a AS (...), b AS (...) q: each body sees the CTEs before it, not itself (it is
        not recursive: its own name there is the relation outside); q sees them all."""
        scope = set(ctes)
        for pair in _seq(node.cteRelations()):
            self.plan(pair._2(), frozenset(scope))
            scope.add(str(pair._1()).lower())
        self.plan(node.child(), frozenset(scope))

    def expression(self, node: Any, ctes: frozenset[str]) -> None:
        name = node.getClass().getSimpleName()
        if name == "ExpressionWithUnresolvedIdentifier":
            raise QueryRefused(
                "IDENTIFIER() is not allowed here: name functions and columns directly"
            )
        if name == "UnresolvedFunction":
            self.function([str(p).lower() for p in _seq(node.nameParts())], node)
        if self.subquery.isInstance(node):
            self.plan(node.plan(), ctes)
        for child in _seq(node.children()):
            self.expression(child, ctes)

    def function(self, parts: list[str], node: Any) -> None:
        name = parts[-1]
        if len(parts) > 1 and parts[:-1] not in BUILTIN or name not in ALLOWED_FUNCTIONS:
            raise QueryRefused(
                f"function {'.'.join(parts)}() is not allowed here: `crawl sql` calls Spark's "
                "built-in functions but those that call into the JVM, read files or name the "
                "user (crawllib.sql.functions)"
            )
        at = OPTION_FUNCTIONS.get(name)
        arguments = _seq(node.arguments())
        if at is None or len(arguments) <= at:
            return
        options = arguments[at]
        pairs = _seq(options.children())
        literal = all(p.getClass().getSimpleName() == "Literal" for p in pairs)
        if (
            options.getClass().getSimpleName() != "UnresolvedFunction"
            or not literal
            or [str(p).lower() for p in _seq(options.nameParts())] != ["map"]
        ):
            raise QueryRefused(f"options of {name}() must be map('key', 'value', ...) of literals")
        for key in pairs[::2]:
            _check_option(name, str(key.value()))

    def has_subquery(self, node: Any) -> bool:
        if self.subquery.isInstance(node):
            return True
        return any(self.has_subquery(child) for child in _seq(node.children()))

    def relation(self, parts: list[str], ctes: frozenset[str]) -> None:
        if len(parts) == 1 and (parts[0].lower() in ctes or parts[0].lower() in self.names):
            return
        if len(parts) == 2 and parts[0].lower() == "delta" and parts[1].rstrip("/") in self.paths:
            return
        raise QueryRefused(not_a_table(".".join(parts), spark=True))


def _check_option(function: str, key: str) -> None:
    if FILE_OPTION.search(key):
        raise QueryRefused(
            f"option {key!r} of {function}() is not allowed here: it names a file or a place "
            "to read from"
        )


class _Analysed:
    """The second check, on the analysed plan (module text)."""

    def __init__(self, spark: SparkSession, root: str) -> None:
        jvm = spark.sparkContext._jvm
        assert jvm is not None
        self.jvm = jvm
        self.state = spark._jsparkSession.sessionState()
        self.subquery = jvm.java.lang.Class.forName(SUBQUERY)
        self.inherit = jvm.java.lang.Class.forName(INHERIT)
        self.logical_plan = jvm.java.lang.Class.forName(LOGICAL_PLAN)
        self.spark = spark
        self.allowed = STRUCTURE | _function_classes(spark)
        self.paths = {_bare(tables.table_path(root, n)) for n in tables.TABLES}

    def statement(self, parsed: Any) -> None:
        """Analyse ``parsed`` (EXPLAIN and DESCRIBE QUERY: the statement they name) and check
        the result; analysis errors propagate."""
        name = parsed.getClass().getSimpleName()
        if name == "ExplainCommand":
            parsed = parsed.logicalPlan()
        elif name == "DescribeQueryCommand":
            parsed = parsed.plan()
        tracker = self.jvm.org.apache.spark.sql.catalyst.QueryPlanningTracker(
            self.jvm.scala.Option.empty()
        )
        self.plan(self.state.analyzer().executeAndCheck(parsed, tracker))

    def plan(self, node: Any) -> None:
        children = _seq(node.children())
        name = node.getClass().getSimpleName()
        if not children and not _seq(node.innerChildren()):
            self.leaf(node, name)
        for expression in _seq(node.expressions()):
            self.expression(expression)
        for child in children:
            self.plan(child)
        for inner in _seq(node.innerChildren()):
            if self.logical_plan.isInstance(inner):
                self.plan(inner)

    def leaf(self, node: Any, name: str) -> None:
        if name in LEAVES or name.startswith("Resolved"):
            return
        if name == "LogicalRelation":
            location = node.relation().location()
            paths = {_bare(str(p)) for p in _seq(location.rootPaths())}
            if paths and paths <= self.paths:
                return
            raise QueryRefused(not_a_table(", ".join(sorted(paths)), spark=True))
        raise QueryRefused(f"{ONLY_QUERIES}; refused: a relation read by {name}")

    def expression(self, node: Any) -> None:
        name = node.getClass().getSimpleName()
        if name not in self.allowed:
            self.allowed = STRUCTURE | _function_classes(self.spark, builders=True)
        if name not in self.allowed:
            raise QueryRefused(
                f"{node.prettyName()}() ({name}) is not allowed here: `crawl sql` calls "
                "Spark's built-in functions but those that call into the JVM, read files or "
                "name the user (crawllib.sql.functions)"
            )
        if _has_options(node):
            keys = node.options().keysIterator()
            while keys.hasNext():
                _check_option(node.prettyName(), str(keys.next()))
        if self.subquery.isInstance(node):
            self.plan(node.plan())
        # a function rewritten for analysis holds its arguments apart from its rewriting
        inner = node.parameters() if self.inherit.isInstance(node) else node.children()
        for child in _seq(inner):
            self.expression(child)


_OPTIONS_CLASSES = frozenset(
    {
        "XmlToStructs", "SchemaOfXml", "StructsToXml", "JsonToStructs", "SchemaOfJson",
        "StructsToJson", "CsvToStructs", "SchemaOfCsv", "StructsToCsv",
    }
)  # fmt: skip


def _has_options(node: Any) -> bool:
    return bool(node.getClass().getSimpleName() in _OPTIONS_CLASSES)


# id of the JVM -> (function name -> its registered class, the classes the builders make)
_CLASSES: dict[int, tuple[dict[str, str], set[str] | None]] = {}


def _function_classes(spark: SparkSession, builders: bool = False) -> frozenset[str]:
    """The expression classes (simple names) of the allowed functions, from Spark's registry
    (once per JVM). ``builders``: also the classes the functions registered by a builder
    (``explode``, ``lpad``) make, learnt by building each with a few argument lists (a few
    seconds: only when an analysed plan holds a class not registered)."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    registry = spark._jsparkSession.sessionState().functionRegistry()
    identifier = jvm.org.apache.spark.sql.catalyst.FunctionIdentifier
    if id(jvm) not in _CLASSES:
        registered = {}
        for name in ALLOWED_FUNCTIONS:
            info = registry.lookupFunction(identifier(name))
            if info.isDefined():
                registered[name] = str(info.get().getClassName()).rsplit(".", 1)[-1]
        _CLASSES[id(jvm)] = (registered, None)
    registered, built = _CLASSES[id(jvm)]
    if builders and built is None:
        literal = getattr(
            getattr(jvm.org.apache.spark.sql.catalyst.expressions, "Literal$"), "MODULE$"
        )
        to_seq = jvm.org.apache.spark.api.python.PythonUtils.toSeq
        samples: list[list[object]] = [
            [], [1], ["a"], [b"a"], [1, 1], ["a", "b"], ["a", 1], [b"a", 1, b"b"]
        ]  # fmt: skip
        arguments = [to_seq([literal.apply(v) for v in sample]) for sample in samples]
        built = set()
        for name, class_name in registered.items():
            if class_name.endswith("Builder"):
                for args in arguments:
                    try:
                        made = registry.lookupFunction(identifier(name), args)
                    except Exception:  # py4j: not arguments this builder takes
                        continue
                    built.add(str(made.getClass().getSimpleName()))
        _CLASSES[id(jvm)] = (registered, built)
    return frozenset(registered.values()) | frozenset(built or ())


def _bare(path: str) -> str:
    """A table path as Spark and crawllib both write it: no ``file:`` scheme, no trailing /."""
    return re.sub(r"^file:(//)?", "", path).rstrip("/")


def _seq(seq: Any) -> list[Any]:
    return [seq.apply(i) for i in range(seq.length())]
