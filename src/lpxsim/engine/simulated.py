"""The engine's question answered by the serving simulator, on exactly the engine's deployment.

The steady state (`engine.answer`) is the engine's answer for speed; this runs the event simulator on the same
replica step model, the same load and workload, so that the two can be compared (tests/test_engine_queueing.py
holds them within 5 % per-user speed, 3 % aggregate, 10 % TTFT on a stated grid) and so that the cases the
steady state cannot answer are answered by the simulator.

A closed loop starts with every user arriving at once and ends with the last users running alone: the first
and the last round of requests are left out, so the statistics are the loop's steady state.

A session workload runs as the simulator's agentic sessions (`serving.workload.session_workload`), one session
per user, with the workload's new tokens, output and think time: `sim_session` starts it `turns - 1` turns
before the asked context, so its last turn is the request the engine answers. The statistics are over the
later turns (the first prefills its whole input: `Answer.ttft_first_turn_s`); the simulator keeps the KV under
its default retention policy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from lpxsim.engine.deployment import Placed
from lpxsim.engine.query import Load, Workload

ROUNDS = 6  # requests per user; the first and the last round are warm-up and drain
# The prefix cache's unit in the engine check: fine enough that the partly filled unit a later turn prefills again
# stays within the check's TTFT tolerance at 10K (512, the simulator's default, adds ~256 tokens to 2,000 new)
CHECK_BLOCK_TOKENS = 64
SESSION_TURNS = 3  # turns per simulated session: one cold first turn, then later turns with the prefix cached


@dataclass(frozen=True)
class Simulated:
    """The simulator's statistics over the loop's steady rounds (same definitions as `engine.answer`)."""

    tok_s_user: float  # mean over requests of 1 / TPOT
    ttft_s: float  # mean
    tpot_s: float  # mean
    tok_s_total: float  # output tok/s of the deployment
    requests: int  # requests the statistics are over
    e2e_s: float = math.nan  # mean


def sim_session(workload: Workload, turns: int = SESSION_TURNS):
    """The session shape the simulator runs for a session workload: its new tokens, think time and output, the
    last of `turns` turns at the workload's ISL (fewer turns where the context is too short for them)."""
    from lpxsim.engine.query import SessionShape

    shape = workload.session
    grow = shape.new_tokens + workload.osl
    turns = max(1, min(turns, 1 + (workload.isl - 1) // grow))
    return SessionShape(first_isl=workload.isl - (turns - 1) * grow, new_tokens=shape.new_tokens, turns=turns,
                        think_s=shape.think_s)


def sim_workload(workload: Workload, users: int, requests_per_user: int, name: str, block_tokens: int = 512):
    """The simulator's closed loop of `users` for an engine workload: the synthetic no-cache loop
    (`requests_per_user` requests each), or one agentic session per user (`sim_session`, that many turns).
    `block_tokens`: the prefix cache's unit; a later turn also prefills the previous output's last, partly
    filled unit (the engine's answer counts only the new tokens: token-granular, as SGLang's radix cache)."""
    if workload.session is None:
        return {"name": name, "kind": "synthetic", "num_requests": users * requests_per_user,
                "arrival": {"process": "closed", "concurrency": users}, "isl": workload.isl, "osl": workload.osl}
    from lpxsim.serving.workload import Dist, session_workload

    cfg = session_workload(sim_session(workload, requests_per_user), sessions=users, osl=workload.osl,
                           concurrency=users, name=name, hash_block_tokens=block_tokens)
    if workload.think_s <= 0:
        return cfg
    # Tool times vary (examples/workloads/agentic-sessions.yaml: exponential): a fixed think time would keep
    # sessions that start together arriving together every turn, queueing behind each other's prefills -- an
    # artefact of the synthetic start, not of serving. The mean is the workload's think time.
    think = Dist(kind="exponential", mean=workload.think_s)
    return cfg.model_copy(update={"session": cfg.session.model_copy(update={"think_s": think})})


def later_turns(df):
    """The requests of sessions' later turns (those the engine answers), or every request outside sessions."""
    return df[(df["turn"] > 0) | (df["session"] < 0)] if "turn" in df.columns else df


def simulate_answer(placed: Placed, workload: Workload, load: Load, rounds: int = ROUNDS, seed: int = 0,
                    sessions_per_user: int = 1) -> Simulated:
    """Simulate `load.concurrency` closed-loop users of `workload` on `placed` (every replica one worker).

    A session workload runs `sessions_per_user` sessions a user, one after another (`rounds` turns each;
    `session_statistics`); more than one lets sessions beyond what the deployment holds wait their turn in a
    steady state, as they do past the KV ceiling."""
    from lpxsim.serving import simulate
    from lpxsim.serving.backends import pinned_step_model
    from lpxsim.serving.config import load_fleet

    users = int(load.concurrency)
    dep = placed.deployment
    pool = {"name": "engine", "system": dep.system, "backend": "auto", "model": placed.model.name,
            "role": "aggregated", "workers": dep.replicas, "chips_per_worker" if _is_lpu(dep.system)
            else "gpus_per_worker": dep.chips}
    fleet = load_fleet({"name": "engine-deployment", "pools": [pool],
                        "scheduler": {"token_budget": 8192, "max_batch": max(256, users)}})
    wl = sim_workload(workload, users, rounds, "engine-check", block_tokens=CHECK_BLOCK_TOKENS)
    if workload.session is not None and sessions_per_user > 1:
        wl = wl.model_copy(update={"num_requests": users * sessions_per_user})
    with pinned_step_model(fleet.pools[0], placed.step):
        res = simulate(fleet, wl, seed=seed)
    df = res.requests.sort_values("arrival_s").reset_index(drop=True)
    if workload.session is not None:  # the statistics of the shape it ran (its turns, so its think a turn)
        ran = Workload(workload.isl, workload.osl, sim_session(workload, rounds))
        return session_statistics(df[df["status"] == "completed"], users, ran)
    steady = df.iloc[users:len(df) - users] if rounds > 2 else df
    # Little's law on the closed loop (no think time): each user's cycle is its request's E2E, so the deployment
    # completes users / mean(E2E) requests per second (robust to the rounds' arrivals bunching together).
    e2e = float(steady["e2e_s"].mean())
    total = users * workload.osl / e2e if e2e > 0 else math.nan
    return Simulated(float(steady["tok_s_user"].mean()), float(steady["ttft_s"].mean()),
                     float(steady["tpot_s"].mean()), float(total), len(steady), e2e)


def session_statistics(done, users: int, workload: Workload) -> Simulated:
    """The engine's statistics of a session workload from the simulator's completed turns `done`.

    The engine answers a later turn (its first prefills everything: `Answer.ttft_first_turn_s`), and where more
    sessions come than the deployment holds, the others wait for a held one to end: the wait falls on their
    first turns, and the engine spreads it over all turns (`ttft_wait_s`). So: per-user speed and TPOT are the
    later turns' means; a first turn's wait is its TTFT less the first-turn prefill alone (the least first-turn
    TTFT of the run, whose first turns are all alike); TTFT is the later turns' mean plus the waits per turn;
    the aggregate is Little's law over each user's cycle (a later turn, its share of the waits, the mean think
    time a turn: `Workload.think_per_turn_s` of `workload`, the shape the simulator ran). With one session a user every session starts at once and first turns queue for the prefill
    (start-up, not the steady state): only users running sessions one after another (`simulate_answer`'s
    `sessions_per_user` >= 3) give waits, over the sessions between the first and the last `users`."""
    if "turn" not in done.columns:
        raise ValueError("session statistics need the simulator's session and turn columns")
    sid = done["session"]
    steady = done[(sid >= users) & (sid < sid.max() + 1 - users)] if sid.max() + 1 >= 3 * users else done
    later = steady[steady["turn"] > 0]
    first = done[done["turn"] == 0]
    waits = 0.0
    if len(steady) < len(done):  # sessions one after another: their first turns' waits are the steady state's
        own = float(first["ttft_s"].min())
        waits = float((steady.loc[steady["turn"] == 0, "ttft_s"] - own).clip(lower=0).sum())
    wait = waits / max(1, len(steady))
    e2e = float(later["e2e_s"].mean()) + wait
    total = users * workload.osl / (e2e + workload.think_per_turn_s) if e2e > 0 else math.nan
    return Simulated(float(later["tok_s_user"].mean()), float(later["ttft_s"].mean()) + wait,
                     float(later["tpot_s"].mean()), float(total), len(steady), e2e)


def _is_lpu(system: str) -> bool:
    from lpxsim.catalog import get_system

    return get_system(system).is_lpu
