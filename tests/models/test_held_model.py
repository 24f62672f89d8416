"""A model the user already holds: a transformers model object runs every API function like
its saved folder, and a run is identified by the weights it was made from (an edited
model never reuses the numbers of the unedited one, nor the reverse)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import transformers
from tiny_models import SMALL_VOCAB, small_tokenizer

import geomlens
from geomlens.errors import GeomlensError
from geomlens.models.identity import weights_hash
from geomlens.models.loading import QUANTISED_TOLERANCE, load_model
from geomlens.runs.runfolder import model_fingerprint

SMALL = dict(corpus="bbc", contexts=6, length=16, figures="none", progress=False)
"""A tiny capture: six BBC windows of 16 tokens, no figures."""

REPORT = {**SMALL, "text": "The cat sat on the mat.", "limit": 4}
"""A tiny report: the walk on one short sentence, four concept items."""

TEXTS = ["The cat sat on the mat.", "Markets fell on Monday as investors waited."]


def tiny_llama(seed: int = 0) -> transformers.PreTrainedModel:
    """A random 2-layer Llama (RoPE, RMSNorm, GQA), float32, built from its config."""
    torch.manual_seed(seed)
    config = transformers.LlamaConfig(
        hidden_size=32,
        intermediate_size=48,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        vocab_size=SMALL_VOCAB,
        max_position_embeddings=1024,
    )
    model = transformers.AutoModelForCausalLM.from_config(config)
    with torch.no_grad():  # norm gains off 1, so a wrong gain cannot pass unnoticed
        for p in model.parameters():
            if p.ndim == 1:
                p.add_(0.2 * torch.randn_like(p))
    return model.eval()


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny Llama saved with its tokenizer."""
    path = tmp_path_factory.mktemp("held") / "tiny-llama"
    tiny_llama().save_pretrained(path)
    small_tokenizer(False).save_pretrained(path)
    return path


def manifest(run: geomlens.Result) -> dict:
    return json.loads((run.folder / "manifest.json").read_text())


def shares(run: geomlens.Result) -> list[float]:
    return [row["share_pos"] for row in run.metrics["decomposition"]["layers"]]


def scale_down_proj(model: torch.nn.Module, factor: float) -> None:
    """An edit fine-tuning could make: one matrix scaled in place (through ``.data``, which
    PyTorch's version counters do not see)."""
    model.model.layers[0].mlp.down_proj.weight.data.mul_(factor)


def test_an_edited_view_never_reuses_the_run_of_its_folder(folder, tmp_path):
    view = load_model(folder)
    out = tmp_path / "run"
    first = geomlens.decompose(model=str(folder), view=view, out=out, **SMALL)
    assert manifest(first)["model_fingerprint"] == model_fingerprint(folder)
    assert manifest(first)["model"]["source"] == str(folder)
    # the unedited view is its folder: the same run by path is reused
    again = geomlens.decompose(model=str(folder), out=out, **SMALL)
    assert shares(again) == shares(first)

    scale_down_proj(view.model, 2.0)
    with pytest.raises(GeomlensError, match="its model changed since it finished"):
        geomlens.decompose(model=str(folder), view=view, out=out, **SMALL)

    # the reverse: the edited view's run first, then the folder's into the same place
    edited_out = tmp_path / "edited"
    edited = geomlens.decompose(model=str(folder), view=view, out=edited_out, **SMALL)
    record = manifest(edited)
    assert record["model_fingerprint"].startswith("weights-v1:")
    assert record["model"]["source"] == "model in memory"
    assert record["model"]["held"]["edited_since_loaded_from"] == str(folder)
    assert shares(edited) != shares(first)  # the edit moved the numbers
    with pytest.raises(GeomlensError, match="its model changed since it finished"):
        geomlens.decompose(model=str(folder), out=edited_out, **SMALL)

    scale_down_proj(view.model, 0.5)  # powers of two: the loaded weights exactly, again
    assert weights_hash(view.model) == view.identity.weights_at_load
    assert shares(geomlens.decompose(model=str(folder), view=view, out=out, **SMALL)) == shares(
        first
    )


