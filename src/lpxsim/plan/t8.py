"""T8: tokens/s per MW at 400 tok/s/user, 2T-parameter MoE, 400K input context, LPX vs GB200 / Vera Rubin NVL72.

The vendor claim ("up to 35x tokens/s per MW at 400 TPS/user vs GB200 NVL72,
2T-parameter MoE, 400K input context", NV-LPX) names no model. The catalog has
none of 2T parameters, so this module builds one, labelled synthetic:

- Kimi K2's architecture (DeepSeek-V3 family: MLA with a 512-d latent + 64-d
  RoPE key, 61 layers of which the first is dense, hidden 7168, one shared
  expert, top-8 routing over experts of 3 x 7168 x 2048 weights) with
  720 routed experts instead of 384 (same expert size): 1.91 T parameters,
  31.8 B active. 720 = 10 x 72, so experts split evenly over the 72 GPUs of an
  NVL72 rack (expert parallelism), as DeepSeek-V3's 256 (+32 redundant) do over
  their EP group.
- max_position_embeddings 524,288 (YaRN factor 128 over the 4,096 original) so
  that a 400K context is within the model's range.

The published 35x is a comparison column only: it never enters the computation.
The rack powers are the catalog's, with their provenance (LPX and Vera Rubin
NVL72 rack powers are assumptions, grade U; GB200 NVL72 ~120 kW is third party, S).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from lpxsim.catalog import get_model, get_system
from lpxsim.plan.operating_point import OperatingPoint, operating_point
from lpxsim.specs.model import ModelSpec

T8_MODEL_NAME = "synthetic-moe-2t"
T8_ROUTED_EXPERTS = 720
T8_MAX_CONTEXT = 524_288
T8_CONTEXT = 400_000
T8_TARGET_TOK_S_USER = 400.0
T8_DEFAULT_OSL = 1_000  # not published; an agentic turn's answer (assumption, docs/assumptions.md)
T8_SYSTEMS = ("lpx", "vr-nvl72", "gb200-nvl72")
T8_BASELINE = "gb200-nvl72"
T8_FRONTIER_TARGETS = (25.0, 50.0, 100.0, 200.0)  # lower per-user targets, to show where each system stands
T8_CLAIM_RATIO = 35.0  # vendor claim, NV-LPX: comparison only
T8_CLAIM_SOURCE = "NV-LPX: 'up to 35x tokens/s per MW at 400 TPS/user vs GB200 NVL72, 2T-parameter MoE, 400K input'"


def synthetic_moe_2t() -> ModelSpec:
    """The 2T-parameter MoE of T8: Kimi K2 with 720 routed experts and a 512K position range."""
    cfg = dict(get_model("kimi-k2").raw)
    cfg["n_routed_experts"] = T8_ROUTED_EXPERTS
    cfg["max_position_embeddings"] = T8_MAX_CONTEXT
    rope = dict(cfg.get("rope_scaling") or {})
    rope["factor"] = T8_MAX_CONTEXT / float(rope.get("original_max_position_embeddings", 4096))
    cfg["rope_scaling"] = rope
    return ModelSpec.from_config(cfg, name=T8_MODEL_NAME, source="synthetic: kimi-k2 with 720 routed experts")


@dataclass(frozen=True)
class T8Row:
    """One system at the T8 operating point."""

    system: str
    label: str
    point: OperatingPoint
    rack_power_w: float
    power_source: str
    power_grade: str
    power_note: str
    ratio_vs_baseline: float | None  # tok/s/MW over the same-backend baseline's, where both reach the target
    note: str = ""

    def as_dict(self) -> dict:
        return {
            "system": self.system, "label": self.label,
            "feasible": self.point.feasible, "context": self.point.isl, "osl": self.point.osl,
            "target_tok_s_user": self.point.target_tok_s_user, "tok_s_user": self.point.tok_s_user,
            "concurrency": self.point.concurrency, "replica_units": self.point.replica_units,
            "replica_chips": self.point.replica_chips, "replica_power_w": self.point.replica_power_w,
            "output_tok_s": self.point.tok_s_total, "tok_s_per_mw": self.point.tok_s_per_mw,
            "best_tok_s_user": self.point.best_tok_s_user, "layout": self.point.layout,
            "backend": self.point.backend, "reason": self.point.reason,
            "rack_power_w": self.rack_power_w, "power_source": self.power_source, "power_grade": self.power_grade,
            "power_note": self.power_note, "ratio_vs_gb200": self.ratio_vs_baseline, "note": self.note,
            **self.bands(),
        }

    def bands(self) -> dict:
        """The error band of the row's cost path (`engine.bands.figure_bands`) around the speed it shows: the
        target's answer where it is met, else the fastest a user gets (the 'max' a short system prints)."""
        from lpxsim.engine.bands import figure_bands, path_for

        p = self.point
        ok = p.feasible
        return figure_bands(self.system, path_for(self.system, p.weights), p.layout, {
            "tok_s_user": p.tok_s_user if ok else p.best_tok_s_user, "ttft": p.ttft_s if ok else None,
            "tok_s_per_chip": p.tok_s_total / max(1, p.replica_chips) if ok else None}, spec=p.spec_k > 0)


