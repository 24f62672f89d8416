"""Run folders, atomic files, JSON text and progress display: what every command writes with."""
