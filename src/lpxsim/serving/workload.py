"""Workloads: synthetic (Poisson, gamma or closed-loop arrivals), agentic sessions, and trace replay.

A workload yields requests in arrival order (`arrivals`) and may create
follow-up requests when one completes (`on_complete`): the next request of a
closed-loop user, or the next turn of an agentic session. All randomness comes
from the run's one generator, drawn in a fixed order, so a seed fixes the run.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Literal

import numpy as np
from pydantic import AliasChoices, BaseModel, ConfigDict, Field, ValidationError, model_validator

from lpxsim.core.benchmark_client import BENCHMARK_RANGE_RATIO
from lpxsim.core.inputs import TOKENS_MAX  # sampled ISL/OSL are clipped to [1, TOKENS_MAX]
from lpxsim.serving.config import read_yaml, validation_error
from lpxsim.serving.request import Request

_STRICT = ConfigDict(extra="forbid", allow_inf_nan=False)  # NaN/inf: one-line error naming the field
_PARAM = 1e12  # |distribution parameter| bound: anything larger is a typo, and huge draws overflow
TURNS_MAX = 100_000  # sampled agentic turns per session are clipped to [1, TURNS_MAX]


class Dist(BaseModel):
    """A distribution of a positive quantity: fixed, uniform, lognormal, normal, exponential, beta."""

    model_config = _STRICT

    kind: Literal["fixed", "uniform", "lognormal", "normal", "exponential", "beta"] = "fixed"
    value: float | None = Field(None, ge=-_PARAM, le=_PARAM)  # fixed
    low: float | None = Field(None, ge=-_PARAM, le=_PARAM)  # uniform
    high: float | None = Field(None, ge=-_PARAM, le=_PARAM)
    median: float | None = Field(None, gt=0, le=_PARAM)  # lognormal
    sigma: float | None = Field(None, ge=0, le=10)  # lognormal (of log), normal (sd)
    mean: float | None = Field(None, ge=-_PARAM, le=_PARAM)  # normal, exponential
    a: float | None = Field(None, gt=0, le=1e6)  # beta
    b: float | None = Field(None, gt=0, le=1e6)
    min: float | None = Field(None, ge=-_PARAM, le=_PARAM)  # clip
    max: float | None = Field(None, ge=-_PARAM, le=_PARAM)

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, v):
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            return {"kind": "fixed", "value": v}
        return v

    @model_validator(mode="after")
    def _params(self) -> Dist:
        need = {"fixed": ("value",), "uniform": ("low", "high"), "lognormal": ("median", "sigma"),
                "normal": ("mean", "sigma"), "exponential": ("mean",), "beta": ("a", "b")}[self.kind]
        missing = [k for k in need if getattr(self, k) is None]
        if missing:
            raise ValueError(f"{self.kind} distribution needs {', '.join(missing)}")
        if self.kind == "uniform" and self.high < self.low:
            raise ValueError("uniform needs low <= high")
        if self.kind == "exponential" and self.mean <= 0:
            raise ValueError(f"exponential needs mean > 0, got {self.mean}")
        if self.min is not None and self.max is not None and self.max < self.min:
            raise ValueError("needs min <= max")
        return self

    def one(self, rng: np.random.Generator) -> float:
        """One draw: the value `sample(rng, 1)[0]` would give (the same draws from the generator), without
        building an array."""
        k = self.kind
        if k == "fixed":
            x = float(self.value)
        elif k == "uniform":
            x = rng.uniform(self.low, self.high)
        elif k == "lognormal":
            x = self.median * math.exp(self.sigma * rng.standard_normal())
        elif k == "normal":
            x = rng.normal(self.mean, self.sigma)
        elif k == "exponential":
            x = rng.exponential(self.mean)
        else:
            x = rng.beta(self.a, self.b)
        if self.min is not None and x < self.min:
            x = self.min
        if self.max is not None and x > self.max:
            x = self.max
        return float(x)

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        k = self.kind
        if k == "fixed":
            x = np.full(n, float(self.value))
        elif k == "uniform":
            x = rng.uniform(self.low, self.high, n)
        elif k == "lognormal":
            x = self.median * np.exp(self.sigma * rng.standard_normal(n))
        elif k == "normal":
            x = rng.normal(self.mean, self.sigma, n)
        elif k == "exponential":
            x = rng.exponential(self.mean, n)
        else:
            x = rng.beta(self.a, self.b, n)
        if self.min is not None or self.max is not None:
            x = np.clip(x, self.min, self.max)
        return x


class Arrival(BaseModel):
    model_config = _STRICT
    process: Literal["poisson", "gamma", "closed"] = "poisson"
    rate: float | None = Field(None, gt=0, le=1e9)  # requests (or sessions) per second
    # gamma: coefficient of variation of inter-arrival times; below 0.01 the gamma shape 1/cv^2 overflows
    cv: float = Field(1.0, ge=0.01, le=100)
    concurrency: int | None = Field(None, ge=1, le=10_000_000)  # closed loop: users always in flight

    @model_validator(mode="after")
    def _need(self) -> Arrival:
        if self.process == "closed" and self.concurrency is None:
            raise ValueError("closed-loop arrivals need concurrency")
        if self.process != "closed" and self.rate is None:
            raise ValueError(f"{self.process} arrivals need rate")
        return self


class RequestClass(BaseModel):
    model_config = _STRICT
    name: str
    weight: float = Field(1.0, gt=0, le=1e12)


class SharedPrefix(BaseModel):
    model_config = _STRICT
    tokens: int = Field(..., ge=1, le=TOKENS_MAX)  # leading tokens shared inside a group (system prompt)
    groups: int = Field(1, ge=1, le=1_000)


class Session(BaseModel):
    """Agentic session: each turn's prompt = previous prompt + previous output + `new_tokens` (tool output, the
    user's next message); `think_s` of tool or think time between a turn's end and the next turn's arrival.

    `context_cap`: past it the agent truncates (docs/serving.md "Sessions"): the turn keeps the newest
    `truncate_to` tokens (default: the cap), and since those tokens' KV depended on what was dropped, the turn
    prefills them all and later turns grow a new cached chain from there. The model's context window caps a
    session the same way."""

    model_config = _STRICT
    turns: Dist = Field(default_factory=lambda: Dist(kind="fixed", value=20))
    first_isl: Dist = Field(default_factory=lambda: Dist(kind="fixed", value=8000))
    new_tokens: Dist = Field(default_factory=lambda: Dist(kind="fixed", value=4000),
                             validation_alias=AliasChoices("new_tokens", "tool_tokens"))
    think_s: Dist = Field(default_factory=lambda: Dist(kind="fixed", value=2.0))
    context_cap: int | None = Field(None, ge=1, le=TOKENS_MAX)
    truncate_to: int | None = Field(None, ge=1, le=TOKENS_MAX)

    @model_validator(mode="after")
    def _truncation(self) -> Session:
        if self.truncate_to is not None and (self.context_cap is None or self.truncate_to > self.context_cap):
            raise ValueError("truncate_to needs a context_cap at least as large")
        return self


class Slo(BaseModel):
    model_config = _STRICT
    ttft_s: float = Field(2.0, gt=0, le=1e6)
    tpot_s: float = Field(0.05, gt=0, le=1e6)


class WorkloadConfig(BaseModel):
    """A workload file."""

    model_config = _STRICT
    name: str = "workload"
    kind: Literal["synthetic", "agentic", "trace"] = "synthetic"
    num_requests: int | None = Field(None, ge=1, le=10_000_000)  # synthetic: requests; agentic: sessions
    duration_s: float | None = Field(None, gt=0, le=1e9)
    arrival: Arrival = Field(default_factory=lambda: Arrival(process="poisson", rate=1.0))
    isl: Dist = Field(default_factory=lambda: Dist(kind="fixed", value=1024))
    osl: Dist = Field(default_factory=lambda: Dist(kind="fixed", value=256))
    classes: list[RequestClass] = Field(default_factory=list)
    shared_prefix: SharedPrefix | None = None
    session: Session = Field(default_factory=Session)
    acceptance: Dist = Field(default_factory=lambda: Dist(kind="beta", a=7.0, b=3.0))
    slo: Slo = Field(default_factory=Slo)
    trace: str | None = None
    rate_scale: float = Field(1.0, ge=1e-3, le=1e9)  # as --rate-scale: 1e-300 had spread a trace over 1e299 s
    trace_jitter_s: float = Field(0.0, ge=0, le=1e9)  # uniform jitter added to trace arrivals
    hash_block_tokens: int = Field(512, ge=1, le=1_000_000)

    @model_validator(mode="after")
    def _complete(self) -> WorkloadConfig:
        if self.kind == "trace" and not self.trace:
            raise ValueError("a trace workload needs trace: NAME or PATH")
        if self.kind != "trace" and self.num_requests is None and self.duration_s is None:
            raise ValueError("give num_requests or duration_s")
        return self


def load_workload(source) -> WorkloadConfig:
    raw = source if isinstance(source, dict) else read_yaml(source, "workload")
    try:
        return WorkloadConfig.model_validate(raw)
    except ValidationError as e:
        raise validation_error("workload", e) from None


# --- runtime workloads ----------------------------------------------------------------------


class Workload:
    """Base: arrival iterator + completion hook. Subclasses fill `arrivals`."""

    def __init__(self, cfg: WorkloadConfig, rng: np.random.Generator, duration_s: float | None) -> None:
        self.cfg = cfg
        self.rng = rng
        self.duration_s = duration_s if duration_s is not None else cfg.duration_s
        self.next_id = 0
        self._class_names = [c.name for c in cfg.classes]
        w = np.array([c.weight for c in cfg.classes], dtype=float)
        self._class_p = w / w.sum() if len(w) else w

    def _rid(self) -> int:
        self.next_id += 1
        return self.next_id - 1

    def _classes(self, n: int) -> list[str]:
        if not self._class_names:
            return [""] * n
        idx = self.rng.choice(len(self._class_names), size=n, p=self._class_p)
        return [self._class_names[i] for i in idx]

    def _accept(self, n: int) -> np.ndarray:
        return self.cfg.acceptance.sample(self.rng, n)

    def _in_window(self, t: float) -> bool:
        return self.duration_s is None or t <= self.duration_s

    def arrivals(self) -> Iterator[Request]:
        raise NotImplementedError

    def on_complete(self, req: Request, now: float) -> list[Request]:
        return []


def _token(x: float) -> int:
    """One sampled token count as `_tokens` makes it: rounded half to even, in [1, TOKENS_MAX]."""
    if x != x or x < 1:
        return 1
    if x >= TOKENS_MAX:
        return TOKENS_MAX
    return max(1, int(round(x)))


def _tokens(x: np.ndarray) -> np.ndarray:
    """Sampled token counts as ints in [1, TOKENS_MAX] (a wide distribution's tail is clipped, not wrapped)."""
    if len(x) == 1:  # a closed loop draws one request per completion: numpy's per-call overhead was most of it
        return np.array([_token(float(x[0]))])
    return np.clip(np.rint(np.nan_to_num(x, nan=1.0, posinf=TOKENS_MAX, neginf=1.0)), 1, TOKENS_MAX).astype(int)


def _interarrivals(arr: Arrival, rng: np.random.Generator, n: int) -> np.ndarray:
    mean = 1.0 / arr.rate
    if arr.process == "poisson":
        return rng.exponential(mean, n)
    shape = 1.0 / (arr.cv * arr.cv)
    return rng.gamma(shape, mean / shape, n)


class SyntheticWorkload(Workload):
    """Independent requests with ISL/OSL distributions; open loop (Poisson/gamma) or closed loop."""

    CHUNK = 4096

    def _batch(self, n: int, times: np.ndarray) -> list[Request]:
        cfg = self.cfg
        isl = _tokens(cfg.isl.sample(self.rng, n))
        osl = _tokens(cfg.osl.sample(self.rng, n))
        klass = self._classes(n)
        acc = self._accept(n)
        sp = cfg.shared_prefix
        groups = self.rng.integers(sp.groups, size=n) if sp else None
        out = []
        u = cfg.hash_block_tokens
        for i in range(n):
            ids: tuple[int, ...] = ()
            if sp:
                g = int(groups[i])
                shared_units = min(sp.tokens, int(isl[i])) // u
                rid_base = -(self.next_id + 1) * 1_000_003  # private (never shared) units after the prefix
                ids = tuple(10_000_000 + g * 100_000 + j for j in range(shared_units)) + tuple(
                    rid_base - j for j in range(int(isl[i]) // u - shared_units))
            r = Request(self._rid(), float(times[i]), int(isl[i]), int(osl[i]), hash_ids=ids,
                        hash_block_tokens=u, klass=klass[i])
            r.accept_rate = float(acc[i])
            out.append(r)
        return out

    def arrivals(self) -> Iterator[Request]:
        cfg = self.cfg
        if cfg.arrival.process == "closed":
            c = cfg.arrival.concurrency
            self._left = (cfg.num_requests or 1 << 62) - c
            yield from self._batch(c, np.zeros(c))
            return
        remaining = cfg.num_requests if cfg.num_requests is not None else 1 << 62
        t = 0.0
        while remaining > 0:
            n = min(self.CHUNK, remaining)
            times = t + np.cumsum(_interarrivals(cfg.arrival, self.rng, n))
            t = float(times[-1])
            for r in self._batch(n, times):
                if not self._in_window(r.arrival_s):
                    return
                yield r
            remaining -= n

    def on_complete(self, req: Request, now: float) -> list[Request]:
        if self.cfg.arrival.process != "closed" or self._left <= 0 or not self._in_window(now):
            return []
        self._left -= 1
        return self._batch(1, np.array([now]))


class AgenticWorkload(Workload):
    """Multi-turn agent sessions over a growing context (prefix-cached turn to turn)."""

    SESSION_STRIDE = 1 << 24  # prefix-unit id space per cached chain (a session starts a new one on truncation)

    def __init__(self, cfg: WorkloadConfig, rng: np.random.Generator, duration_s: float | None) -> None:
        super().__init__(cfg, rng, duration_s)
        self.sessions: dict[int, dict] = {}
        self.n_sessions = 0
        self.n_chains = 0
        self.context_window: int | None = None  # the fleet's, set by the simulation
        self.truncations = 0

    def _chain(self) -> int:
        self.n_chains += 1
        return (self.n_chains - 1) * self.SESSION_STRIDE

    def _new_session(self, t: float) -> Request:
        s = self.cfg.session
        sid = self.n_sessions
        self.n_sessions += 1
        turns = int(np.clip(np.rint(s.turns.sample(self.rng, 1)[0]), 1, TURNS_MAX))
        state = {
            "turns": turns,
            "turn": 0,
            "ctx": int(_tokens(s.first_isl.sample(self.rng, 1))[0]),
            "klass": self._classes(1)[0],
            "accept": float(self._accept(1)[0]),
            "chain": self._chain(),
        }
        self.sessions[sid] = state
        return self._turn(sid, t)

    def _turn(self, sid: int, t: float) -> Request:
        st = self.sessions[sid]
        osl = _token(self.cfg.osl.one(self.rng))
        if st["turn"] > 0:
            self._truncate(st, osl)
        r = Request(self._rid(), t, st["ctx"], osl, hash_block_tokens=self.cfg.hash_block_tokens,
                    session_hash_base=st["chain"], session=sid, turn=st["turn"], klass=st["klass"])
        r.accept_rate = st["accept"]
        r.last_turn = st["turn"] == st["turns"] - 1
        return r

    def _truncate(self, st: dict, osl: int) -> None:
        """Apply the truncation rule when the context passes the cap or the model's window."""
        s = self.cfg.session
        cap = s.context_cap if s.context_cap is not None else TOKENS_MAX
        keep = s.truncate_to if s.truncate_to is not None else cap
        if self.context_window:
            room = max(1, self.context_window - osl - 1)
            cap, keep = min(cap, room), min(keep, room)
        if st["ctx"] > cap:
            st["ctx"] = keep
            st["chain"] = self._chain()  # the kept tokens' KV changed with what was dropped: nothing is reused
            self.truncations += 1

    def arrivals(self) -> Iterator[Request]:
        cfg = self.cfg
        limit = cfg.num_requests if cfg.num_requests is not None else 1 << 62
        if cfg.arrival.process == "closed":
            self._left = limit - cfg.arrival.concurrency
            for _ in range(min(limit, cfg.arrival.concurrency)):
                yield self._new_session(0.0)
            return
        self._left = 0
        t = 0.0
        for _ in range(limit):
            t += float(_interarrivals(cfg.arrival, self.rng, 1)[0])
            if not self._in_window(t):
                return
            yield self._new_session(t)

    def on_complete(self, req: Request, now: float) -> list[Request]:
        st = self.sessions.get(req.session)
        if st is None:
            return []
        s = self.cfg.session
        st["turn"] += 1
        if st["turn"] >= st["turns"]:
            del self.sessions[req.session]
            if self.cfg.arrival.process == "closed" and self._left > 0 and self._in_window(now):
                self._left -= 1
                return [self._new_session(now)]
            return []
        new = s.new_tokens.one(self.rng)
        new = 0 if new != new or new < 0 else min(TOKENS_MAX, int(round(new)))
        think = max(0.0, s.think_s.one(self.rng))
        st["ctx"] = min(TOKENS_MAX, req.isl + req.osl + new)
        return [self._turn(req.session, now + think)]


def session_workload(shape, sessions: int, osl: int, concurrency: int | None = None, rate_per_s: float | None = None,
                     name: str | None = None, hash_block_tokens: int = 512) -> WorkloadConfig:
    """The `kind: agentic` workload of `sessions` sessions of one shape (`lpxsim.engine.query.SessionShape`: any
    object with first_isl, new_tokens, turns, think_s, context_cap), `osl` output tokens a turn. Arrivals: a
    closed loop of `concurrency` sessions in flight, else Poisson sessions at `rate_per_s` (default: all
    sessions at once as a closed loop)."""
    if concurrency is None and rate_per_s is None:
        concurrency = sessions
    arrival = (Arrival(process="closed", concurrency=min(concurrency, sessions)) if concurrency is not None
               else Arrival(process="poisson", rate=rate_per_s))
    session = Session(turns=Dist(value=shape.turns), first_isl=Dist(value=shape.first_isl),
                      new_tokens=Dist(value=shape.new_tokens), think_s=Dist(value=float(shape.think_s)),
                      context_cap=shape.context_cap)
    label = name or (f"agentic {shape.first_isl}+{shape.new_tokens}x{shape.turns}"
                     f"{f' cap {shape.context_cap}' if shape.context_cap else ''}")
    return WorkloadConfig(name=label, kind="agentic", num_requests=sessions, arrival=arrival, session=session,
                          osl=Dist(value=osl), hash_block_tokens=hash_block_tokens)


def benchmark_loop(users: int, isl: int, osl: int, requests_per_user: int, name: str = "benchmark loop",
                   range_ratio: float = BENCHMARK_RANGE_RATIO) -> WorkloadConfig:
    """A serving benchmark's client as InferenceX runs it: a closed loop of `users` (--max-concurrency) sending
    `requests_per_user` x `users` requests (--num-prompts), each request's input and output lengths drawn uniform
    in [range_ratio, 1] x the nominal `isl` / `osl` (--random-range-ratio; InferenceX's by
    default, `core.benchmark_client`). Drawn lengths keep the users from arriving in lockstep, as
    identical requests would."""
    def drawn(nominal: int) -> Dist:
        return Dist(kind="uniform", low=range_ratio * nominal, high=float(nominal))

    return WorkloadConfig(name=name, kind="synthetic", num_requests=users * requests_per_user,
                          arrival=Arrival(process="closed", concurrency=users), isl=drawn(isl), osl=drawn(osl))


def make_workload(cfg: WorkloadConfig, rng: np.random.Generator, duration_s: float | None = None) -> Workload:
    if cfg.kind == "synthetic":
        return SyntheticWorkload(cfg, rng, duration_s)
    if cfg.kind == "agentic":
        return AgenticWorkload(cfg, rng, duration_s)
    from lpxsim.serving.traces import TraceWorkload

    return TraceWorkload(cfg, rng, duration_s)


