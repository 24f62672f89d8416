"""The sphere analyses (Molina 2023) on real SmolLM2 and MiniLM weights and tiny models.

Kept small: a couple of short windows, one prompt, one or two probe layers, and a small
UMAP sample in the end-to-end runs.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from geomlens.analyses.sphere import compute as sph
from geomlens.analyses.sphere import ffn, head_probe, lens
from geomlens.analyses.sphere.step import load_nouns, mlp_inputs, norm_pass, token_strings
from geomlens.capturing.hooks import hidden_states
from geomlens.corpus import make_windows
from geomlens.errors import GeomlensError
from geomlens.models.view import ModelView

PROMPT = "To kill two birds with one stone"


def _windows(view: ModelView, bbc, n: int = 2, length: int = 32) -> torch.Tensor:
    w = make_windows(bbc, view.tokenizer, n, length, seed=0)
    return torch.tensor(np.array(w.input_ids), dtype=torch.long)


def _prompt(view: ModelView) -> tuple[list[int], dict[int, torch.Tensor]]:
    ids = view.tokenizer(PROMPT)["input_ids"]
    hs = hidden_states(view, torch.tensor([ids]), range(view.n_layers + 1))
    return ids, {k: v[0] for k, v in hs.items()}


# ------------------------------------------------------------------ identity (real weights)


def test_identity_smollm2_rmsnorm(smollm2, bbc):
    stats = norm_pass(smollm2, _windows(smollm2, bbc))
    names = [s.name for s in stats]
    assert len(names) == 2 * smollm2.n_layers + 1 and names[-1] == "final_norm"
    ident = sph.identity_result(stats, 2, "float32")
    assert ident.max_rel_err <= 1e-5
    assert all(s.n == 2 * 32 for s in stats)
    # RMSNorm only rescales: without gamma an embedding keeps its direction exactly.
    orient = sph.orientation(smollm2, stats)
    assert orient.norms[0]["plain"]["min"] == pytest.approx(1.0, abs=1e-9)
    row = orient.layers[0]
    assert row["output_radius_mean"] == pytest.approx(math.sqrt(576), rel=1e-3)


def test_identity_minilm_layernorm(minilm, bbc):
    stats = norm_pass(minilm, _windows(minilm, bbc))
    names = [s.name for s in stats]
    assert names[0] == "embedding_norm" and len(names) == 1 + 2 * minilm.n_layers
    assert sph.identity_result(stats, 2, "float32").max_rel_err <= 1e-5
    # LayerNorm removes the all-ones component: the plain cosine is below 1.
    orient = sph.orientation(minilm, stats)
    assert orient.norms[0]["plain"]["mean"] < 1.0


def test_construction_by_hand():
    """The construction of a LayerNorm equals torch's layer_norm on random data."""
    from geomlens.models.view import NormView

    torch.manual_seed(0)
    d = 16
    w, b = torch.randn(d), torch.randn(d)
    x = torch.randn(5, d) * 3 + 2
    norm = NormView("layernorm", w, b, 1e-5, torch.nn.Identity())
    ref = torch.nn.functional.layer_norm(x.double(), (d,), w.double(), b.double(), 1e-5)
    torch.testing.assert_close(sph.sphere_construction(x, norm), ref)
    y = sph.sphere_construction(x, norm, affine=False)
    assert torch.allclose(y.sum(-1), torch.zeros(5, dtype=torch.float64), atol=1e-10)
    assert torch.allclose(
        y.norm(dim=-1), torch.full((5,), math.sqrt(d), dtype=torch.float64), rtol=1e-4
    )


# ------------------------------------------------------------------ logit lens


