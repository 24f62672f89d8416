"""What each metric key means, in one sentence: the page's hover text and glossary section,
and the column descriptions of the Python API's tables.

Keys are the names in ``metrics.json`` (per-layer rows of the decomposition, the capture,
the walk and the sphere, per-head rows of attention and induction). ``describe`` falls back
to the key's stem for the ``_skip_first`` variants and says so.
"""

from __future__ import annotations

from collections.abc import Iterable

SKIP_FIRST = "_skip_first"

GLOSSARY: dict[str, str] = {
    # rows
    "layer": "Hidden-state layer: 0 is the embedding output, layer i the output of block i.",
    "block": "Transformer block (0 is the first), whose attention or heads the row describes.",
    "head": "Attention head within the block (0 is the first).",
    "n_contexts": "Number of corpus windows (contexts) the numbers are computed over.",
    "n_positions": "Number of positions per window used (one fewer when position 0 is skipped).",
    "skip_first": "Whether position 0 is left out of the numbers.",
    # variance shares (Song & Zhong)
    "share_pos": "Share of the hidden states' variance in the positional part pos[t] (the "
    "mean over contexts at each position, less the global mean).",
    "share_ctx": "Share of the variance in the context part ctx[c] (the mean over positions "
    "of each window, less the global mean).",
    "share_resid": "Share of the variance left after the positional and context parts "
    "(1 - share_pos - share_ctx).",
    "rms_norm": "Root mean square length of the hidden states at this layer.",
    "rel_norm_pos": "Spectral norm of the positional part broadcast to every window, over the "
    "spectral norm of the uncentred hidden states.",
    "rel_norm_pos_centred": "As rel_norm_pos, over the spectral norm of the centred states.",
    # positional rank and spectrum
    "pos_rank": "Rank of the positional part chosen by ScreeNOT (optimal hard threshold of "
    "its singular values).",
    "pos_rank_bound": "Upper bound on the rank given to ScreeNOT.",
    "pos_rank95": "Fewest singular directions holding 95% of the positional part's energy.",
    "pos_stable_rank": "Stable rank of the positional part: sum of squared singular values "
    "over the largest one squared (near 1 means one direction dominates).",
    "pos_explained": "Sum of the top pos_rank singular values over the sum of all of them.",
    "pos_low_freq": "Gram low-frequency share: share of the normalised positional Gram "
    "matrix's 2-D cosine transform in its lowest tenth of frequencies (1 means smooth in "
    "position; not the low-frequency energy share).",
    "pos_low_freq_energy": "Low-frequency energy share: share of the positional part's energy "
    "in the lowest tenth of frequencies over positions (cosine transform of each coordinate; "
    "not the Gram low-frequency share).",
    "pos_smoothness": "Mean change of the positional Gram matrix between neighbouring "
    "positions, over its mean magnitude (small means smooth).",
    # noise-corrected positional numbers
    "pos_noise_share": "Share of the positional part's energy that is sampling noise "
    "(estimated from independent halves of the windows).",
    "pos_contexts_needed": "Windows at which the positional noise share would fall under 10%.",
    "pos_rank_corrected": "Eigenvalues of the noise-free positional Gram matrix (cross-product "
    "of independent halves) above the noise floor.",
    "pos_eigen_floor": "The noise floor of those eigenvalues over the sum of the positive "
    "semi-definite Gram's (above 1: no direction passes it).",
    "pos_rank_margin": "The weakest eigenvalue counted in pos_rank_corrected over the noise "
    "floor (near 1: the spectrum runs on into the floor).",
    "pos_gram_negative_share": "Mass of the negative eigenvalues of the unbiased noise-free "
    "Gram matrix over the sum of its positive semi-definite projection (0: already a Gram "
    "matrix).",
    "pos_nothing_to_measure": "Why the positional statistics are empty: the positional part "
    "holds only float rounding of the layer's variance.",
    "pos_rank95_corrected": "pos_rank95 of the noise-free positional Gram matrix (projected "
    "onto the positive semi-definite cone).",
    "pos_stable_rank_corrected": "Stable rank (at least 1) of the noise-free positional Gram "
    "matrix, projected onto the positive semi-definite cone.",
    "pos_low_freq_corrected": "Gram low-frequency share (pos_low_freq) with the noise "
    "removed: of the positional part projected onto the noise-free directions.",
    "pos_low_freq_energy_corrected": "Low-frequency energy share (pos_low_freq_energy) with "
    "the noise removed: read from the noise-free positional Gram matrix.",
    "pos_smoothness_corrected": "pos_smoothness of the positional part projected onto the "
    "noise-free directions.",
    "pos_rank95_noise": "pos_rank95 of a noise-only positional estimate (what noise alone reads).",
    "pos_stable_rank_noise": "pos_stable_rank of a noise-only positional estimate.",
    "pos_low_freq_noise": "Gram low-frequency share of a noise-only positional estimate.",
    "pos_low_freq_energy_noise": "Low-frequency energy share of a noise-only positional "
    "estimate (about 0.1 for white noise).",
    # incoherence
    "incoherence_k": "Dimension of the positional and context subspaces compared (pos_rank95, "
    "capped by both ranks).",
    "incoherence_max": "Largest cosine of the principal angles between the top positional and "
    "context directions (0 is orthogonal).",
    "incoherence_mean": "Mean cosine of those principal angles.",
    "incoherence_random": "Mean principal-angle cosine of two random subspaces of the same "
    "dimension (the chance level for incoherence_mean).",
    "incoherence_mean_corrected": "incoherence_mean of the noise-free positional directions.",
    "incoherence_mean_noise": "incoherence_mean of a noise-only positional estimate (the "
    "split-half baseline).",
    "coherence_max": "Mutual coherence: the largest |cos| between any positional vector and "
    "any context vector.",
    "coherence_mean": "Mean |cos| between positional and context vectors.",
    "coherence_random_max": "Mutual coherence of as many random Gaussian vectors (chance "
    "level for coherence_max).",
    "coherence_random_mean": "Mean |cos| of those random vectors.",
    "coherence_max_corrected": "coherence_max of the noise-free positional part; over "
    "coherence_random_max it is the incoherence ratio the incoherence claim reads.",
    "coherence_mean_corrected": "coherence_mean of the noise-free positional part.",
    "coherence_max_noise": "coherence_max of a noise-only positional estimate (the split-half "
    "baseline).",
    # topics
    "n_labels": "Number of distinct document topics among the windows.",
    "ctx_cos_within": "Mean |cos| between context vectors of windows with the same topic.",
    "ctx_cos_between": "Mean |cos| between context vectors of windows with different topics.",
    "ctx_cluster_ari": "Adjusted Rand index of k-means clusters of the context vectors "
    "against the topics (0 is chance, 1 is perfect).",
    # attention logits and W_QK
    "logit_var": "Variance of the attention logits of the head.",
    "max_rel_error": "Largest relative error of the parts' sum against the real logits.",
    "residual": "Relative error of a low-rank plus diagonal fit of W_QK in the top "
    "positional directions.",
    "baseline_residual": "The same fit's error in random directions (the chance level).",
    "share_in_basis": "Share of W_QK's energy inside the top positional directions.",
    "whole_residual": "Relative error of a low-rank fit of the whole W_QK.",
    "whole_baseline_residual": "The same fit's error for a random matrix of the same shape.",
    "whole_baseline_low_rank_in_basis": "The same share for the random matrix (the chance "
    "level for whole_low_rank_in_basis).",
    "whole_low_rank_in_basis": "Share of that low-rank fit inside the top positional directions.",
    # induction
    "score": "Induction score: mean attention from a repeated token to the token after its "
    "earlier copy (0 to 1).",
    "same_token": "Attention to earlier copies of the query's own token.",
    "neighbours_local": "Attention to the query and the two tokens before it.",
    "neighbours_earlier": "Attention near the earlier copy, other than the induction target.",
    "neighbours": "Attention to either neighbourhood.",
    "induction": "Attention to the token after the earlier copy (the induction target).",
    "other": "Attention to every other key.",
    # sphere
    "hidden_layer": "Hidden-state layer whose vectors enter the norm.",
    "n_vectors": "Number of vectors the norm's numbers are computed over.",
    "input_norm_mean": "Mean length of the vectors entering the norm.",
    "input_norm_std": "Standard deviation of those lengths.",
    "ones_share_mean": "Mean share of a vector's squared length along the all-ones direction "
    "(what LayerNorm's centring removes).",
    "output_radius_mean": "Mean length of the norm's output before its gain (sqrt(d) when the "
    "norm projects onto a sphere).",
    "sqrt_d": "Square root of the hidden size: the sphere's radius.",
    "self_fraction": "Share of probed nouns whose top key among the nouns is the noun itself.",
    "mean_self_rank": "Mean rank of the query noun itself among its keys over the nouns.",
    "max_rel_err": "Largest relative error of the identity checked.",
    # walk
    "mean_cos": "Mean cosine similarity between the hidden states of different positions.",
    "mean_cos_adjacent": "Mean cosine similarity between neighbouring positions.",
    "section_contrast": "Mean cosine within the text's sections less the mean across them.",
    "mean_norm": "Mean length of the hidden states.",
    "frac_own_in_top_cos": "Share of positions whose own token is among the top-k nearest "
    "token embeddings (cosine).",
    "frac_own_in_top_dot": "The same by dot product.",
    "frac_next_in_top_cos": "Share of positions whose next token is among the top-k nearest "
    "token embeddings (cosine).",
    "frac_next_in_top_dot": "The same by dot product.",
    "median_own_rank_cos": "Median rank of a position's own token among the nearest token "
    "embeddings (cosine).",
    "median_own_rank_dot": "The same by dot product.",
    "median_next_rank_cos": "Median rank of a position's next token (cosine).",
    "median_next_rank_dot": "The same by dot product.",
    "head_norm": "Norm of each head's output in the per-head refactoring.",
    "head_norm_rel": "Each head's output norm over the attention output's norm.",
    "rel_err": "Relative error of the per-head outputs' sum against the attention output.",
    # concepts
    "acc": "Accuracy on the task (summed log-likelihood choice).",
    "acc_norm": "Accuracy with the log-likelihood normalised by the choice's length.",
    "acc_bytes": "Accuracy with the log-likelihood per byte of the choice.",
    "normalised": "The scheme's accuracy over the baseline's accuracy (1 is as good).",
    "normalised_vs_acc": "The scheme's accuracy over the baseline's acc.",
    "normalised_vs_acc_norm": "The scheme's accuracy over the baseline's acc_norm.",
    "chance": "Accuracy of a uniform random choice.",
}
"""Metric key -> one sentence saying what the number is (the keys several analyses share;
an analysis declares its own in its entry's ``glossary``, which the registry adds with
``extend``)."""


def extend(entries: dict[str, str]) -> None:
    """Add an analysis's own metric keys; a key already described must keep its sentence."""
    for key, text in entries.items():
        if GLOSSARY.setdefault(key, text) != text:
            raise ValueError(f"metric key {key!r} is described twice, differently")


def describe(key: str) -> str | None:
    """The sentence for a metric key (its ``_skip_first`` variant included), or None.

    >>> describe("skip_first")
    'Whether position 0 is left out of the numbers.'
    >>> describe("no_such_key") is None
    True
    """
    if key in GLOSSARY:
        return GLOSSARY[key]
    if key.endswith(SKIP_FIRST) and key.removesuffix(SKIP_FIRST) in GLOSSARY:
        return GLOSSARY[key.removesuffix(SKIP_FIRST)].rstrip(".") + ", position 0 left out."
    return None


def descriptions(keys: Iterable[str]) -> dict[str, str]:
    """The known keys among ``keys`` -> their sentences (unknown keys left out)."""
    found = {key: describe(key) for key in keys}
    return {key: text for key, text in found.items() if text}
