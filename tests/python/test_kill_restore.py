"""Kill and restore with real SIGKILLs: a subprocess runs a live aggregation, a pipeline, a graph
or a pipeline over journaled live inputs, writing its output with checkpoints; it is killed at
random moments (and from inside an fsync of a snapshot, a journal or the output), restarted from
its newest checkpoint until it finishes, and its output file must be byte for byte the
uninterrupted run's. A few kills here; the 200-kill
run is ``python -m benchmarks.kill_restore`` (docs/checkpoints.md)."""

from __future__ import annotations

from benchmarks import kill_restore


def test_killed_runs_restore_to_the_uninterrupted_output(capsys) -> None:
    scenarios = "live-tumlsc,live-lateness,live-sessions,pipeline,graph,live-pipeline"
    code = kill_restore.main(["--kills", "10", "--only", scenarios,
                              "--rows", "20000", "--every", "3000", "--seed", "5"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "total kills 10, divergences 0" in out
