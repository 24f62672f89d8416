"""What each command prints when it finishes, as lines (the CLI prints exactly these).

Each analysis's entry in ``reporting/registry.py`` holds its command's function here.
"""

from __future__ import annotations

from geomlens.io.runfolder import Run
from geomlens.reporting.stages import concepts as concepts_stage
from geomlens.reporting.stages import walk as walk_stage


def capture_lines(run: Run) -> list[str]:
    timing = run.manifest.get("timing", {})
    lines = [f"capture written to {run.path}"]
    if "tokens" in timing:  # absent when a resumed run found its statistics already saved
        lines.append(f"  {timing['tokens']:.0f} tokens at {timing['tokens_per_s']:.0f} tokens/s")
    return lines


def decompose_lines(run: Run) -> list[str]:
    dec = run.metrics["decomposition"]
    view = "position 0 skipped" if dec["skip_first"] else "all positions"
    lines = [
        f"decomposition written to {run.path} (metrics.json, figures/)",
        f"  layer  share_pos  share_ctx  pos_rank  ({view})",
    ]
    for row in dec["layers"]:
        lines.append(
            f"  {row['layer']:5d}  {row['share_pos']:9.3f}  {row['share_ctx']:9.3f}"
            f"  {row['pos_rank']:8d}"
        )
    return lines


def sphere_lines(run: Run) -> list[str]:
    m = run.metrics["sphere"]
    traj = m["trajectory"]
    pairs = zip(traj["tokens"], traj["first_top1"], strict=True)
    return [
        f"sphere analyses written to {run.path} (metrics.json, sphere_*.json, figures/)",
        f"  identity max_rel_err {m['identity']['max_rel_err']:.2e} ({m['readout']})",
        f"  top tokens by norm: {m['top_tokens']['norm']['top'][:5]}",
        f"  prompt {m['prompt']!r} -> {traj['prediction']!r}; first top-1 layer per position:",
        "  " + ", ".join(f"{t!r}:{f}" for t, f in pairs),
    ]


def walk_lines(run: Run) -> list[str]:
    header = f"walk written to {run.path} (metrics.json, similarity.safetensors, figures/)"
    return [header, *walk_stage.summary_lines(run)]


def concepts_lines(run: Run) -> list[str]:
    return [
        f"concept-space tests written to {run.path} (metrics.json, predictions.jsonl,",
        "  sweep_table.md, top10.md, schemes/, figures/)",
        *concepts_stage.summary_lines(run),
    ]


def report_lines(run: Run) -> list[str]:
    minutes = run.manifest.get("timing", {}).get("wall_seconds", 0.0) / 60
    return [f"report written to {run.path / 'report.html'} ({minutes:.1f} min)"]