def test_lens_last_layer_is_the_models_logits(smollm2):
    ids, hidden = _prompt(smollm2)
    with torch.inference_mode():
        out = smollm2.model(input_ids=torch.tensor([ids]), output_hidden_states=True)
    last = hidden[smollm2.n_layers]
    logits = lens.lens_logits(smollm2, last)
    torch.testing.assert_close(logits, out.logits[0], atol=1e-4, rtol=1e-5)
    # Hugging Face's last hidden state already has the final norm ...
    torch.testing.assert_close(out.hidden_states[-1][0], smollm2.final_norm(last))
    # ... so reading it through the lens again would apply the norm twice: not the logits.
    twice = lens.lens_logits(smollm2, out.hidden_states[-1][0])
    assert (twice - out.logits[0]).abs().max() > 1e-2
    traj = lens.trajectory(smollm2, ids, hidden, token_strings(smollm2))
    assert traj.prediction_id == int(out.logits[0, -1].argmax())
    assert len(traj.next_rank) == smollm2.n_layers + 1 and traj.next_rank[0][-1] is None
    for t, first in enumerate(traj.first_top1):
        if first is not None:
            assert traj.next_rank[traj.layers.index(first)][t] == 1


def test_lens_minilm_reads_through_tied_embeddings(minilm):
    assert lens.readout_description(minilm).startswith(
        "the token embedding table's transpose (no LM head)"
    )
    ids, hidden = _prompt(minilm)
    h = hidden[minilm.n_layers]
    table = minilm.model.get_input_embeddings().weight.detach()
    torch.testing.assert_close(minilm.W_U, table.T)
    torch.testing.assert_close(lens.lens_logits(minilm, h), h @ table.T)


# ------------------------------------------------------------------ top tokens


def test_top_tokens_by_norm_equal_direct_computation(smollm2):
    tokens = token_strings(smollm2)
    counts = np.ones(smollm2.W_E.shape[0])
    top = sph.top_tokens(smollm2, tokens, counts, k=10)
    norms = smollm2.W_E.double().norm(dim=-1)
    assert top.tables["norm"]["top_ids"] == torch.topk(norms, 10).indices.tolist()
    assert top.tables["norm"]["bottom_ids"] == torch.topk(-norms, 10).indices.tolist()
    assert top.tables["norm"]["top"] == [
        smollm2.tokenizer.decode([i]) for i in top.tables["norm"]["top_ids"]
    ]
    # Tied RMSNorm without gamma: the self-score is sqrt(d) |e| (up to eps), same order.
    assert top.tables["plain"]["top_ids"] == top.tables["norm"]["top_ids"]


# ------------------------------------------------------------------ head probe


def _tiny_llama(planted: tuple[int, ...]) -> ModelView:
    from transformers import LlamaConfig, LlamaForCausalLM

    from geomlens.models.families.llama import LLAMA

    config = LlamaConfig(
        vocab_size=64,
        hidden_size=32,
        intermediate_size=48,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=4,
        head_dim=32,
        max_position_embeddings=64,
        tie_word_embeddings=True,
    )
    torch.manual_seed(0)
    model = LlamaForCausalLM(config).eval().requires_grad_(False)
    with torch.no_grad():
        for layer in model.model.layers:
            for h in planted:
                sl = slice(32 * h, 32 * (h + 1))
                layer.self_attn.q_proj.weight[sl] = torch.eye(32)
                layer.self_attn.k_proj.weight[sl] = torch.eye(32)
    return LLAMA.build(model, None, "tiny-llama", "memory")


