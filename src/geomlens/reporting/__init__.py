"""Report: figures (static PNG and interactive HTML), ``report.html`` and ``metrics.json``."""
