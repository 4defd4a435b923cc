"""T9: what each heterogeneous serving mode buys, against Rubin alone and LPX alone.

Every mode (`lpxsim.engine.fleets.MODES`) serves the same closed-loop workload
-- `users` concurrent users, each sending a `context`-token prompt and reading
`osl` output tokens, then sending the next -- on the detailed backends only (the
GPU model; compiled LPX programs). Rubin alone and LPX alone are the engine's
answer (`lpxsim.engine.answer`) on each system's default deployment, the one
`estimate` and `sweep` answer on; the heterogeneous modes run in the serving
simulator, their LPX pools sized by the engine's rule. One row per
(mode, context, load) with per-user speed P50 and P10, TTFT P90, output tok/s
per MW (power-normalised, so fleets of different power compare), and the P50
speed relative to Rubin alone and to LPX alone at the same context and load.

The workload is by default an agentic session at each context (`engine.query.default_session`: each user is
an agent whose turn adds 2,000 new tokens to its cached context and who spends 3 s on a tool call between
turns, its KV held): the engine answers its later turns, and the simulator runs the same shape as one session
per user (`engine.simulated.sim_workload`: a cold first turn, then later turns, statistics over the later ones).
`session="none"` is the old no-cache closed loop, in which every finished user immediately sends a fresh prompt,
so at 100K context every turn re-prefills 100K tokens: under heavy load prefill dominates and TTFT grows with
the queue. Every row names its workload (`session`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from lpxsim.core.errors import UserError
from lpxsim.engine.query import DEFAULT_OSL

LOADS = {"light": 8, "heavy": 64}  # concurrent users of the whole fleet
DEFAULT_CONTEXTS = (10_000, 32_000, 100_000)

REQUESTS_PER_USER = 2  # each user's requests simulated in the no-cache loop (kept small: the tour's budget)
SOLVER_NOTE = ("Rubin alone and LPX alone: the engine's steady state on each system's default deployment (every "
               "request alike: P10 = P50 = mean); the Rubin + LPX modes: the serving simulator")
COLLAPSE_NOTE = ("closed loop: every user re-prefills its whole context on every turn (no prefix reuse), so at "
                 "100K context and heavy load prefill dominates: TTFT grows with the queue and per-user speed "
                 "falls")
SESSION_NOTE = ("agentic sessions: each user is an agent whose turn adds {new:,} new tokens to its cached context "
                "and who spends {think:g} s on a tool call between turns, its KV held; the figures are its later "
                "turns (a session's first turn prefills its whole context), and sessions beyond the KV wait for a "
                "held one to end: in the engine's rows (Rubin alone, LPX alone) that wait is in TTFT, the mean over "
                "a session's turns; in the simulated rows it falls on sessions' first turns "
                "(ttft_first_turn_p50_s), while their TTFT P90 is the later turns'")


def workload_note(session: str) -> str:
    """What the modes' rows measure: the agentic session, or the no-cache loop."""
    from lpxsim.engine.query import DEFAULT_NEW_TOKENS, DEFAULT_THINK_S

    return COLLAPSE_NOTE if session == "none" else SESSION_NOTE.format(new=DEFAULT_NEW_TOKENS, think=DEFAULT_THINK_S)


@dataclass(frozen=True)
class ModesQuery:
    """What to compare: a model at each context and load."""

    model: str
    contexts: tuple[int, ...] = DEFAULT_CONTEXTS
    loads: tuple[str, ...] = ("light", "heavy")
    osl: int = DEFAULT_OSL
    modes: tuple[str, ...] = ()
    seed: int = 0
    weights: str = "fp8"
    kv: str = "bf16"
    session: str = "agentic"  # "agentic": the default session at each context; "none": the no-cache loop

    def __post_init__(self) -> None:
        # a context, load or mode given twice is one question: its rows would repeat and share one key
        for name in ("contexts", "loads", "modes"):
            object.__setattr__(self, name, tuple(dict.fromkeys(getattr(self, name))))

    def workload(self, context: int):
        """The engine workload at `context` (`engine.query.session_for`)."""
        from lpxsim.engine.query import Workload, session_for

        return Workload(context, self.osl, session_for(self.session, context, self.osl))


