"""The functions `crawl sql --engine spark` may call: an allow-list, by Spark's names.

Spark's built-in functions (4.0), grouped as its function registry groups them, but for those
that call into the JVM by class and method name (``reflect``, ``java_method``,
``try_reflect``), read files or file names (``from_avro``, ``schema_of_avro``, ``to_avro``,
``from_protobuf``, ``to_protobuf``: a descriptor file or a schema URL; ``input_file_name``
and ``input_file_block_*``) or tell who runs the query (``current_user``, ``user``,
``session_user``). A function Spark adds later is refused until it is added here. The options
of ``from_xml`` and the other functions of OPTION_FUNCTIONS are checked apart
(`crawllib.sql.guard`): an option may name a file.
"""

from __future__ import annotations

ALLOWED_FUNCTIONS = frozenset(
    {
        # agg_funcs
        "any", "any_value", "approx_count_distinct", "approx_percentile", "array_agg", "avg",
        "bit_and", "bit_or", "bit_xor", "bitmap_construct_agg", "bitmap_or_agg", "bool_and",
        "bool_or", "collect_list", "collect_set", "corr", "count", "count_if",
        "count_min_sketch", "covar_pop", "covar_samp", "every", "first", "first_value",
        "grouping", "grouping_id", "histogram_numeric", "hll_sketch_agg", "hll_union_agg",
        "kurtosis", "last", "last_value", "listagg", "max", "max_by", "mean", "median", "min",
        "min_by", "mode", "percentile", "percentile_approx", "percentile_cont",
        "percentile_disc", "regr_avgx", "regr_avgy", "regr_count", "regr_intercept", "regr_r2",
        "regr_slope", "regr_sxx", "regr_sxy", "regr_syy", "skewness", "some", "std", "stddev",
        "stddev_pop", "stddev_samp", "string_agg", "sum", "try_avg", "try_sum", "var_pop",
        "var_samp", "variance",
        # array_funcs
        "array", "array_append", "array_compact", "array_contains", "array_distinct",
        "array_except", "array_insert", "array_intersect", "array_join", "array_max",
        "array_min", "array_position", "array_prepend", "array_remove", "array_repeat",
        "array_size", "array_union", "arrays_overlap", "arrays_zip", "flatten", "get",
        "sequence", "shuffle", "slice", "sort_array",
        # bitwise_funcs
        "&", "<<", ">>", ">>>", "^", "bit_count", "bit_get", "getbit", "shiftleft",
        "shiftright", "shiftrightunsigned", "|", "~",
        # collection_funcs
        "cardinality", "concat", "element_at", "reverse", "size", "try_element_at",
        # conditional_funcs
        "between", "coalesce", "if", "ifnull", "nanvl", "nullif", "nullifzero", "nvl", "nvl2",
        "when", "zeroifnull",
        # conversion_funcs
        "bigint", "binary", "boolean", "cast", "date", "decimal", "double", "float", "int",
        "smallint", "string", "timestamp", "tinyint",
        # csv_funcs
        "from_csv", "schema_of_csv", "to_csv",
        # datetime_funcs
        "add_months", "convert_timezone", "curdate", "current_date", "current_timestamp",
        "current_timezone", "date_add", "date_diff", "date_format", "date_from_unix_date",
        "date_part", "date_sub", "date_trunc", "dateadd", "datediff", "datepart", "day",
        "dayname", "dayofmonth", "dayofweek", "dayofyear", "extract", "from_unixtime",
        "from_utc_timestamp", "hour", "last_day", "localtimestamp", "make_date",
        "make_dt_interval", "make_interval", "make_timestamp", "make_timestamp_ltz",
        "make_timestamp_ntz", "make_ym_interval", "minute", "month", "monthname",
        "months_between", "next_day", "now", "quarter", "second", "session_window",
        "timestamp_micros", "timestamp_millis", "timestamp_seconds", "to_date", "to_timestamp",
        "to_timestamp_ltz", "to_timestamp_ntz", "to_unix_timestamp", "to_utc_timestamp",
        "trunc", "try_make_interval", "try_make_timestamp", "try_make_timestamp_ltz",
        "try_make_timestamp_ntz", "try_to_timestamp", "unix_date", "unix_micros", "unix_millis",
        "unix_seconds", "unix_timestamp", "weekday", "weekofyear", "window", "window_time",
        "year",
        # generator_funcs
        "explode", "explode_outer", "inline", "inline_outer", "posexplode", "posexplode_outer",
        "stack",
        # hash_funcs
        "crc32", "hash", "md5", "sha", "sha1", "sha2", "xxhash64",
        # json_funcs
        "from_json", "get_json_object", "json_array_length", "json_object_keys", "json_tuple",
        "schema_of_json", "to_json",
        # lambda_funcs
        "aggregate", "array_sort", "exists", "filter", "forall", "map_filter", "map_zip_with",
        "reduce", "transform", "transform_keys", "transform_values", "zip_with",
        # map_funcs
        "map", "map_concat", "map_contains_key", "map_entries", "map_from_arrays",
        "map_from_entries", "map_keys", "map_values", "str_to_map",
        # math_funcs
        "%", "*", "+", "-", "/", "abs", "acos", "acosh", "asin", "asinh", "atan", "atan2",
        "atanh", "bin", "bround", "cbrt", "ceil", "ceiling", "conv", "cos", "cosh", "cot",
        "csc", "degrees", "div", "e", "exp", "expm1", "factorial", "floor", "greatest", "hex",
        "hypot", "least", "ln", "log", "log10", "log1p", "log2", "mod", "negative", "pi",
        "pmod", "positive", "pow", "power", "radians", "rand", "randn", "random", "rint",
        "round", "sec", "sign", "signum", "sin", "sinh", "sqrt", "tan", "tanh", "try_add",
        "try_divide", "try_mod", "try_multiply", "try_subtract", "unhex", "uniform",
        "width_bucket",
        # misc_funcs
        "aes_decrypt", "aes_encrypt", "assert_true", "bitmap_bit_position",
        "bitmap_bucket_number", "bitmap_count", "current_catalog", "current_database",
        "current_schema", "hll_sketch_estimate", "hll_union", "monotonically_increasing_id",
        "raise_error", "spark_partition_id", "try_aes_decrypt", "typeof", "uuid", "version",
        # predicate_funcs
        "!", "<", "<=", "<=>", "=", "==", ">", ">=", "and", "equal_null", "ilike", "in",
        "isnan", "isnotnull", "isnull", "like", "not", "or", "regexp", "regexp_like", "rlike",
        # string_funcs
        "ascii", "base64", "bit_length", "btrim", "char", "char_length", "character_length",
        "chr", "collate", "collation", "concat_ws", "contains", "decode", "elt", "encode",
        "endswith", "find_in_set", "format_number", "format_string", "initcap", "instr",
        "is_valid_utf8", "lcase", "left", "len", "length", "levenshtein", "locate", "lower",
        "lpad", "ltrim", "luhn_check", "make_valid_utf8", "mask", "octet_length", "overlay",
        "position", "printf", "randstr", "regexp_count", "regexp_extract", "regexp_extract_all",
        "regexp_instr", "regexp_replace", "regexp_substr", "repeat", "replace", "right", "rpad",
        "rtrim", "sentences", "soundex", "space", "split", "split_part", "startswith", "substr",
        "substring", "substring_index", "to_binary", "to_char", "to_number", "to_varchar",
        "translate", "trim", "try_to_binary", "try_to_number", "try_validate_utf8", "ucase",
        "unbase64", "upper", "validate_utf8",
        # struct_funcs
        "named_struct", "struct",
        # url_funcs
        "parse_url", "try_parse_url", "try_url_decode", "url_decode", "url_encode",
        # variant_funcs
        "is_variant_null", "parse_json", "schema_of_variant", "schema_of_variant_agg",
        "to_variant_object", "try_parse_json", "try_variant_get", "variant_get",
        # window_funcs
        "cume_dist", "dense_rank", "lag", "lead", "nth_value", "ntile", "percent_rank", "rank",
        "row_number",
        # xml_funcs
        "from_xml", "schema_of_xml", "to_xml", "xpath", "xpath_boolean", "xpath_double",
        "xpath_float", "xpath_int", "xpath_long", "xpath_number", "xpath_short", "xpath_string",
    }
)  # fmt: skip

# Functions with an options argument (its position), whose options may name a file (XML's
# rowValidationXSDPath): their options must be literal and name none.
OPTION_FUNCTIONS = {
    "from_xml": 2, "schema_of_xml": 1, "to_xml": 1,
    "from_json": 2, "schema_of_json": 1, "to_json": 1,
    "from_csv": 2, "schema_of_csv": 1, "to_csv": 1,
}  # fmt: skip