def test_a_model_in_memory_runs_like_its_saved_folder(folder, tmp_path):
    model, tokenizer = tiny_llama(), small_tokenizer(False)
    held = geomlens.decompose(model=model, tokenizer=tokenizer, out=tmp_path / "held", **SMALL)
    saved = geomlens.decompose(model=str(folder), out=tmp_path / "saved", **SMALL)
    assert held.metrics["decomposition"] == saved.metrics["decomposition"]
    record = manifest(held)
    assert record["config"]["model"] == "llama"  # its own name (no name_or_path: its type)
    assert record["model"]["source"] == "model in memory"
    assert record["model"]["held"]["own_name"] == "llama"
    assert record["model_fingerprint"].startswith("weights-v1:")

    # the same model again reuses its run; edited, it is refused there; and the reverse
    again = geomlens.decompose(model=model, tokenizer=tokenizer, out=tmp_path / "held", **SMALL)
    assert again.metrics == held.metrics
    scale_down_proj(model, 2.0)
    with pytest.raises(GeomlensError, match="its model changed since it finished"):
        geomlens.decompose(model=model, tokenizer=tokenizer, out=tmp_path / "held", **SMALL)
    edited = geomlens.decompose(model=model, tokenizer=tokenizer, out=tmp_path / "ed", **SMALL)
    assert shares(edited) != shares(held)
    scale_down_proj(model, 0.5)  # a power of two: the weights are exactly the unedited ones
    with pytest.raises(GeomlensError, match="its model changed since it finished"):
        geomlens.decompose(model=model, tokenizer=tokenizer, out=tmp_path / "ed", **SMALL)


def test_report_and_activations_of_a_model_in_memory_equal_its_folders(folder, tmp_path):
    model, tokenizer = tiny_llama(), small_tokenizer(False)
    held = geomlens.report(model=model, tokenizer=tokenizer, out=tmp_path / "held", **REPORT)
    saved = geomlens.report(model=str(folder), out=tmp_path / "saved", **REPORT)
    for key in ("capture", "decomposition", "attention", "sphere"):
        assert held.metrics[key] == saved.metrics[key], key
    page = (held.folder / "report.html").read_text()
    assert "given in memory (llama)" in page and "model in memory" in page

    ours = geomlens.activations(model, TEXTS, tokenizer=tokenizer, logits=True)
    theirs = geomlens.activations(str(folder), TEXTS, logits=True)
    assert ours.logits is not None and theirs.logits is not None
    pairs = zip(ours.hidden_states + ours.logits, theirs.hidden_states + theirs.logits, strict=True)
    assert all(torch.equal(a, b) for a, b in pairs)
    with torch.inference_mode():  # and Hugging Face's own logits
        ids = tokenizer(TEXTS[0], return_tensors="pt")["input_ids"]
        torch.testing.assert_close(ours.logits[0], model(ids).logits[0], rtol=1e-5, atol=1e-5)


def test_a_report_with_figures_of_a_model_in_memory(tmp_path):
    model, tokenizer = tiny_llama(1), small_tokenizer(False)
    small = {**REPORT, "figures": "all"}
    run = geomlens.report(model=model, tokenizer=tokenizer, out=tmp_path / "r", **small)
    assert (run.folder / "report.html").is_file()
    assert any((run.folder / "figures").glob("*.png"))


def test_the_tokenizer_is_found_from_the_models_own_folder(folder, tmp_path):
    model = transformers.AutoModelForCausalLM.from_pretrained(folder)
    view = load_model(model)  # no tokenizer=: read from name_or_path, the folder
    assert view.name == str(folder) and view.identity.in_memory
    assert view.tokenizer("abc")["input_ids"] == small_tokenizer(False)("abc")["input_ids"]
    with pytest.raises(GeomlensError, match="pass tokenizer="):
        load_model(tiny_llama())  # built from a config: no name_or_path


class Bridge:
    """Stands in for TransformerLens's TransformerBridge (``original_model``, ``tokenizer``)."""

    def __init__(self, model, tokenizer):
        self.original_model, self.tokenizer = model, tokenizer


class NnsightModel:
    """Stands in for nnsight's LanguageModel (``_model``, ``tokenizer``)."""

    def __init__(self, model, tokenizer):
        self._model, self.tokenizer = model, tokenizer


class Peft:
    """Stands in for a PEFT ``PeftModel`` (``peft_config``, ``get_base_model()``)."""

    peft_config = {"default": "lora"}

    def __init__(self, model):
        self.model = model

    def get_base_model(self):
        return self.model


def test_wrapped_models_are_unwrapped_or_refused(capsys):
    model, tokenizer = tiny_llama(), small_tokenizer(False)
    plain = load_model(model, tokenizer=tokenizer)
    for wrapper, said in (
        (Bridge(model, tokenizer), "TransformerBridge"),
        (NnsightModel(model, tokenizer), "LanguageModel"),
        (Bridge(Peft(model), tokenizer), "a PEFT model in TransformerLens"),
    ):
        view = load_model(wrapper)  # the wrapper's own tokenizer
        assert view.model is model and torch.equal(view.W_U, plain.W_U)
        assert said in capsys.readouterr().err
    adapted = tiny_llama()
    adapted.model.layers[0].self_attn.q_proj.add_module("lora_A", torch.nn.Linear(32, 2))
    with pytest.raises(GeomlensError, match="merge_and_unload"):
        load_model(Peft(adapted), tokenizer=tokenizer)
    with pytest.raises(GeomlensError, match="not a Linear; pass its transformers model"):
        load_model(torch.nn.Linear(2, 2))
    with torch.device("meta"):
        ghost = transformers.AutoModelForCausalLM.from_config(model.config)
    with pytest.raises(GeomlensError, match="meta device"):
        load_model(NnsightModel(ghost, tokenizer))