def parse_loads(text: str) -> tuple[str, ...]:
    """'light,heavy' or user counts ('8,64'): each a named load or a positive integer."""
    out = []
    for part in (p.strip() for p in text.split(",") if p.strip()):
        if part not in LOADS and not (part.isascii() and part.isdigit() and len(part) <= 8 and int(part) > 0):
            raise UserError("loads", f"expected light, heavy or a user count, got {part!r}")
        out.append(part)
    if not out:
        raise UserError("loads", "give at least one load")
    return tuple(out)


def users_of(load: str) -> int:
    return LOADS[load] if load in LOADS else int(load)


# Single-system modes are the engine's answer on that system's default deployment (the same one `estimate`
# and `sweep` answer on); the heterogeneous modes have no steady state and are simulated.
ENGINE_MODES = {"rubin-alone": "vr-nvl72", "lpx-alone": "lpx"}


def _row(mode: str, context: int, load: str, res, wl, weights: str = "fp8") -> dict:
    """A simulated mode's row. For sessions the per-user figures are the later turns' (as the engine answers);
    fleet tok/s and per MW are the whole run's, first turns and think time included. Its band is its pools'
    (`engine.bands.mixed_bands`: the widest part's)."""
    from lpxsim.engine.bands import mixed_bands, path_for
    from lpxsim.engine.fleets import fleet_hardware

    s = res.summary
    speed, ttft = s["tok_s_user"], s["ttft_s"]
    extra = {}
    if wl.session is not None:
        import numpy as np

        from lpxsim.engine.simulated import later_turns

        done = later_turns(res.requests[res.requests["status"] == "completed"])
        if len(done):
            tok, t = done["tok_s_user"].to_numpy(), done["ttft_s"].to_numpy()
            speed = {"p50": float(np.percentile(tok, 50)), "p10": float(np.percentile(tok, 10))}
            ttft = {"p90": float(np.percentile(t, 90)), "mean": float(t.mean())}
        first = s.get("ttft_by_turn", {}).get("first", {})
        extra = {"ttft_first_turn_p50_s": first.get("p50", math.nan), "evictions": s.get("evictions", math.nan),
                 "sessions_resident_max": s.get("sessions_resident_max", math.nan),
                 "prefix_hit_rate": s.get("prefix_hit_rate", math.nan)}
    chips = float(res.pools["chips"].sum())
    parts = [(r.system, path_for(r.system, weights)) for r in res.pools.itertuples()]
    bands = mixed_bands(parts, {"tok_s_user": speed.get("p50", math.nan), "ttft": ttft.get("p90", math.nan),
                                "tok_s_per_chip": s["fleet_tok_s"] / chips if chips > 0 else None})
    return {
        "mode": mode, "context": context, "load": load, "users": users_of(load),
        "tok_s_user_p50": speed.get("p50", math.nan), "tok_s_user_p10": speed.get("p10", math.nan),
        "ttft_p90_s": ttft.get("p90", math.nan), "tok_s_per_mw": s["tok_s_per_mw"],
        "fleet_tok_s": s["fleet_tok_s"], "power_kw": s["power_w"] / 1e3, "hardware": fleet_hardware(res),
        "mean_concurrency": s["mean_concurrency"], "completed": s["completed"],
        "solver": "serving simulator (closed loop)", "osl": None, "ttft_s": ttft.get("mean", math.nan),
        "session": wl.label(), **extra, **bands,
    }


