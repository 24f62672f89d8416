"""geomlens: the geometry of pretrained transformer language models.

Entry points: ``load_model`` (a ``ModelView`` of any supported model), ``load_corpus``
and ``make_windows`` (C x T token windows), ``open_run`` (a run folder read back).
"""

from geomlens.corpus import load_corpus, make_windows
from geomlens.errors import GeomlensError
from geomlens.models import ModelView, load_model
from geomlens.runfolder import open_run

__all__ = ["GeomlensError", "ModelView", "load_corpus", "load_model", "make_windows", "open_run"]
__version__ = "0.1.0"
