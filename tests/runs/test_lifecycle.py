"""The run lifecycle as one block (runs/lifecycle.py's ``run_folder``): a new run, the
same config reused, a partial run resumed, another config refused, no empty folder left by
a refused command, and only finite metrics marked complete."""

from __future__ import annotations

import json

import pytest

from geomlens.errors import GeomlensError
from geomlens.runs import lifecycle

CONFIG = {"command": "toy", "contexts": 8, "length": 16}


def write_run(out, config=CONFIG, metrics=None):
    """A run of ``config`` made in ``out`` from start to end; its Run."""
    with lifecycle.run_folder(out, "toy", config) as run:
        assert run.state == "new" and run.previous is None and not run.finished
        run.begin(model={"name": "toy"})
        run.folder.merge_metrics("toy", metrics or {"x": 1.5})
        return run.complete({"toy_seconds": 0.25}, extra=3)


def manifest(out):
    return json.loads((out / "manifest.json").read_text())


def test_a_new_run_gets_its_manifest_and_is_marked_complete(tmp_path):
    out = tmp_path / "run"
    done = write_run(out)
    written = manifest(out)
    assert done.path == out
    assert written["command"] == "toy" and written["config"] == CONFIG
    assert written["status"] == "complete" and written["model"] == {"name": "toy"}
    assert written["extra"] == 3 and written["timing"]["toy_seconds"] == 0.25
    assert written["timing"]["wall_seconds"] >= 0
    assert set(written["versions"]) >= {"geomlens", "torch"}
    assert not (out / ".lock").exists()


def test_the_same_config_finished_is_reused_with_its_sentence(tmp_path, capsys):
    out = tmp_path / "run"
    write_run(out)
    before = (out / "manifest.json").read_bytes()
    capsys.readouterr()
    with lifecycle.run_folder(out, "toy", dict(CONFIG)) as run:
        assert run.state == "complete" and run.finished
        assert run.previous is not None and run.previous["status"] == "complete"
        reused = run.reuse()
    assert reused.path == out and reused.metrics == {"toy": {"x": 1.5}}
    assert capsys.readouterr().err == f"{out} already holds this run; reusing it.\n"
    assert (out / "manifest.json").read_bytes() == before


def test_a_partial_run_resumes_with_its_previous_manifest(tmp_path):
    out = tmp_path / "run"
    with pytest.raises(KeyboardInterrupt), lifecycle.run_folder(out, "toy", CONFIG) as run:
        run.begin(model={"name": "toy"})
        run.folder.merge_metrics("half", {"x": 1.0})
        raise KeyboardInterrupt
    assert manifest(out)["status"] == "running"
    with lifecycle.run_folder(out, "toy", CONFIG) as run:
        assert run.state == "resume" and not run.finished
        assert run.previous is not None and run.previous["status"] == "running"
        assert run.folder.read_metrics() == {"half": {"x": 1.0}}
        run.begin(model={"name": "toy"})
        run.complete()
    assert manifest(out)["status"] == "complete"


def test_another_config_is_refused_and_the_folder_kept(tmp_path):
    out = tmp_path / "run"
    write_run(out)
    before = (out / "manifest.json").read_bytes()
    with (
        pytest.raises(GeomlensError, match="different config \\(differs in: contexts\\)"),
        lifecycle.run_folder(out, "toy", {**CONFIG, "contexts": 9}),
    ):
        raise AssertionError("the block never runs")
    assert (out / "manifest.json").read_bytes() == before


def test_a_refused_command_leaves_no_empty_folder(tmp_path):
    out = tmp_path / "run"
    with pytest.raises(GeomlensError, match="refused"), lifecycle.run_folder(out, "toy", CONFIG):
        raise GeomlensError("refused before anything is written.")
    assert not out.exists()


def test_only_finite_metrics_are_marked_complete(tmp_path):
    out = tmp_path / "run"
    with (
        pytest.raises(GeomlensError, match="metrics.json"),
        lifecycle.run_folder(out, "toy", CONFIG) as run,
    ):
        run.begin()
        (out / "metrics.json").write_text('{"toy": {"x": NaN}}\n')
        run.complete()
    assert manifest(out)["status"] == "running"


def test_complete_needs_begin(tmp_path):
    with (
        pytest.raises(RuntimeError, match="before begin"),
        lifecycle.run_folder(tmp_path / "run", "toy", CONFIG) as run,
    ):
        run.complete()


# run identity with defaults filled in -------------------------------------------------------


def test_a_field_added_later_at_its_default_keeps_the_run_reusable(tmp_path, capsys):
    out = tmp_path / "run"
    write_run(out)  # recorded before "new_option" existed
    later = {**CONFIG, "new_option": 3}
    with lifecycle.run_folder(out, "toy", later, {"new_option": 3}) as run:
        assert run.state == "complete"
    with (
        pytest.raises(GeomlensError, match="differs in: new_option"),
        lifecycle.run_folder(out, "toy", {**CONFIG, "new_option": 4}, {"new_option": 3}),
    ):
        pass
    with (  # a field with no default is never assumed
        pytest.raises(GeomlensError, match="differs in: new_option"),
        lifecycle.run_folder(out, "toy", later),
    ):
        pass


def test_a_capture_option_added_later_keeps_earlier_run_folders(tmp_path, minilm, capsys):
    """A real capture run folder, then the same run under a config class with one more
    field: reused while that field is at its default, refused when it is not."""
    from dataclasses import dataclass, replace

    from geomlens.capturing.capture import CaptureConfig
    from geomlens.pipeline.request import RunRequest
    from geomlens.pipeline.run import run

    @dataclass(frozen=True)
    class LaterConfig(CaptureConfig):
        new_option: int = 3

    base = {"model": "minilm-l6", "contexts": 4, "length": 8, "layers": (0, 1), "batch_size": 4}
    out = tmp_path / "run"
    first = run(RunRequest("capture", CaptureConfig(**base), out, view=minilm, progress=False))
    recorded = json.loads((first.path / "metrics.json").read_bytes())
    capsys.readouterr()
    again = run(RunRequest("capture", LaterConfig(**base), out, view=minilm, progress=False))
    assert "already holds this run; reusing it" in capsys.readouterr().err
    assert json.loads((again.path / "metrics.json").read_bytes()) == recorded
    changed = replace(LaterConfig(**base), new_option=4)
    with pytest.raises(GeomlensError, match="differs in: new_option"):
        run(RunRequest("capture", changed, out, view=minilm, progress=False))
