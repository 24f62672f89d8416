"""The reach table: every text model type of the installed transformers and the tier it
loads in (``python -m geomlens.models.reach`` prints it as docs/models.md holds it).

A **text model type** is one that transformers' Auto tables give a causal-LM, masked-LM or
sequence-to-sequence-LM head, and whose config class holds no vision, audio or speech
sub-config (multimodal wrappers are left out; their text model, where transformers has it
as a type of its own, is listed under that type).

Each undeclared type's tier comes from a real load: a tiny random model of it
(``models.tiny``: 2 layers, hidden 32, seeded) loaded as ``loading.load_folder`` loads an
in-memory model (``tests/models/test_reach.py`` regenerates the table and compares it with
docs/models.md). Tiers:

- ``full``: a declared family (``families.FAMILIES``) reads every weight, or, for an
  undeclared type, a declared layout whose view passed the on-load check ("through the
  llama layout");
- ``hidden-state``: ``models.hidden_tier`` (embeddings, residual stream, final norm where
  found, readout), with why (the ``families.REFUSED`` reason, or the closest layout's first
  mismatch);
- ``refused``: with the reason (an encoder-decoder, whose two stacks the hidden-state tier
  does not read; hidden states that cannot be read block by block; a tiny model that
  transformers itself cannot build or run at 2 layers).
"""

from __future__ import annotations

import contextlib
import io
import re
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from geomlens.errors import GeomlensError

SUB_CONFIGS_REFUSED = ("vision", "audio", "speech", "image", "video", "encoder", "decoder")
"""Words in a config class's sub-config names that make it no text model type."""


@dataclass(frozen=True)
class Reach:
    """One row of the reach table.

    Attributes:
        model_type: the config's ``model_type``; tier: "full", "hidden-state" or "refused";
        why: the family or layout, why not a layout, or the reason for a refusal.
    """

    model_type: str
    tier: str
    why: str


def text_model_types() -> list[str]:
    """Every text model type of the installed transformers (see the module docstring)."""
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING, CONFIG_MAPPING_NAMES
    from transformers.models.auto.modeling_auto import (
        MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
        MODEL_FOR_MASKED_LM_MAPPING_NAMES,
        MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES,
    )

    heads = (
        set(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES)
        | set(MODEL_FOR_MASKED_LM_MAPPING_NAMES)
        | set(MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES)
    )
    out = []
    for model_type in sorted(CONFIG_MAPPING_NAMES):
        if model_type not in heads:
            continue
        try:
            subs = getattr(CONFIG_MAPPING[model_type], "sub_configs", {}) or {}
        except (KeyError, ImportError, AttributeError):
            continue
        if any(word in key for key in subs for word in SUB_CONFIGS_REFUSED):
            continue
        out.append(model_type)
    return out


REFUSAL_LIMIT = 160
"""The longest reason a row quotes from a load's notice or error (characters)."""

HIDDEN_NOTICE = re.compile(r"loads in the hidden-state tier: (.*?)\. Its hidden states", re.S)
LAYOUT_NOTICE = re.compile(r"it loads through the (\S+) layout")
MISMATCHES = "first mismatch of each: "


def reach_of(model_type: str) -> Reach:
    """The tier ``model_type`` loads in: its family's, or, for an undeclared type, the tier a
    tiny random model of it (``models.tiny``: 2 layers, hidden 32, seeded) loads in when
    loaded as ``loading.load_folder`` loads a model (the declared layouts that accept its
    config, each checked against Hugging Face's forward pass, then the hidden-state tier)."""
    import torch

    from geomlens.models.families import FAMILIES
    from geomlens.models.hidden_tier import forward_kwargs
    from geomlens.models.loading import auto_class, candidate_layouts, fallback_auto_class
    from geomlens.models.tiny import probe, tiny_config

    for family in FAMILIES:
        if model_type in family.model_types:
            return Reach(model_type, "full", f"the {family.name} family")
    try:
        config: Any = tiny_config(model_type)
    except Exception as exc:  # transformers' own config refuses the tiny sizes
        return unbuildable(model_type, exc)
    if getattr(config, "is_encoder_decoder", False):
        return Reach(
            model_type,
            "refused",
            "an encoder-decoder no family declares: the hidden-state tier reads one stack",
        )
    try:
        layouts = candidate_layouts(config)
    except GeomlensError as exc:  # an option a declared layout reads but cannot handle
        return Reach(model_type, "refused", short(str(exc)))
    except Exception as exc:  # a config the layouts' checks cannot read (per-layer values)
        return Reach(model_type, "refused", f"loading it raises {type(exc).__name__}")
    loader = auto_class(layouts[0].auto_class if layouts else fallback_auto_class(config))
    try:
        torch.manual_seed(0)
        model = loader.from_config(config).eval().requires_grad_(False)
        with torch.inference_mode():
            model(input_ids=probe(), **forward_kwargs(model))
    except Exception as exc:  # Hugging Face's own model does not build or run
        return unbuildable(model_type, exc)
    row = loaded(model_type, layouts, model)
    note = not_reloaded(model)
    if note and row.tier != "refused":
        return Reach(model_type, row.tier, short(f"{note}: {row.why}"))
    return row


