"""The concept-space tests as an lm-evaluation-harness model (``pip install geomlens[lmeval]``).

``GeomlensLM`` answers lm-eval's log-likelihood requests with geomlens's scorer: the
baseline (no scheme), test 1 (a pyramidal scheme: the context's concept vectors, then
the continuation) or test 2 (a similarity scheme: the returned "log-likelihood" is the
choice's similarity to the context, so lm-eval's ``acc`` is the test's accuracy; its
``acc_norm`` divides a similarity by a length and means nothing there). Requests that
share a context are scored together, one packed forward pass per context. Few-shot
blocks are the context's parts between blank lines (lm-eval's default delimiter).
Encoder-decoders (T5) are scored as lm-eval's own seq2seq model scores them, and
``feed`` says where test 1's vectors go (see ``concepts.pyramidal``).

Use it from Python::

    import lm_eval
    from geomlens.analyses.concepts.lmeval import GeomlensLM

    lm = GeomlensLM("smollm2-135m", scheme="sanity")
    lm_eval.simple_evaluate(model=lm, tasks=["hellaswag"], limit=50)

Importing this module registers the name "geomlens" with lm-eval's model registry, so
``model="geomlens", model_args="model=smollm2-135m,scheme=..."`` works after the import.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from geomlens.analyses.concepts.baseline import (
    BATCH_TOKENS,
    Prepared,
    baseline_rows,
    check_decoder,
    check_feed,
    encode_requests,
    score_rows,
)
from geomlens.analyses.concepts.pyramidal import pyramidal_scores
from geomlens.analyses.concepts.schemes import Scheme, parse_scheme
from geomlens.analyses.concepts.similarity import similarity_scores
from geomlens.analyses.concepts.tasks import FEWSHOT_DELIMITER, Item, Prompt
from geomlens.errors import GeomlensError
from geomlens.models import load_model
from geomlens.models.view import ModelView

try:  # lm-eval is optional
    from lm_eval.api.model import LM as _LMBase
except ImportError:  # pragma: no cover - depends on the environment
    _LMBase = object


def lm_eval_available() -> bool:
    return _LMBase is not object


def score_requests(
    view: ModelView,
    pairs: Sequence[tuple[str, str]],
    scheme: Scheme | None = None,
    batch_tokens: int = BATCH_TOKENS,
    feed: str = "encoder",
) -> list[float]:
    """A score per (context, continuation): log-likelihood, or similarity for test 2.

    ``feed``: where an encoder-decoder reads test 1's vectors ("encoder" or "decoder").
    """
    groups: dict[str, list[int]] = {}
    for i, (context, _) in enumerate(pairs):
        groups.setdefault(context, []).append(i)
    prepared = []
    for n, (context, idx) in enumerate(groups.items()):
        conts = [pairs[i][1] for i in idx]
        enc = encode_requests(view, context, conts)
        blocks = tuple(enc.context_text.split(FEWSHOT_DELIMITER))
        prepared.append(Prepared(Item(n, context, tuple(conts), 0), Prompt(blocks, ()), enc))
    if scheme is None:
        per_group = score_rows(
            view, baseline_rows([p.enc for p in prepared]), batch_tokens=batch_tokens
        )
    elif scheme.test == "pyramidal":
        per_group = [
            list(s.loglik)
            for s in pyramidal_scores(view, scheme, prepared, batch_tokens=batch_tokens, feed=feed)
        ]
    else:
        per_group = [
            list(s) for s in similarity_scores(view, scheme, prepared, batch_tokens=batch_tokens)
        ]
    out = [0.0] * len(pairs)
    for idx, scores in zip(groups.values(), per_group, strict=True):
        for i, s in zip(idx, scores, strict=True):
            out[i] = float(s)
    return out


class GeomlensLM(_LMBase):  # type: ignore[misc,valid-type]
    """An lm-eval model running the baseline or one concept-space scheme.

    Args:
        model: a geomlens model name or path (or pass ``view``).
        scheme: None for the baseline, or a scheme (preset name or key=value pairs).
        view: a model already loaded.
        device, dtype: where and how the model loads.
        batch_tokens: padded tokens per forward pass.
        feed: "encoder" or "decoder", where an encoder-decoder reads test 1's vectors.
    """

    def __init__(
        self,
        model: str = "smollm2-135m",
        scheme: str | Scheme | None = None,
        view: ModelView | None = None,
        device: str = "cpu",
        dtype: str = "float32",
        batch_tokens: int | str = BATCH_TOKENS,
        feed: str = "encoder",
        trust_remote_code: bool | str = False,
        **_: Any,
    ) -> None:
        if not lm_eval_available():
            raise GeomlensError(
                "lm-evaluation-harness is not installed; install it with "
                "pip install 'geomlens[lmeval]'."
            )
        super().__init__()
        trust = trust_remote_code in (True, "True", "true", "1")  # model_args give text
        self.view = view or load_model(model, device=device, dtype=dtype, trust_remote_code=trust)
        check_decoder(self.view)
        check_feed(self.view, feed)
        self.feed = feed
        self.scheme = parse_scheme(scheme) if isinstance(scheme, str) else scheme
        self.batch_tokens = int(batch_tokens)

    def loglikelihood(self, requests: Any, disable_tqdm: bool = False) -> list[tuple[float, bool]]:
        pairs = [tuple(r.args[:2]) for r in requests]
        scores = score_requests(self.view, pairs, self.scheme, self.batch_tokens, self.feed)
        return [(s, False) for s in scores]

    def loglikelihood_rolling(self, requests: Any, disable_tqdm: bool = False) -> list[float]:
        raise NotImplementedError("geomlens scores multiple-choice (loglikelihood) tasks only")

    def generate_until(self, requests: Any, disable_tqdm: bool = False) -> list[str]:
        raise NotImplementedError("geomlens scores multiple-choice (loglikelihood) tasks only")


def _register() -> None:
    if not lm_eval_available():
        return
    try:
        from lm_eval.api.registry import register_model

        register_model("geomlens")(GeomlensLM)
    except Exception:  # pragma: no cover - registry layouts differ between versions
        pass


_register()
