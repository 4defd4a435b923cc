"""`lpxsim serve`: an OpenAI-compatible endpoint whose tokens leave at the fleet's simulated times."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from lpxsim.cli.common import emit_json
from lpxsim.cli.validate import count_option, real_option, seed_option, tokens_option
from lpxsim.core import inputs
from lpxsim.core.errors import UserError


def register(app: typer.Typer) -> None:
    @app.command("serve")
    def serve_cmd(
        fleet: str = typer.Option(..., "--fleet", help="fleet YAML (see examples/fleets/) or a built-in mode: "
                                  "rubin-alone, lpx-alone, rubin-lpx-pd, rubin-lpx-afd, rubin-lpx-drafter"),
        model: str = typer.Option("gemma-4-31b", "--model", help="model of a built-in fleet (ignored for files)"),
        host: str = typer.Option("127.0.0.1", "--host", help="address to listen on (anything but loopback "
                                 "prints a warning: the endpoint is meant for this machine)"),
        port: int = count_option(8000, "--port", help="TCP port (0: any free port)", lo=0, hi=65535, human=False),
        time_scale: float = real_option(1.0, "--time-scale", help="wall seconds per simulated second (10: "
                                        "everything 10x slower, so sub-ms token times show over HTTP)",
                                        lo=1e-3, hi=1e6),
        api_key: str | None = typer.Option(None, "--api-key", envvar="LPXSIM_API_KEY",
                                           help="require 'Authorization: Bearer KEY' on /v1 (env LPXSIM_API_KEY)"),
        max_body: int = count_option(16 << 20, "--max-body-bytes", help="largest request body accepted",
                                     lo=1024, hi=1 << 30, human=False),
        default_max_tokens: int = tokens_option(256, "--default-max-tokens",
                                                help="output tokens of a request that gives no max_tokens"),
        unit: int = tokens_option(64, "--prefix-unit", help="tokens per prefix-cache unit (hash block)",
                                  hi=1 << 16),
        warm_context: int = tokens_option(32_768, "--warm-context", help="price (compile) step shapes up to "
                                          "this context before reporting ready"),
        timeline: Path | None = typer.Option(None, "--timeline", help="on exit, write the serving timeline as a "
                                             "Chrome trace (open in ui.perfetto.dev)"),
        seed: int = seed_option(0),
        as_json: bool = typer.Option(False, "--json", help="on exit, print one JSON object (address, requests)"),
    ) -> None:
        """Serve /v1/chat/completions and /v1/completions timed by the fleet's event simulation."""
        from lpxsim.cli.simulate_cmd import _fleet
        from lpxsim.serve.server import ServeOptions, check_host, is_loopback, run
        from lpxsim.serving.config import load_fleet

        if not host:
            raise UserError("host", "expected an address to listen on")
        check_host(host)
        if timeline is not None:
            inputs.check_output_file(timeline, "timeline", reads={"fleet": fleet})
        fleet_cfg = load_fleet(_fleet(fleet, model))
        opts = ServeOptions(host=host, port=port, time_scale=time_scale, seed=seed, api_key=api_key,
                            max_body_bytes=max_body, default_max_tokens=default_max_tokens, unit_tokens=unit,
                            warm_context=warm_context, timeline=timeline, settle_gc=True)

        def listening(address: str) -> None:
            if not is_loopback(host):  # said once the address is bound: a bind that fails is its error line alone
                print(f"warning: listening on {host}, not loopback: anyone who can reach this address can use the "
                      f"endpoint{'' if api_key else ' (no --api-key set)'}", file=sys.stderr, flush=True)
            print(f"lpxsim serve: {fleet_cfg.name} on {address}/v1 (time scale {time_scale:g}); warming up",
                  file=sys.stderr, flush=True)

        summary = run(fleet_cfg, opts, on_listening=listening)
        if as_json:
            emit_json(summary)
        else:
            print(f"lpxsim serve: stopped; requests {summary['requests']}", file=sys.stderr)
