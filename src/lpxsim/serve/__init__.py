"""The live endpoint: `lpxsim serve`, an OpenAI-compatible HTTP server timed by the fleet's event simulation.

Rooms: `app` (routes, streaming answers), `bridge` (the wall clock <-> `serving.online.OnlineSimulation`),
`tokens` (prompt counting, the output filler, conversations), `schemas` (request bodies), `errors`
(OpenAI-style error objects), `metrics` (Prometheus), `server` (uvicorn, warm-up, signals).

    from lpxsim.serve.server import ServeOptions, run
    run(load_fleet("examples/fleets/lpx-alone.yaml"), ServeOptions(time_scale=20))
"""
