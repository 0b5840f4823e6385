"""The command line: ``python -m pyarrow_ops demo | bench``."""

from __future__ import annotations

import argparse
import sys
import time

import polars as pl


def _demo(args: argparse.Namespace) -> int:
    from pyarrow_ops import merge
    from pyarrow_ops.datasets import smart_meter_readings

    print(
        f"pyarrow-ops demo: {args.rows:,} smart-meter readings from {args.meters:,} meters, "
        f"received by {args.inputs} data concentrators (seed {args.seed})"
    )
    t0 = time.perf_counter()
    tables = smart_meter_readings(
        rows=args.rows, meters=args.meters, concentrators=args.inputs, seed=args.seed
    )
    print(f"generated {len(tables)} time-sorted inputs in {time.perf_counter() - t0:.2f} s")

    t0 = time.perf_counter()
    merged = merge(tables, time="time").to_arrow()
    seconds = time.perf_counter() - t0
    print(
        f"merged {merged.num_rows:,} tuples from {len(tables)} inputs in {seconds * 1000:.1f} ms: "
        f"{merged.num_rows / seconds / 1e6:.2f} M tuples/s ({merged.num_rows / seconds:,.0f} tuples/s)"
    )

    df = pl.from_arrow(merged, rechunk=False)
    assert isinstance(df, pl.DataFrame)
    in_order = df.select(
        (pl.col("time").diff().dt.total_milliseconds().fill_null(0) >= 0).all()
    ).item()
    print(f"output sorted by time: {in_order}; rows in = rows out: {merged.num_rows == args.rows}")
    with pl.Config(tbl_rows=args.preview, tbl_cols=-1, tbl_width_chars=140):
        print(df.head(args.preview))
    per_input = df.group_by("concentrator").len().sort("concentrator").rows()
    print("readings per concentrator: " + ", ".join(f"{c}: {n:,}" for c, n in per_input))
    return 0


def _bench(args: argparse.Namespace) -> int:
    from pyarrow_ops.bench import compare_merge

    print(f"merge throughput, {args.rows:,} tuples, median of {args.repeat} runs each")
    print(f"{'inputs':>6}  {'pyarrow-ops t/s':>16}  {'polars concat+sort t/s':>22}  {'ratio':>6}  identical")
    for r in compare_merge(rows=args.rows, inputs=args.inputs, repeat=args.repeat, seed=args.seed):
        print(
            f"{r.inputs:>6}  {r.engine_tuples_per_s:>16,.0f}  {r.polars_tuples_per_s:>22,.0f}  "
            f"{r.speedup:>6.2f}  {r.identical}"
        )
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pyarrow_ops", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="merge generated smart-meter streams; print a preview")
    demo.add_argument("--rows", type=int, default=2_000_000)
    demo.add_argument("--meters", type=int, default=10_000)
    demo.add_argument("--inputs", type=int, default=8, help="data concentrators (inputs)")
    demo.add_argument("--seed", type=int, default=0)
    demo.add_argument("--preview", type=int, default=8, help="rows to show")
    demo.set_defaults(run=_demo)
    bench = sub.add_parser("bench", help="merge throughput against polars, as a ratio")
    bench.add_argument("--rows", type=int, default=2_000_000)
    bench.add_argument("--inputs", type=int, nargs="+", default=[4, 20])
    bench.add_argument("--repeat", type=int, default=5)
    bench.add_argument("--seed", type=int, default=0)
    bench.set_defaults(run=_bench)
    args = parser.parse_args(argv)
    try:
        return args.run(args)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
