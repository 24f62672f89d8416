"""The sections of report.html, one module per analysis (see reporting/registry.py)."""