def test_probe_finds_planted_self_attending_heads():
    view = _tiny_llama(planted=(1, 3))
    probe = head_probe.probe_heads(view, list(range(4, 44)), [0, 1], k=3)
    for row, ranks in zip(probe.self_fraction, probe.mean_self_rank, strict=True):
        found = [h for h, f in enumerate(row) if f == 1.0]
        assert found == [1, 3]
        assert ranks[1] == ranks[3] == 1.0 and max(ranks[0], ranks[2]) > 1.0
    # intervals over the 40 nouns: a planted head's fraction 1 has a Wilson interval
    # reaching up to 1 and bounded below (40 of 40 rule out much under 0.9); each
    # interval holds its number; a planted head's ranks are all 1, so no spread
    for li in range(2):
        for h in range(4):
            low, high = probe.self_fraction_ci[li][h]
            assert low <= probe.self_fraction[li][h] <= high
            rlow, rhigh = probe.mean_self_rank_ci[li][h]
            assert rlow <= probe.mean_self_rank[li][h] <= rhigh
        for h in (1, 3):
            assert probe.self_fraction_ci[li][h][0] > 0.9 and probe.self_fraction_ci[li][h][1] == 1
            assert probe.mean_self_rank_ci[li][h] == [1.0, 1.0]
    assert "Wilson" in probe.to_dict()["intervals"]
    probes = probe.tables["0"][1]["probes"]
    assert all(p["keys_nouns"][0] == p["noun"] for p in probes)
    assert all(p["keys_vocab"][0] == p["noun"] for p in probes)
    json.dumps(probe.to_dict())
    json.dumps(probe.tables_dict())


def test_one_noun_repeated_is_refused(tmp_path):
    """``cat`` twice made every head's self fraction 1.0: the query's own token was the
    only key. A list of one word is refused when read, and ids of one token by the probe."""
    nouns = tmp_path / "nouns.txt"
    nouns.write_text("cat\ncat\n")
    with pytest.raises(GeomlensError, match=r"holds one word only \('cat', 2 times\)"):
        load_nouns(nouns)
    nouns.write_text("cat\ncat\ndog\n")
    assert load_nouns(nouns) == ["cat", "cat", "dog"]
    view = _tiny_llama(planted=())
    with pytest.raises(GeomlensError, match="at least 2 different single-token nouns"):
        head_probe.probe_heads(view, [7, 7, 7], [0], k=3)
    probe = head_probe.probe_heads(view, [7, 8], [0], k=3)
    assert len(probe.self_fraction[0]) == view.n_heads


def test_probe_smollm2_nouns(smollm2):
    kept, ids = head_probe.single_token_ids(smollm2.tokenizer, load_nouns())
    assert len(load_nouns()) >= 100 and len(kept) >= 100
    probe = head_probe.probe_heads(smollm2, ids[:20], [0], nouns=kept[:20], k=3)
    assert len(probe.self_fraction[0]) == smollm2.n_heads
    assert all(0.0 <= f <= 1.0 for f in probe.self_fraction[0])


# ------------------------------------------------------------------ FFN


def test_ffn_coefficients_rebuild_the_mlp(smollm2):
    ids, hidden = _prompt(smollm2)
    inputs = mlp_inputs(smollm2, torch.tensor([ids]))
    layer = 3
    mlp = smollm2.blocks[layer].mlp()
    with torch.inference_mode():
        expected = mlp.module(inputs[layer][None])[0]
    m = ffn.mlp_coefficients(smollm2, layer, inputs[layer])
    torch.testing.assert_close(m @ mlp.W_out, expected, atol=1e-4, rtol=1e-4)
    res = ffn.ffn_subupdates(
        smollm2,
        [layer],
        prompt_inputs=inputs,
        target_id=5,
        h_last=hidden[smollm2.n_layers][-1],
        n_rows=3,
        k=3,
    )
    assert len(res.rows[str(layer)]) == 3 and res.prompt is not None
    tops = [e["contribution"] for e in res.prompt["top"]]
    assert tops == sorted(tops, reverse=True)


# ------------------------------------------------------------------ tiny gpt2


