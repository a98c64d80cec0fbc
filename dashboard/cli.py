"""`ldp dashboard`: arguments and command, importable without Apache Beam."""
from __future__ import annotations

import argparse
import sys

from ldp_telemetry.dashboard.pages import DEFAULT_TOP_K
from ldp_telemetry.dashboard.server import DEFAULT_HOST, DEFAULT_PORT
from ldp_telemetry.ldp.base.errors import ConfigError
from ldp_telemetry.output.atomic import check_writable_folder

#: Shortest polling period a live page may be given, in seconds.
MIN_POLL_S = 0.2


def add_dashboard_arguments(parser: argparse.ArgumentParser) -> None:
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--store", metavar="URL",
                        help="an estimate store: sqlite:///FILE.db or postgresql://USER@HOST/DB")
    source.add_argument("--output", metavar="DIR",
                        help="a job's output folder, followed as files grow: a batch job's "
                             "estimates-*.jsonl and dead_letters-*.jsonl, or a live run's "
                             "panes.log, dead_letters/ and too_late.jsonl")
    parser.add_argument("--host", default=DEFAULT_HOST,
                        help=f"address to listen on (default {DEFAULT_HOST}: this machine only)")
    parser.add_argument("--allow-host", action="append", default=[], metavar="NAME",
                        help="another name the server may be reached by (the Host header; "
                             "repeatable): requests naming any other host than the bound "
                             "address, localhost, 127.0.0.1, [::1] or --host get 421")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT,
                        help=f"port (default {DEFAULT_PORT}; 0 picks a free one)")
    parser.add_argument("--top", type=int, default=DEFAULT_TOP_K, metavar="K",
                        help=f"values in the top-k chart (default {DEFAULT_TOP_K})")
    parser.add_argument("--poll", type=float, default=2.0, metavar="SECONDS",
                        help="how often a live page asks for new panes (default 2)")
    parser.add_argument("--export", metavar="DIR", default=None,
                        help="write the pages as static files into DIR instead of serving")


def run_dashboard(args: argparse.Namespace, out=sys.stdout) -> int:
    """Export the pages (`--export`) or serve them until interrupted."""
    from ldp_telemetry.dashboard.server import Dashboard, make_server
    from ldp_telemetry.dashboard.source import open_source
    if args.poll < MIN_POLL_S:
        raise ConfigError(f"poll must be at least {MIN_POLL_S} seconds, got {args.poll}", "poll")
    if args.export:
        check_writable_folder(args.export, "export")
    source = open_source(args.store, args.output)
    for note in getattr(source, "notes", ()):
        print(note, file=out)
    try:
        dashboard = Dashboard(source, args.top, int(args.poll * 1000))
        if args.export:
            written = dashboard.export(args.export)
            print(f"{len(written)} files written to {args.export}; open "
                  f"{args.export}/index.html", file=out)
            return 0
        try:
            server = make_server(dashboard, args.host, args.port,
                                 tuple(getattr(args, "allow_host", ())))
        except OSError as error:  # in use, not ours to bind, or no such address
            raise ConfigError(f"port {args.port} on {args.host} cannot be served: "
                              f"{error.strerror or error}", "port") from None
        host, port = server.server_address[:2]
        print(f"dashboard: http://{host}:{port}/  (Ctrl-C stops it)", file=out, flush=True)
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            pass
        finally:
            server.server_close()
        return 0
    finally:
        source.close()
