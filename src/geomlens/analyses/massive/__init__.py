"""Massive activations (Sun, Chen, Kolter & Liu, COLM 2024, arXiv 2402.17762): per layer the
largest absolute hidden-state coordinates against the median, the feature dimensions and
tokens that carry them, and the layers where they appear and vanish."""