def _engine_row(mode: str, context: int, load: str, a) -> dict:
    """A single-system mode from the engine: every request of a steady state is alike (P10 = P50 = mean)."""
    return {
        "mode": mode, "context": context, "load": load, "users": users_of(load),
        "tok_s_user_p50": a.tok_s_user, "tok_s_user_p10": a.tok_s_user, "ttft_p90_s": a.ttft_s,
        "tok_s_per_mw": a.tok_s_per_mw, "fleet_tok_s": a.tok_s_total, "power_kw": a.power_w / 1e3,
        # `hardware` in the fleet rows' form ('72 vr-nvl72, 200 kW', what the economics parse); the deployment
        # with its layout and replicas beside it
        "hardware": f"{a.deployment.powered_chips} {a.deployment.system}, {a.power_w / 1e3:,.0f} kW",
        "deployment": a.deployment.label(), "mean_concurrency": float(a.streams_admitted), "completed": math.nan,
        "solver": a.solver, "osl": a.workload.osl, "ttft_s": a.ttft_s, "label": a.label(), "needs": a.needs,
        "session": a.workload.label(), "streams_decoding": a.streams_decoding,
        "ttft_first_turn_p50_s": a.ttft_first_turn_s if a.workload.session else math.nan, **a.bands(),
    }


def _engine_answer(q: ModesQuery, mode: str, context: int, users: int):
    from lpxsim.engine.answer import answer
    from lpxsim.engine.deployment import Precision
    from lpxsim.engine.query import Load

    return answer(q.model, None, q.workload(context), Load(concurrency=users), system=ENGINE_MODES[mode],
                  precision=Precision(q.weights, q.kv))


def compare_modes(q: ModesQuery, progress=None) -> pd.DataFrame:
    """One row per (context, load, mode), with P50 speed relative to Rubin alone and LPX alone."""
    from lpxsim.engine.fleets import MODES, builtin_fleet, simulate_fleet
    from lpxsim.engine.simulated import SESSION_TURNS, sim_workload

    modes = q.modes or MODES
    for m in modes:
        if m not in MODES:
            raise UserError("modes", f"unknown mode {m!r}; expected one of {', '.join(MODES)}")
    if any(c <= 0 for c in q.contexts):
        raise UserError("contexts", f"expected positive contexts, got {q.contexts}")
    rows = []
    # one deployment per mode and context, compiled for that request length and the heaviest load
    heaviest = max(users_of(x) for x in q.loads)
    for context in q.contexts:
        size = {"context": context + q.osl, "users": heaviest, "osl": q.osl}
        ewl = q.workload(context)
        for load in q.loads:
            n = users_of(load)
            per_user = REQUESTS_PER_USER if ewl.session is None else SESSION_TURNS
            wl = sim_workload(ewl, n, per_user, f"closed-{n}x{context}")
            for mode in modes:
                if mode in ENGINE_MODES:
                    rows.append(_engine_row(mode, context, load, _engine_answer(q, mode, context, n)))
                else:
                    res = simulate_fleet(builtin_fleet(mode, q.model, **size), wl, seed=q.seed)
                    rows.append({**_row(mode, context, load, res, ewl, q.weights), "osl": q.osl})
                if progress is not None:
                    progress(mode, context, load)
    df = pd.DataFrame(rows)
    return with_relative(df)


def with_relative(df: pd.DataFrame) -> pd.DataFrame:
    """Add P50 speed and tok/s per MW relative to Rubin alone and LPX alone at the same context and load."""
    out = df.copy()
    for base, tag in (("rubin-alone", "rubin"), ("lpx-alone", "lpx")):
        ref = df[df["mode"] == base].set_index(["context", "load"])
        for col, short in (("tok_s_user_p50", "speed"), ("tok_s_per_mw", "per_mw")):
            if ref.empty:
                out[f"{short}_vs_{tag}"] = math.nan
                continue
            vals = [ref[col].get((r.context, r.load), math.nan) for r in df.itertuples()]
            out[f"{short}_vs_{tag}"] = out[col].to_numpy() / pd.Series(vals, dtype=float).to_numpy()
    return out


KEY_COLUMNS = ["mode", "context", "load", "users", "tok_s_user_p50", "tok_s_user_p10", "ttft_p90_s",
               "tok_s_per_mw", "speed_vs_rubin", "speed_vs_lpx", "per_mw_vs_rubin", "per_mw_vs_lpx",
               "hardware", "power_kw", "fleet_tok_s", "mean_concurrency", "completed"]


def ordered(df: pd.DataFrame) -> pd.DataFrame:
    """The key columns first (mode, context, load, the four answers), then the rest."""
    first = [c for c in KEY_COLUMNS if c in df.columns]
    return df[first + [c for c in df.columns if c not in first]]