def test_gpt2_tiny_layernorm_with_bias():
    from transformers import GPT2Config, GPT2LMHeadModel

    from geomlens.models.families.gpt2 import GPT2

    config = GPT2Config(vocab_size=96, n_positions=32, n_embd=64, n_layer=2, n_head=4)
    torch.manual_seed(0)
    model = GPT2LMHeadModel(config).eval().requires_grad_(False)
    with torch.no_grad():
        for p in model.parameters():
            if p.ndim == 1:
                p.add_(0.2 * torch.randn_like(p))
    view = GPT2.build(model, None, "tiny-gpt2", "memory")
    ids = torch.randint(0, 96, (2, 12), generator=torch.Generator().manual_seed(0))
    stats = norm_pass(view, ids)
    assert len(stats) == 5 and sph.identity_result(stats, 2, "float32").max_rel_err <= 1e-5
    hidden = {k: v[0] for k, v in hidden_states(view, ids[:1], range(3)).items()}
    with torch.inference_mode():
        torch.testing.assert_close(
            lens.lens_logits(view, hidden[2]), model(ids[:1]).logits[0], atol=1e-4, rtol=1e-5
        )
    top = sph.top_tokens(view, None, np.arange(96.0), k=5)
    assert top.readout_norm == "final_norm" and len(top.tables["affine"]["top"]) == 5
    probe = head_probe.probe_heads(view, list(range(10, 30)), [0, 1], k=3)
    assert np.array(probe.self_fraction).shape == (2, 4)


# ------------------------------------------------------------------ command


@pytest.fixture
def small_umap(monkeypatch):
    import geomlens.analyses.sphere.step as sphere_stage

    monkeypatch.setattr(sphere_stage, "UMAP_TOKENS", 300)
    monkeypatch.setattr(sphere_stage, "IDENTITY_WINDOWS", 2)


def _config(model: str):
    from geomlens.capturing import CaptureConfig

    return CaptureConfig(model=model, contexts=2, length=16)


def test_run_sphere_smollm2(smollm2, tmp_path, small_umap):
    from geomlens.analyses.sphere.command import run_sphere

    runs = [
        run_sphere(
            _config("smollm2-135m"), tmp_path / "r0", layers=[0], view=smollm2, progress=False
        )
    ]
    m = runs[0].metrics["sphere"]
    assert m["identity"]["max_rel_err"] <= 1e-5
    assert m["readout"] == "final_norm then W_U"
    assert len(m["top_tokens"]["norm"]["top"]) == 10
    assert m["heads"]["layers"] == [0] and len(m["heads"]["self_fraction"][0]) == 9
    assert len(m["trajectory"]["first_top1"]) == len(m["trajectory"]["tokens"])
    for name in ("sphere_heads.json", "sphere_ffn.json", "sphere_umap.json"):
        assert (runs[0].path / name).exists()
    figures = {p.name for p in (runs[0].path / "figures").iterdir()}
    assert {
        "sphere_radius.png",
        "sphere_cosines.png",
        "sphere_top_tokens.png",
        "sphere_heads.png",
        "sphere_lens.png",
        "sphere_trajectory.png",
        "sphere_trajectory.html",
    } <= figures
    assert runs[0].config["probe_layers"] == [0] and runs[0].config["prompt"] == PROMPT


def test_run_sphere_minilm_deterministic(minilm, tmp_path, small_umap):
    from geomlens.analyses.sphere.command import run_sphere

    runs = [  # the second run draws no static figure: the numbers do not depend on them
        run_sphere(
            _config("minilm-l6"),
            tmp_path / f"m{i}",
            layers=[0, 5],
            view=minilm,
            progress=False,
            figures=figures,
        )
        for i, figures in enumerate(("all", "interactive"))
    ]
    a, b = ((r.path / "metrics.json").read_bytes() for r in runs)
    assert a == b  # same config and seed: same metrics.json, byte for byte
    m = runs[0].metrics["sphere"]
    assert m["readout"].startswith("the token embedding table's transpose (no LM head)")
    assert m["placement"] == "post" and m["identity"]["max_rel_err"] <= 1e-5
    assert m["top_tokens"]["readout_norm"] == "blocks.5.norm_mlp"
    assert m["ffn"]["prompt"]["attribution"] == "direction only (post-norm)"