class Component(torch.nn.Module):
    """Stands in for a TransformerLens bridge component: it takes a transformers module's
    place in its parent, keeps that module as ``_original_component`` and hooks itself."""

    def __init__(self, original):
        super().__init__()
        self._original_component = original
        self.register_forward_hook(lambda module, args, out: None)

    def forward(self, *args, **kwargs):
        return self._original_component(*args, **kwargs)


def test_a_bridged_model_is_read_as_transformers_built_it():
    model, tokenizer = tiny_llama(), small_tokenizer(False)
    bridged = tiny_llama()
    for k, layer in enumerate(bridged.model.layers):
        layer.self_attn = Component(layer.self_attn)
        bridged.model.layers[k] = Component(layer)
    view = load_model(Bridge(bridged, tokenizer))
    assert view.model is not bridged
    assert not any(hasattr(m, "_original_component") for m in view.model.modules())
    names = dict(view.model.named_parameters())
    for name, weight in model.named_parameters():
        assert torch.equal(names[name], weight)
    shared = bridged.model.layers[0]._original_component.mlp.down_proj.weight
    assert names["model.layers.0.mlp.down_proj.weight"] is shared  # not copied
    assert isinstance(bridged.model.layers[0], Component)  # the user's model as it was
    assert len(bridged.model.layers[0]._forward_hooks) == 1
    got = geomlens.activations(view, TEXTS)
    want = geomlens.activations(model, TEXTS, tokenizer=tokenizer)
    for a, b in zip(got.hidden_states, want.hidden_states, strict=True):
        torch.testing.assert_close(a, b)


def test_nnsight_keeps_its_model_as_module(capsys):
    model, tokenizer = tiny_llama(), small_tokenizer(False)
    envoy = type("Envoy", (), {"_module": model, "tokenizer": tokenizer})()  # nnsight >= 0.5
    assert load_model(envoy).model is model
    assert "nnsight's LanguageModel" in capsys.readouterr().err


def test_a_model_in_memory_is_neither_moved_nor_cast():
    model, tokenizer = tiny_llama(), small_tokenizer(False)
    with pytest.raises(GeomlensError, match="does not cast a model it is given"):
        load_model(model, tokenizer=tokenizer, dtype="bfloat16")
    with pytest.raises(GeomlensError, match="takes a model object as model= or a view="):
        geomlens.decompose(model=model, view=load_model(model, tokenizer=tokenizer), **SMALL)
    with pytest.raises(GeomlensError, match="tokenizer= goes with a model object"):
        geomlens.decompose(model="minilm-l6", tokenizer=tokenizer, **SMALL)
    with pytest.raises(GeomlensError, match="runs on the local engine only"):
        geomlens.capture(model=model, tokenizer=tokenizer, engine="ray", out="unused", **SMALL)
    assert next(model.parameters()).dtype == torch.float32


def fake_quantised(bits: int = 4) -> transformers.PreTrainedModel:
    """The tiny Llama with every matrix rounded to ``bits`` bits per row (symmetric,
    one scale per row, as GPTQ and bitsandbytes store them) and a quantisation config."""
    model = tiny_llama()
    levels = 2 ** (bits - 1) - 1
    with torch.no_grad():
        for p in model.parameters():
            if p.ndim == 2:
                scale = p.abs().amax(dim=1, keepdim=True) / levels
                p.copy_(torch.round(p / scale) * scale)
    model.config.quantization_config = {"quant_method": "gptq", "bits": bits}
    return model


def test_quantised_weights_in_memory_are_kept_and_said(tmp_path):
    model, tokenizer = fake_quantised(), small_tokenizer(False)
    view = load_model(model, tokenizer=tokenizer)
    assert view.load_check.tolerance == QUANTISED_TOLERANCE  # the quantised bound, stated
    assert view.identity.quantization == {"method": "gptq", "bits": 4}
    assert model.config.quantization_config == {"quant_method": "gptq", "bits": 4}  # kept
    run = geomlens.report(model=model, tokenizer=tokenizer, out=tmp_path / "q", **REPORT)
    record = manifest(run)["model"]["quantization"]
    assert record == {"method": "gptq", "bits": 4, "check_tolerance": QUANTISED_TOLERANCE}
    page = (run.folder / "report.html").read_text()
    assert "quantised weights (gptq, 4-bit)" in page
    # and the same weights without the config are another model
    plain = tiny_llama()
    assert weights_hash(plain) != weights_hash(model)


