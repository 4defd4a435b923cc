"""Fleet files (pools, links, router, scheduler) as validated pydantic models.

A fleet is a list of pools. Each pool is `workers` replicas of one model on one
system, with a role: aggregated (prefill + decode), prefill / decode (PD
disaggregation, a link between them), attention / ffn (AFD, a link between
them), target / drafter (external-drafter speculative decoding, a link between
them). Any pool can be any hardware. Bad files give one line naming the field.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from lpxsim.core.errors import UserError

Role = Literal["aggregated", "prefill", "decode", "attention", "ffn", "drafter", "target"]
ENTRY_ROLES = ("aggregated", "prefill", "attention", "target")
PAIRS = {"prefill": "decode", "attention": "ffn", "target": "drafter"}


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)  # NaN/inf: one-line error naming the field


class OffloadTier(_Strict):
    """A slower memory a worker parks evicted KV in and reloads it from (per replica).

    A reload of b bytes takes b / bandwidth_Bps + latency_s on the tier's link (FIFO with the write-backs).
    `source`: where the numbers come from, or why they are assumed (docs/assumptions.md, docs/sources.md)."""

    name: str
    capacity_bytes: float = Field(..., gt=0, le=1e18)
    bandwidth_Bps: float = Field(..., gt=0, le=1e18)
    latency_s: float = Field(..., ge=0, le=1e6)
    source: str = ""


class PoolConfig(_Strict):
    """`workers` replicas of `model` on `system`; chips per replica from one of the *_per_worker keys."""

    name: str
    system: str
    backend: Literal["auto", "gpu", "lpx"] = "auto"  # auto: the system's detailed backend
    model: str
    workers: int = Field(1, ge=1, le=100_000)
    gpus_per_worker: int | None = Field(None, ge=1, le=1_000_000)
    chips_per_worker: int | None = Field(None, ge=1, le=1_000_000)
    racks_per_worker: float | None = Field(None, gt=0, le=10_000)
    tp: int | None = Field(None, ge=1, le=4096)
    ep: int = Field(1, ge=1, le=4096)  # gpu backend: expert parallelism inside the TP group
    pp: int = Field(1, ge=1, le=1000)  # gpu backend: pipeline stages
    dp_attention: bool = False  # gpu backend: attention data-parallel over the TP group
    framework: Literal["sglang", "trtllm", "vllm"] = "sglang"  # gpu backend: the serving engine
    mtp: int | None = Field(None, ge=1, le=64)  # draft tokens per round from the model's own MTP head
    # conditional acceptance of each draft position: one rate for all, or one per position (the last repeats);
    # default: the model's published profile (lpxsim.specs.mtp)
    mtp_accept: float | list[float] | None = None
    weights: str = "fp8"
    kv: str = "bf16"
    kv_layout: Literal["separate", "k-once"] = "separate"
    role: Role = "aggregated"
    max_batch: int | None = Field(None, ge=1, le=10_000_000)  # per replica, below the scheduler's max_batch
    # gpu backend: share of the HBM left after weights and activations that holds KV (the engines'
    # free-memory fraction; default 0.9, lpxsim.gpu.memory)
    memory_fraction: float | None = Field(None, gt=0, le=1)
    target_context: int | None = Field(None, ge=1, le=10_000_000)  # lpx backend: the context the layout is compiled for
    target_concurrency: int | None = Field(None, ge=1, le=10_000_000)  # lpx backend: the concurrency the layout is compiled for
    # lpx backend: the output tokens of the request target_context is sized for; with it the steps are compiled
    # at that workload's own contexts (0, 1,024, target_context) instead of the generic context buckets
    target_osl: int | None = Field(None, ge=1, le=10_000_000)
    offload: OffloadTier | None = None  # where this pool's evicted session KV goes (None: evicted KV is dropped)

    @field_validator("mtp_accept")
    @classmethod
    def _rates(cls, v: float | list[float] | None) -> float | list[float] | None:
        rates = [v] if isinstance(v, (int, float)) else v or []
        if isinstance(v, list) and not v:
            raise ValueError("expected at least one acceptance rate")
        if any(not 0.0 <= a < 1.0 for a in rates):
            raise ValueError(f"expected acceptance rates in [0, 1), got {v!r}")
        return v

    @field_validator("backend", mode="before")
    @classmethod
    def _no_analytic(cls, v: object) -> object:
        if v == "analytic":  # issue 12: one cost model in every answer
            raise ValueError("'analytic' was removed: every pool runs on its system's detailed backend "
                             "(compiled LPX, GPU model); use auto, gpu or lpx")
        return v

    @model_validator(mode="after")
    def _one_size(self) -> PoolConfig:
        if self.offload is not None and self.role in ("decode", "ffn", "drafter"):
            raise ValueError(f"a {self.role} pool takes no offload tier: a decode pool's evicted session KV comes back "
                             "from the prefill pool over the PD link; FFN and drafter pools follow their partner")
        given = [k for k in ("gpus_per_worker", "chips_per_worker", "racks_per_worker") if getattr(self, k)]
        if len(given) > 1:
            raise ValueError(f"give one of gpus_per_worker, chips_per_worker, racks_per_worker (got {given})")
        return self


class LinkConfig(_Strict):
    """A link between two pools (NVLink, C2C or Ethernet): per-direction bandwidth and one-way latency."""

    between: tuple[str, str]
    kind: Literal["nvlink", "c2c", "ethernet", "infiniband", "pcie"] = "ethernet"
    bandwidth_Bps: float = Field(..., gt=0, le=1e18)
    latency_s: float = Field(..., ge=0, le=1e6)


class RouterConfig(_Strict):
    """Dynamo-like router: cost = overlap_weight x prefill_blocks + decode_blocks, lowest wins."""

    policy: Literal["kv", "round_robin", "least_load", "random"] = "kv"
    overlap_weight: float = Field(1.0, ge=0)
    temperature: float = Field(0.0, ge=0)
    classes: dict[str, list[str]] = Field(default_factory=dict)  # request class -> entry pools
    # a session's turn goes back to the worker that holds its KV unless that worker is already queueing
    # (then the KV cost above decides, which may move the session: docs/serving.md "Routing sessions")
    session_affinity: bool = True


class SchedulerConfig(_Strict):
    """Continuous batching per worker."""

    token_budget: int = Field(8192, ge=1, le=10_000_000)  # tokens per step (decode tokens + prefill chunk)
    min_chunk_tokens: int = Field(256, ge=1, le=10_000_000)  # prefill progress per step even when decode fills the budget
    block_tokens: int = Field(16, ge=1, le=1_000_000)  # KV allocation granularity
    max_batch: int = Field(256, ge=1, le=10_000_000)
    max_run_steps: int = Field(1_000_000, ge=1, le=10**12)
    preemption: Literal["recompute"] = "recompute"


RetentionPolicy = Literal["auto", "hold", "evict_idle", "lru"]


class RetentionConfig(_Strict):
    """What a worker does with finished turns' KV when new work needs the room (docs/serving.md "Retention").

    * `auto` (default): `evict_idle` on a pool with an offload tier (the evicted session parks there and
      reloads), `hold` on one without (an evicted session would have to prefill its whole context again).
    * `hold`: sessions whose KV is resident keep it; a session with nothing resident (new, or evicted) waits
      until its turn fits without evicting a resident session, keeping `headroom` of the KV free for the
      resident sessions' growth. A resident session's turn that needs room evicts the longest-idle session.
    * `evict_idle`: anything may evict; the longest-idle session goes first, whole.
    * `lru`: plain block LRU over the prefix units (tail blocks of the least recently used first).
    """

    policy: RetentionPolicy = "auto"
    headroom: float = Field(0.1, ge=0, lt=1)


class SpeculationConfig(_Strict):
    draft_tokens: int = Field(4, ge=1, le=32)
    adaptive: bool = False
    max_draft_tokens: int = Field(8, ge=1, le=32)


class AfdConfig(_Strict):
    micro_batches: Literal[1, 2] = 2


class FleetConfig(_Strict):
    name: str = "fleet"
    description: str = ""
    pools: list[PoolConfig] = Field(..., min_length=1)
    links: list[LinkConfig] = Field(default_factory=list)
    router: RouterConfig = Field(default_factory=RouterConfig)
    scheduler: SchedulerConfig = Field(default_factory=SchedulerConfig)
    speculation: SpeculationConfig = Field(default_factory=SpeculationConfig)
    afd: AfdConfig = Field(default_factory=AfdConfig)
    retention: RetentionConfig = Field(default_factory=RetentionConfig)

    @model_validator(mode="after")
    def _consistent(self) -> FleetConfig:
        names = [p.name for p in self.pools]
        if len(set(names)) != len(names):
            raise ValueError(f"pool names must be unique, got {names}")
        roles = {p.role for p in self.pools}
        for a, b in PAIRS.items():
            if (a in roles) != (b in roles):
                raise ValueError(f"a pool with role {a!r} needs a pool with role {b!r} and vice versa")
            if sum(p.role == b for p in self.pools) > 1:
                raise ValueError(f"at most one pool with role {b!r}")
        for link in self.links:
            for end in link.between:
                if end not in names:
                    raise ValueError(f"link end {end!r} is not a pool ({', '.join(names)})")
        entry = {p.name for p in self.pools if p.role in ENTRY_ROLES}
        for klass, pools in self.router.classes.items():
            for p in pools:
                if p not in entry:
                    raise ValueError(f"class {klass!r} routes to {p!r}, which is not an entry pool ({sorted(entry)})")
        return self

    def link_between(self, a: str, b: str) -> LinkConfig:
        for link in self.links:
            if set(link.between) == {a, b}:
                return link
        raise UserError("fleet.links", f"no link between pools {a!r} and {b!r}; add one with bandwidth_Bps and latency_s")


def validation_error(prefix: str, e: ValidationError) -> UserError:
    """First pydantic error as a one-line UserError naming the field."""
    err = e.errors()[0]
    loc = ".".join(str(x) for x in err["loc"] if not str(x).startswith("function-after"))
    field = f"{prefix}.{loc}" if loc else prefix
    return UserError(field, err["msg"].removeprefix("Value error, "))


def read_yaml(path: str | Path, what: str) -> dict:
    """A YAML mapping from a file, or a one-line UserError."""
    from lpxsim.core.structured import read_yaml as read_capped  # size, UTF-8, depth, number caps

    p = Path(path)
    raw = read_capped(p, what)
    if not isinstance(raw, dict):
        raise UserError(what, f"{p.name} must hold a mapping")
    return raw


def load_fleet(source: str | Path | dict) -> FleetConfig:
    """A FleetConfig from a YAML path or a dict."""
    raw = source if isinstance(source, dict) else read_yaml(source, "fleet")
    try:
        return FleetConfig.model_validate(raw)
    except ValidationError as e:
        raise validation_error("fleet", e) from None