def test_cli_parses_sphere():
    from geomlens.cli import build_parser

    args = build_parser().parse_args(
        ["sphere", "--probe-layers", "0,2", "--nouns", "n.txt", "--prompt", "Hello there"]
    )
    assert args.probe_layers == (0, 2) and args.nouns == "n.txt" and args.prompt == "Hello there"
    assert args.contexts == 128 and args.length == 128


def test_english_zipf_orders_common_words_and_shift_interval(smollm2):
    from geomlens.analyses.sphere.word_frequency import english_zipf

    z = english_zipf(["the", " house", "xqzvbw", ",", " "])
    assert z[0] > z[1] > 0 and z[2] == z[3] == z[4] == 0
    tokens = token_strings(smollm2)
    zipf = english_zipf(tokens)
    top = sph.top_tokens(smollm2, tokens, None, k=10, zipf=zipf, seed=3)
    # the claim's lists: the top whole words, ranked as the whole vocabulary is
    words = sph.whole_words(tokens, zipf)
    assert top.compared == sph.WHOLE_WORDS and top.readout_has_beta is False  # RMSNorm
    for key in ("affine", "plain"):
        ranked = [i for i in top.tables[key]["top_ids"] if words[i]]
        listed = top.tables[f"{key}_words"]["top_ids"]
        assert all(words[i] for i in listed) and listed[: len(ranked)] == ranked
        assert all(tokens[i].startswith(" ") for i in listed)
    affine, plain = (
        zipf[top.tables[key]["top_ids"]].mean() for key in ("affine_words", "plain_words")
    )
    shift = top.zipf_shift
    assert shift is not None and shift["value"] == pytest.approx(affine - plain, abs=1e-6)
    assert shift["low"] <= shift["value"] <= shift["high"] and shift["n_boot"] == 1000
    assert top.zipf["vocab_mean"] == pytest.approx(zipf.mean(), rel=1e-6)
    again = sph.top_tokens(smollm2, tokens, None, k=10, zipf=zipf, seed=3)
    assert again.to_dict() == top.to_dict()  # seeded: the same bytes


def test_the_trajectory_map_shows_a_bar_over_its_epochs(smollm2, capsys, small_umap):
    """UMAP's epochs get a bar (items and time left) on stderr where the step prints; the
    map is the same with and without it."""
    from geomlens.analyses.sphere.step import trajectory_map
    from geomlens.io.progress import StepLines

    ids = smollm2.tokenizer(PROMPT, return_tensors="pt")["input_ids"]
    hidden = {k: v[0] for k, v in hidden_states(smollm2, ids, [0, 15, 30]).items()}
    step = StepLines("sphere")
    step("UMAP of the trajectory")
    shown = trajectory_map(smollm2, hidden, ids[0].tolist(), 0, step)
    err = capsys.readouterr().err
    assert "sphere: UMAP of the trajectory" in err and "epoch" in err and "<" in err
    plain = trajectory_map(smollm2, hidden, ids[0].tolist(), 0)
    assert capsys.readouterr().err == ""
    np.testing.assert_array_equal(shown.token_xy, plain.token_xy)
    np.testing.assert_array_equal(shown.path_xy, plain.path_xy)


def test_umap_kernels_are_compiled_once_per_installation():
    """Every numba kernel of umap's fit keeps its machine code on disk (numba's cache),
    so a new process loads it instead of compiling again (about 15 s a report)."""
    from numba.core.caching import NullCache
    from numba.core.registry import CPUDispatcher

    from geomlens.analyses.sphere.lens import umap_module

    umap = umap_module()
    kernels = [
        kernel
        for module in (umap.umap_, umap.utils, umap.layouts, umap.spectral)
        for kernel in vars(module).values()
        if isinstance(kernel, CPUDispatcher)
    ]
    names = {kernel.py_func.__name__ for kernel in kernels}
    assert {"fast_knn_indices", "smooth_knn_dist", "compute_membership_strengths"} <= names
    assert not [k.py_func.__name__ for k in kernels if isinstance(k._cache, NullCache)]
