"""Built-in teaching scenarios; one module per scenario."""