def test_walk_sphere_and_concepts_take_a_model_in_memory(folder, tmp_path):
    model, tokenizer = tiny_llama(), small_tokenizer(False)
    text = "The cat sat on the mat."
    held = geomlens.walk(model=model, tokenizer=tokenizer, text=text, out=tmp_path / "w", **SMALL)
    assert model.config._attn_implementation == "sdpa"  # eager during the walk, then back
    saved = geomlens.walk(model=str(folder), text=text, out=tmp_path / "w2", **SMALL)
    assert held.metrics == saved.metrics
    sphere = dict(probe_layers=[0], **SMALL)
    held = geomlens.sphere(model=model, tokenizer=tokenizer, out=tmp_path / "s", **sphere)
    saved = geomlens.sphere(model=str(folder), out=tmp_path / "s2", **sphere)
    assert held.metrics == saved.metrics
    task = tmp_path / "colours.json"
    task.write_text(
        json.dumps(
            {
                "examples": [
                    {"input": "On a clear day the sky is", "target_scores": {"blue": 1, "red": 0}},
                    {"input": "Fresh snow is", "target_scores": {"white": 1, "black": 0}},
                ]
            }
        )
    )
    common = dict(task=str(task), schemes=["sanity"], progress=False)
    ours = geomlens.concepts(model=model, tokenizer=tokenizer, out=tmp_path / "c", **common)
    theirs = geomlens.concepts(model=str(folder), out=tmp_path / "c2", **common)
    assert ours.metrics["concepts"] == theirs.metrics["concepts"]
    assert manifest(ours)["model"]["source"] == "model in memory"


def test_an_undeclared_type_in_memory_loads_in_the_hidden_state_tier(tmp_path):
    from geomlens.models.tiny import tiny_model

    tokenizer = small_tokenizer(False)
    sizes = {"vocab_size": len(tokenizer), "bos_token_id": tokenizer.bos_token_id}
    model = tiny_model("lfm2", **sizes, eos_token_id=tokenizer.eos_token_id)
    model.save_pretrained(tmp_path / "lfm2")
    tokenizer.save_pretrained(tmp_path / "lfm2")
    view = load_model(model, tokenizer=tokenizer)
    assert view.tier == "hidden-state" and view.source == "model in memory"
    held = geomlens.decompose(model=model, tokenizer=tokenizer, out=tmp_path / "h", **SMALL)
    saved = geomlens.decompose(model=str(tmp_path / "lfm2"), out=tmp_path / "s", **SMALL)
    assert held.metrics["decomposition"] == saved.metrics["decomposition"]
    assert manifest(held)["model"]["tier"] == "hidden-state"


@pytest.mark.parametrize(
    ("config", "said"),
    [
        (lambda: transformers.BitsAndBytesConfig(load_in_4bit=True), ("bitsandbytes", 4)),
        (lambda: transformers.BitsAndBytesConfig(load_in_8bit=True), ("bitsandbytes", 8)),
        (lambda: transformers.GPTQConfig(bits=4), ("gptq", 4)),
        (lambda: transformers.AwqConfig(bits=4), ("awq", 4)),
        (lambda: {"quant_method": "torchao", "quant_type": "int4_weight_only"}, ("torchao", None)),
    ],
)
def test_the_method_and_bits_are_read_from_transformers_quantisation_configs(config, said):
    """transformers' own config classes (built without their backends) and a plain dict."""
    from types import SimpleNamespace

    from geomlens.models.identity import quantization, quantization_words

    model = SimpleNamespace(config=SimpleNamespace(quantization_config=config()))
    assert quantization(model) == {"method": said[0], "bits": said[1]}
    bits = f", {said[1]}-bit" if said[1] else ""
    assert quantization_words(quantization(model)) == f"quantised weights ({said[0]}{bits})"
    assert quantization(SimpleNamespace(config=SimpleNamespace())) is None


def test_the_weights_hash_sees_one_bit_and_nothing_else(folder):
    """Equal for the same weights however they were made (built in memory, or saved and
    read back by Hugging Face), different for one flipped bit or another dtype."""
    model = tiny_llama()
    reread = transformers.AutoModelForCausalLM.from_pretrained(folder)
    assert weights_hash(model) == weights_hash(reread)
    weight = model.model.layers[1].self_attn.o_proj.weight
    bits = weight.data.view(torch.int32)
    bits[3, 5] ^= 1  # the lowest mantissa bit of one entry
    assert weights_hash(model) != weights_hash(reread)
    bits[3, 5] ^= 1
    assert weights_hash(model) == weights_hash(reread)
    assert weights_hash(model.to(torch.bfloat16)) != weights_hash(reread)
