"""DataFrame -> DataFrame steps of each stage (pure transformations, no reads or writes)."""
