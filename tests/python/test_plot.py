"""po.plot_thread_levels: the PNG of an elastic run's level and throughput (issue 30)."""

import pyarrow as pa
import pytest

import pyarrow_ops as po

pytest.importorskip("matplotlib")


def _auto_run():
    table = pa.table({"t": pa.array(range(400_000), pa.int64())})
    result = po.Pipeline(table, time="t").experimental_parametric("stateless", cost_us=1.0).run(threads="auto")
    result.to_arrow()
    return result


def test_plot_thread_levels_writes_a_png_of_the_run(tmp_path):
    result = _auto_run()
    levels = result.stats()["thread_levels"]
    assert levels, "a run of several 100 ms periods reports levels"
    path = tmp_path / "levels.png"
    po.plot_thread_levels(result, str(path), title="one run", others=[("its stats", result.stats()),
                                                                      ("its levels", levels)])
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000


def test_plot_thread_levels_refuses_what_holds_no_levels(tmp_path):
    with pytest.raises(ValueError, match="no thread levels"):
        po.plot_thread_levels({"operators": []}, str(tmp_path / "x.png"))
    with pytest.raises(ValueError, match=r"thread level 0 lacks \['tuples_per_s'\]"):
        po.plot_thread_levels([{"at_ns": 1, "threads": 2}], str(tmp_path / "x.png"))
