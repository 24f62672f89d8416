"""Analyses: pure functions from accumulated statistics to typed, JSON-able results.

Nothing here plots, prints or writes files. Import each analysis from its own module.
"""
