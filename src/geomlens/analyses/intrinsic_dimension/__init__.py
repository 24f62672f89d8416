"""Intrinsic dimension of the windows' representations per layer (TwoNN, Facco et al. 2017;
GRIDE, Denti et al. 2022), read against the high-dimension phase of Valeriani et al. 2023
and Cheng et al. 2025 (arXiv 2405.15471)."""