@dataclass
class T8Report:
    model: str
    total_params: float
    active_params: float
    context: int
    osl: int
    target_tok_s_user: float
    weights: str
    kv: str
    new_tokens: int  # input tokens prefilled per request (== context: no prefix cache)
    spec_k: int = 0
    spec_accept: float = 0.0
    rows: list[T8Row] = field(default_factory=list)
    frontier: list[dict] = field(default_factory=list)  # the same comparison at lower per-user targets
    claim_ratio: float = T8_CLAIM_RATIO
    claim_source: str = T8_CLAIM_SOURCE
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        return {
            "model": self.model, "total_params": self.total_params, "active_params": self.active_params,
            "context": self.context, "osl": self.osl, "target_tok_s_user": self.target_tok_s_user,
            "weights": self.weights, "kv": self.kv, "new_tokens": self.new_tokens, "spec_k": self.spec_k,
            "spec_accept": self.spec_accept,
            "systems": {r.label: r.as_dict() for r in self.rows},
            "frontier": self.frontier,
            "claim": {"ratio_vs_gb200": self.claim_ratio, "source": self.claim_source, "role": "comparison only"},
            "notes": self.notes,
        }


def _row(label: str, op: OperatingPoint, baseline: OperatingPoint | None, note: str = "") -> T8Row:
    s = get_system(op.system)
    ratio = None
    if baseline is not None and op.feasible and baseline.feasible and baseline.tok_s_per_mw > 0:
        ratio = op.tok_s_per_mw / baseline.tok_s_per_mw
    return T8Row(
        system=s.name, label=label, point=op, rack_power_w=float(s.power_w), power_source=s.power_w.source,
        power_grade=s.power_w.grade, power_note=s.power_w.note, ratio_vs_baseline=ratio,
        note=note,
    )


def _points(m: ModelSpec, context: int, osl: int, target: float, weights: str, kv: str, kv_layout: str,
            backend: str, systems: tuple[str, ...], **opts) -> list[T8Row]:
    """Every system's row at one target, on the detailed backends (no first-order what-if rows: the
    heterogeneous modes, AFD included, are compared on the detailed backends by `lpxsim modes`)."""
    points = {s: operating_point(m, s, context, osl, target, weights, kv, kv_layout, backend, **opts)
              for s in systems}
    base = points.get(T8_BASELINE)
    return [_row(s, op, base) for s, op in points.items()]


def t8_report(
    osl: int = T8_DEFAULT_OSL,
    context: int = T8_CONTEXT,
    target: float = T8_TARGET_TOK_S_USER,
    weights: str = "fp8",
    kv: str = "bf16",
    kv_layout: str = "separate",
    backend: str = "auto",
    systems: tuple[str, ...] = T8_SYSTEMS,
    frontier_targets: tuple[float, ...] = T8_FRONTIER_TARGETS,
    new_tokens: int | None = None,
    spec_k: int = 0,
    spec_accept: float = 0.0,
) -> T8Report:
    """tok/s/MW of each system at the T8 point, next to the vendor's 35x (comparison only), and at lower targets.

    `new_tokens`: input tokens prefilled per request, the rest of the context being in the prefix cache (a
    later turn of an agentic session); None prefills the whole context every request. `spec_k`,
    `spec_accept`: speculative decoding with an MTP head (the synthetic model has none; a what-if).
    """
    from lpxsim.specs.accounting import param_counts

    m = synthetic_moe_2t()
    pc = param_counts(m)
    rep = T8Report(model=m.name, total_params=float(pc.total), active_params=float(pc.active), context=context,
                   osl=osl, target_tok_s_user=float(target), weights=weights, kv=kv,
                   new_tokens=context if new_tokens is None else new_tokens, spec_k=spec_k, spec_accept=spec_accept)
    opts = dict(new_tokens=new_tokens, spec_k=spec_k, spec_accept=spec_accept)
    rep.rows = _points(m, context, osl, target, weights, kv, kv_layout, backend, systems, **opts)
    for t in frontier_targets:
        rows = _points(m, context, osl, t, weights, kv, kv_layout, backend, systems, **opts)
        rep.frontier.append({"target_tok_s_user": float(t), "context": context, "systems": {
            r.label: {"tok_s_per_mw": r.point.tok_s_per_mw if r.point.feasible else None,
                      "tok_s_user": r.point.tok_s_user if r.point.feasible else None,
                      "concurrency": r.point.concurrency if r.point.feasible else None,
                      "ratio_vs_gb200": r.ratio_vs_baseline} for r in rows}})
    base = next((r.point for r in rep.rows if r.label == T8_BASELINE), None)
    rep.notes = _notes(rep, base)
    return rep


def _notes(rep: T8Report, base: OperatingPoint | None) -> list[str]:
    notes = [f"{rep.model}: {rep.total_params / 1e12:.2f} T parameters ({rep.active_params / 1e9:.1f} B active), "
             f"synthetic (kimi-k2 with {T8_ROUTED_EXPERTS} routed experts)"]
    for r in rep.rows:
        op = r.point
        if r.note:
            notes.append(f"{r.label}: {r.note}")
        if not op.feasible:
            notes.append(f"{r.label}: cannot serve {rep.target_tok_s_user:,.0f} tok/s/user at {rep.context:,} context: "
                         f"{op.reason}")
    if base is not None and not base.feasible:
        notes.append(f"the {T8_BASELINE} baseline does not reach the target, so no tok/s/MW ratio at "
                     f"{rep.target_tok_s_user:,.0f} tok/s/user exists to set against the {T8_CLAIM_RATIO:g}x claim")
    return notes
