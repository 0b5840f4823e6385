"""The command line: ``python -m pyarrow_ops demo`` (the benchmarks are ``python -m benchmarks.<name>``, from
the repository)."""

from __future__ import annotations

import argparse
import signal
import sys


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text}")
    return value


def _demo(args: argparse.Namespace) -> int:
    from pyarrow_ops.demo import run

    return run(rows=args.rows, meters=args.meters, inputs=args.inputs, seed=args.seed, preview=args.preview,
               repeat=args.repeat)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pyarrow_ops", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser(
        "demo", help="generated smart-meter streams: merge, sliding-window aggregation next to Polars, a pipeline")
    demo.add_argument("--rows", type=_positive, default=2_000_000)
    demo.add_argument("--meters", type=_positive, default=10_000)
    demo.add_argument("--inputs", type=_positive, default=8, help="data concentrators (inputs)")
    demo.add_argument("--seed", type=int, default=0)
    demo.add_argument("--preview", type=_positive, default=8, help="rows to show")
    demo.add_argument("--repeat", type=_positive, default=3,
                      help="interleaved rounds; the best of each contender counts")
    demo.set_defaults(run=_demo)
    args = parser.parse_args(argv)
    try:
        return args.run(args)
    except KeyboardInterrupt:
        # Ctrl-C during a Polars query raises KeyboardInterrupt there and trips Python's handler once more
        # (pola-rs/polars#23988), so a second one arrives at the next call: ignore Ctrl-C from here on.
        # signal.signal first runs what is pending with the old handler, hence the second try.
        try:
            signal.signal(signal.SIGINT, signal.SIG_IGN)
        except KeyboardInterrupt:
            signal.signal(signal.SIGINT, signal.SIG_IGN)
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
