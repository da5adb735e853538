"""crawllib: a batch web crawler on PySpark + Delta Lake."""
