"""How common each token is in English, from a maintained word-frequency list.

Molina (2023) reads the final norm's gamma/beta as shifting the top-scoring tokens toward
*common words*. How common a word is in English is a property of the language, not of the
few thousand documents a run captures (where most of a 50k vocabulary never occurs and
ties), so it comes from ``wordfreq``: the Zipf frequency of each token's text (log10 of
its occurrences per billion words; 0 for text wordfreq does not know, such as punctuation
or a piece of a word it never saw on its own).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

LANGUAGE = "en"


def english_zipf(tokens: Sequence[str]) -> npt.NDArray[np.float64]:
    """[vocab] Zipf frequency in English of each token's text, surrounding spaces removed."""
    from wordfreq import zipf_frequency

    return np.array(
        [zipf_frequency(t.strip(), LANGUAGE) if t.strip() else 0.0 for t in tokens],
        dtype=np.float64,
    )
