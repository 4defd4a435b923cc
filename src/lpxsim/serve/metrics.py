"""Prometheus metrics of the live endpoint (`/metrics`), in one registry per server.

Latencies are *simulated* seconds (served wall seconds divided by the time scale), so they read as the
rack would answer at time scale 1; `lpxsim_time_scale` says what the wall clock was stretched by.
Gauges (queue depth, running sequences, KV occupancy, sessions resident) are read from the simulation
when scraped.
"""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

# 50 us .. ~100 s, about x2 apart: LPX token times are sub-millisecond, long prefills take seconds
LATENCY_BUCKETS = tuple(5e-5 * 2 ** i for i in range(22))
LAG_BUCKETS = (1e-4, 2.5e-4, 5e-4, 1e-3, 2e-3, 5e-3, 1e-2, 2.5e-2, 5e-2, 0.1, 0.25, 1.0)


class ServeMetrics:
    """Counters, histograms and gauges of one server."""

    def __init__(self, time_scale: float) -> None:
        r = self.registry = CollectorRegistry()
        self.requests = Counter("lpxsim_requests", "Requests answered, by endpoint and outcome",
                                ["endpoint", "outcome"], registry=r)
        self.prompt_tokens = Counter("lpxsim_prompt_tokens", "Prompt tokens of admitted requests", registry=r)
        self.cached_tokens = Counter("lpxsim_prefix_cached_tokens", "Prompt tokens served from the prefix cache",
                                     registry=r)
        self.generation_tokens = Counter("lpxsim_generation_tokens", "Output tokens sent", registry=r)
        self.ttft = Histogram("lpxsim_time_to_first_token_seconds", "Time to first token (simulated seconds)",
                              buckets=LATENCY_BUCKETS, registry=r)
        self.itl = Histogram("lpxsim_inter_token_latency_seconds", "Gap between tokens (simulated seconds)",
                             buckets=LATENCY_BUCKETS, registry=r)
        self.e2e = Histogram("lpxsim_e2e_request_latency_seconds", "Request latency (simulated seconds)",
                             buckets=LATENCY_BUCKETS, registry=r)
        self.loop_lag = Histogram("lpxsim_event_loop_lag_seconds", "How late the server's event loop wakes "
                                  "(wall seconds)", buckets=LAG_BUCKETS, registry=r)
        self.in_flight = Gauge("lpxsim_requests_in_flight", "Requests being answered", registry=r)
        Gauge("lpxsim_time_scale", "Wall seconds per simulated second", registry=r).set(time_scale)
        self._gauges: list[tuple[Gauge, Callable[[], float]]] = []
        for name, doc in (("lpxsim_queue_depth", "Requests waiting for admission on a worker"),
                          ("lpxsim_running_sequences", "Sequences prefilling or decoding"),
                          ("lpxsim_kv_occupancy_ratio", "KV bytes in use over KV capacity, whole fleet"),
                          ("lpxsim_sessions_resident", "Conversations (of the 4,096 most recent) with KV resident on a worker"),
                          ("lpxsim_simulated_time_seconds", "The simulation's clock")):
            self._gauges.append((Gauge(name, doc, registry=r), lambda: 0.0))

    def bind(self, **sources: Callable[[], float]) -> None:
        """Read the gauges from the simulation: queue_depth, running_sequences, kv_occupancy_ratio,
        sessions_resident, simulated_time_seconds."""
        out = []
        for g, _ in self._gauges:
            key = g._name.removeprefix("lpxsim_")
            out.append((g, sources.get(key, lambda: 0.0)))
        self._gauges = out

    def render(self) -> bytes:
        for g, read in self._gauges:
            g.set(read())
        return generate_latest(self.registry)
