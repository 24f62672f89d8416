"""The sections of report.html, one module per analysis (see report/registry.py)."""