def not_reloaded(model: Any) -> str:
    """Why a saved folder of ``model`` does not load back through transformers' Auto classes
    ("" where it does): its config class is in none of their tables (Emu3's causal LM
    keeps an ``Emu3TextConfig``, which no Auto class knows), so only a model object given
    in memory reaches geomlens."""
    from transformers.models.auto import modeling_auto as auto

    config_class = type(model.config)
    tables = (
        auto.MODEL_FOR_CAUSAL_LM_MAPPING,
        auto.MODEL_FOR_MASKED_LM_MAPPING,
        auto.MODEL_MAPPING,
    )
    if any(config_class in table for table in tables):
        return ""
    return (
        f"a saved folder does not load back (no Auto class knows {config_class.__name__}), "
        "only a model object in memory"
    )


NEEDS_MORE_THAN_IDS = {
    "perceiver": "its forward reads `inputs` through a modality preprocessor, not token ids",
    "xmod": "its blocks run a language adapter chosen per input (set_default_language), "
    "not one stack for every text",
}
"""Types refused for what holds of every checkpoint: they are not run on token ids alone."""


def unbuildable(model_type: str, exc: BaseException) -> Reach:
    """A type whose tiny model (``models.tiny``'s config for it) transformers cannot build
    or run: refused, saying so, with transformers' own words; this says nothing of its
    real checkpoints (``NEEDS_MORE_THAN_IDS``: a reason that does)."""
    if model_type in NEEDS_MORE_THAN_IDS:
        return Reach(model_type, "refused", NEEDS_MORE_THAN_IDS[model_type])
    said = " ".join(str(exc).split())
    said = said if len(said) <= 70 else said[:67] + "..."
    return Reach(
        model_type,
        "refused",
        short(f"not measured: no tiny config of it built here ({type(exc).__name__}: {said})"),
    )


def loaded(model_type: str, layouts: list[Any], model: Any) -> Reach:
    """The row of a built tiny model, loaded through ``loading.through_layouts`` with its
    notice caught (the row says what the notice says, shortened)."""
    from geomlens.models.loading import through_layouts

    notice = io.StringIO()
    try:
        with contextlib.redirect_stderr(notice), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            view = through_layouts(layouts, model, None, model_type, Path("."))
    except GeomlensError as exc:  # even its hidden states cannot be read
        text = " ".join(str(exc).split())
        reason = text.split(", and ", 1)[-1].split("; use a model")[0]
        return Reach(model_type, "refused", short(reason))
    except Exception as exc:  # the loader itself fails on it
        return Reach(model_type, "refused", f"loading it raises {type(exc).__name__}")
    said = " ".join(notice.getvalue().split())
    if view.tier == "full":
        found = LAYOUT_NOTICE.search(said)
        name = found.group(1) if found else view.family
        return Reach(model_type, "full", f"through the {name} layout")
    found = HIDDEN_NOTICE.search(said)
    why = found.group(1) if found else "no declared family or layout takes its config"
    if MISMATCHES in why:
        why = f"no declared layout reproduces its forward pass; first mismatch: {first(why)}"
    return Reach(model_type, "hidden-state", short(why))


def first(why: str) -> str:
    """The closest layout's mismatch from a hidden-state notice's list ("helium (block 0:
    ...)"; a group of layouts with one reason as its first name "and others")."""
    part = why.split(MISMATCHES, 1)[1][:-1].split("; ")[0]
    names, _, reason = part.partition(" (")
    listed = names.split(", ")
    more = " and others" if len(listed) > 1 else ""  # no count: it moves with every layout
    return f"{listed[0]}{more} ({reason}"


def short(text: str, limit: int = REFUSAL_LIMIT) -> str:
    """``text`` on one line, cut to ``limit`` characters, without table pipes."""
    text = " ".join(text.split()).replace("|", "/")
    return text if len(text) <= limit else text[: limit - 3] + "..."


def reach_table() -> list[Reach]:
    """The reach of every text model type (about 60 s on one core: a tiny load each)."""
    return [reach_of(t) for t in text_model_types()]


def markdown(rows: list[Reach]) -> str:
    """The table as docs/models.md holds it, with the counts per tier first."""
    counts: dict[str, int] = {}
    for row in rows:
        counts[row.tier] = counts.get(row.tier, 0) + 1
    head = ", ".join(f"{tier}: {n}" for tier, n in sorted(counts.items()))
    lines = [f"{len(rows)} text model types ({head}).", "", "| `model_type` | tier | why |"]
    lines.append("| --- | --- | --- |")
    lines += [f"| `{r.model_type}` | {r.tier} | {r.why} |" for r in rows]
    return "\n".join(lines) + "\n"


def main() -> int:
    from geomlens.models.loading import quiet_transformers

    quiet_transformers()
    sys.stdout.write(markdown(reach_table()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
