"""The crawl's pure rules: functions of URLs, pages and configuration that import neither
pyspark nor the tables, so the fetch engine, the Spark transforms and the tests share them."""
