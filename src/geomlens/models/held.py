"""A model the user already holds in memory: the transformers model inside the libraries
that wrap one, its own name, and its tokenizer.

TransformerLens's ``TransformerBridge`` keeps the Hugging Face model as ``original_model``
(with its modules swapped for the bridge's components: ``models.bridged`` reads it as
transformers built it), nnsight's ``LanguageModel`` as ``_module`` (``_model`` before nnsight
0.5), and a PEFT ``PeftModel`` returns it from ``get_base_model()``, with its adapter layers
inside (``models.adapters``). Each is unwrapped to the transformers model, or refused in one
sentence that says what to pass instead: a PEFT model whose adapters add to the forward pass
beside the weights (unmerged LoRA), or a prompt-learning one (virtual tokens the base model
never holds).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from geomlens.errors import GeomlensError

WRAPPER_ATTRIBUTES = (
    ("original_model", "TransformerLens's TransformerBridge"),
    ("_module", "nnsight's LanguageModel"),
    ("_model", "nnsight's LanguageModel"),
)
"""Attributes under which a wrapping library keeps the transformers model it wraps."""

TAKES = (
    "a transformers PreTrainedModel (or TransformerLens's TransformerBridge, nnsight's "
    "LanguageModel, or a PEFT model with merged adapters, around one)"
)

UNMERGED = (
    "the PEFT adapters of {where} add to the forward pass beside the weights (not merged), so "
    "the numbers read from the weights would be of another model than its hidden states; "
    "merge them first: pass the model after model.merge_adapter() (unmerge_adapter() undoes "
    "it), or model.merge_and_unload()."
)

PROMPT_LEARNING = (
    "the PEFT model's adapter is prompt learning (virtual tokens its base model never holds), "
    "which geomlens does not read; pass model.get_base_model() to read the model without it."
)


def is_transformers_model(obj: Any) -> bool:
    from transformers import PreTrainedModel

    return isinstance(obj, PreTrainedModel)


def is_held_model(obj: Any) -> bool:
    """Whether ``obj`` is a model object rather than a name or a path: a torch module or
    an object wrapping one (checked without importing torch when it is not loaded)."""
    import sys

    torch = sys.modules.get("torch")
    if torch is not None and isinstance(obj, torch.nn.Module):
        return True
    return any(hasattr(obj, a) for a, _ in WRAPPER_ATTRIBUTES) or hasattr(obj, "get_base_model")


def unwrap(obj: Any) -> tuple[Any, Any, str]:
    """The transformers model inside ``obj``, the tokenizer a wrapper carries (or None),
    and what wrapped it ("" when nothing did).

    Raises:
        GeomlensError: ``obj`` is none of the models geomlens reads, or a PEFT model whose
            adapters are not merged into its weights.
    """
    from geomlens.models.adapters import live_adapter_layers, prompt_learning
    from geomlens.models.bridged import without_bridge

    current, tokenizer = obj, None
    wrappers: list[str] = []
    for _ in range(4):  # a bridge around a PEFT model around a transformers model, at most
        if is_transformers_model(current):
            current = without_bridge(current)
            live = live_adapter_layers(current)
            if live:
                where = f"{len(live)} layers ({live[0][:60]}, ...)" if len(live) > 1 else live[0]
                raise GeomlensError(UNMERGED.format(where=where[:90]))
            return current, tokenizer, " in ".join(reversed(wrappers))
        tokenizer = tokenizer if tokenizer is not None else getattr(current, "tokenizer", None)
        if hasattr(current, "get_base_model") and hasattr(current, "peft_config"):
            if prompt_learning(current):
                raise GeomlensError(PROMPT_LEARNING)
            wrappers.append("a PEFT model")
            current = current.get_base_model()
            continue
        for attribute, library in WRAPPER_ATTRIBUTES:
            inner = getattr(current, attribute, None)
            if inner is not None:
                wrappers.append(library)
                current = inner
                break
        else:
            break
    kind = type(obj).__name__[:60]
    raise GeomlensError(f"geomlens reads {TAKES}, not a {kind}; pass its transformers model.")


def own_name(model: Any) -> str:
    """The model's own name: the id or folder it was loaded from (``name_or_path``), else
    its model type; at most 80 characters."""
    name = str(getattr(model, "name_or_path", "") or "")
    if not name:
        name = str(getattr(model.config, "model_type", None) or type(model).__name__)
    return name if len(name) <= 80 else "..." + name[-77:]


def find_tokenizer(model: Any, given: Any) -> Any:
    """``given``, else the tokenizer found locally under the model's ``name_or_path`` (a
    folder, or an id in the local Hugging Face cache; nothing is downloaded).

    Raises:
        GeomlensError: none given and none found.
    """
    if given is not None:
        return given
    name = str(getattr(model, "name_or_path", "") or "")
    if name:
        from transformers import AutoTokenizer

        try:
            return AutoTokenizer.from_pretrained(name, local_files_only=True)
        except Exception:  # any failure means: not found here
            pass
    where = f"its name_or_path {name[:80]!r}" if name else "it has no name_or_path"
    raise GeomlensError(
        f"no tokenizer was given with the model in memory and none is found locally ({where}); "
        "pass tokenizer= the tokenizer you use with it."
    )


def check_materialised(model: Any) -> None:
    """Refuse a model whose weights are not loaded (on PyTorch's meta device: nnsight's
    ``LanguageModel`` before it dispatches)."""
    meta = next((n for n, p in model.named_parameters() if p.device.type == "meta"), None)
    if meta is not None:
        raise GeomlensError(
            f"the weights of the model in memory are not loaded ({meta[:80]} is on the meta "
            "device); load them first (nnsight: LanguageModel(..., dispatch=True))."
        )


class _HeldCheck(type):
    def __instancecheck__(cls, obj: Any) -> bool:
        return is_held_model(obj)


if TYPE_CHECKING:
    HeldModel = Any
    """Any model object (for type checkers)."""
else:

    class HeldModel(metaclass=_HeldCheck):
        """Any model object ``is_held_model`` accepts, as a type hint the API's argument
        checks read (``isinstance(model, HeldModel)``); ``load_model`` says what it reads."""
