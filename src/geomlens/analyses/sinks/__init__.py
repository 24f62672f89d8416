"""Attention sinks (Xiao et al. 2024, arXiv 2309.17453; Gu et al. 2025, arXiv 2410.10781):
each key position's share of every head's attention, the first token's importance and the
sink rate, from the capture's first windows."""
