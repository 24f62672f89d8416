"""What each bundled model really is (SmolLM2-135M-Instruct de-quantised from its Q4_1 GGUF,
...) is said by ``geomlens models``, in the run manifest and on the report page's model
line, not only in the README."""

from __future__ import annotations

import json

import geomlens
from geomlens.analyses.overview import run_section, summary_section
from geomlens.cli import main
from geomlens.models.bundled import BUNDLED
from geomlens.runs.runfolder import open_run


def test_geomlens_models_says_what_each_bundled_model_is(capsys):
    assert main(["models"]) == 0
    out = capsys.readouterr().out
    assert "de-quantised to float32 from its 4-bit Q4_1 GGUF file" in out
    for model in BUNDLED.values():
        assert f"{model.name}: {model.caveat}." in out
    assert main(["models", "--json"]) == 0
    rows = {r["name"]: r for r in json.loads(capsys.readouterr().out)}
    assert "SmolLM2-135M-Instruct (the instruction-tuned model" in rows["smollm2-135m"]["caveat"]


def test_the_manifest_and_the_model_line_carry_the_caveat(tmp_path):
    small = dict(corpus="bbc", contexts=4, length=16, figures="none", progress=False)
    result = geomlens.capture(model="minilm-l6", out=tmp_path / "r", layers=[0, 6], **small)
    caveat = BUNDLED["minilm-l6"].caveat
    assert json.loads((result.folder / "manifest.json").read_text())["model"]["caveat"] == caveat
    run = open_run(result.folder)
    assert f"Bundled model: {caveat}." in summary_section(run).replace("&#x27;", "'")
    assert "model caveat" in run_section(run)
    # a model given by folder is not named as bundled: its files are what they are
    view = geomlens.load_model(run.manifest["model"]["source"])
    other = geomlens.capture(
        model=view.source, view=view, out=tmp_path / "f", layers=[0, 6], **small
    )
    assert "caveat" not in json.loads((other.folder / "manifest.json").read_text())["model"]
