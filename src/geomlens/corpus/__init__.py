"""Text corpora and their C x T token windows.

`load_corpus` reads the bundled BBC news corpus, a folder of .txt files, a JSONL file or a
``datasets`` dataset (streamed row by row) into a `Corpus`; `make_windows` cuts it into
reproducible `Windows` of token ids with topic labels.
Nothing here knows about models beyond the tokenizer.
"""

from geomlens.corpus.load import load_corpus
from geomlens.corpus.sources import Corpus, Document
from geomlens.corpus.windows import SPECIAL_TOKEN_MODES, Windows, make_windows

__all__ = [
    "SPECIAL_TOKEN_MODES",
    "Corpus",
    "Document",
    "Windows",
    "load_corpus",
    "make_windows",
]
