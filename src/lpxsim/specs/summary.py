"""Plain-dict summaries of models and systems: what `lpxsim model/models/system/systems` print.

These are the Python API behind the catalog commands; the CLI only resolves names and formats.
All values are SI (bytes, FLOP, B/s, W).
"""

from __future__ import annotations

from typing import Any

from lpxsim.core.errors import UserError
from lpxsim.specs.accounting import (
    decode_flops_per_token,
    kv_bytes_per_sequence,
    kv_bytes_per_token_by_kind,
    kv_elements_per_token,
    layer_params,
    matmul_flops_per_token,
    param_counts,
    weight_bytes,
)
from lpxsim.specs.hardware import SystemSpec
from lpxsim.specs.model import LayerSpec, ModelSpec
from lpxsim.specs.precision import get_precision
from lpxsim.specs.topology import chip_graph


def model_type_label(m: ModelSpec) -> str:
    """A short description: architecture family, dense/MoE, attention kind."""
    parts = [m.model_type, "MoE" if m.is_moe else "dense"]
    if m.is_mla:
        parts.append("MLA")
    if "sliding" in m.layer_kinds:
        parts.append("sliding+full")
    return " ".join(parts)


def model_row(m: ModelSpec) -> dict[str, Any]:
    """One line of `lpxsim models`: size, FP8 weight bytes and BF16 KV bytes per token by layer kind."""
    p = param_counts(m)
    return {
        "name": m.name,
        "type": model_type_label(m),
        "layers": m.num_layers,
        "params_total": p.total,
        "params_active": p.active,
        "weight_bytes_fp8": weight_bytes(m, "fp8"),
        "kv_bytes_per_token_bf16": kv_bytes_per_token_by_kind(m, "bf16", "separate"),
        "max_context": m.max_context,
    }


def _layer_group_key(layer: LayerSpec) -> tuple:
    return (layer.kind, layer.attention, layer.ffn, layer.num_norms)


def layer_kind_rows(m: ModelSpec, kv_bytes_per_element: float, kv_layout: str) -> list[dict[str, Any]]:
    """Layers grouped by identical shape (kind, attention, FFN), in first-appearance order."""
    groups: dict[tuple, list[LayerSpec]] = {}
    for layer in m.layers:
        groups.setdefault(_layer_group_key(layer), []).append(layer)
    rows = []
    for layers in groups.values():
        first = layers[0]
        a, f = first.attention, first.ffn
        lp = layer_params(first, m.hidden_size)
        rows.append(
            {
                "kind": first.kind,
                "count": len(layers),
                "first_index": first.index,
                "attention": a.kind,
                "heads": a.num_heads,
                "kv_heads": a.num_kv_heads,
                "head_dim": a.head_dim,
                "window": a.window,
                "k_eq_v": a.k_eq_v,
                "ffn": f.kind,
                "experts": f.num_experts,
                "top_k": f.top_k,
                "params_per_layer": lp.total,
                "active_params_per_layer": lp.active,
                "kv_bytes_per_token_per_layer": kv_elements_per_token(a, kv_layout) * kv_bytes_per_element,
            }
        )
    return rows


def model_summary(
    m: ModelSpec,
    weights: str = "fp8",
    kv: str = "bf16",
    kv_layout: str = "separate",
    context: int | None = None,
) -> dict[str, Any]:
    """Parameters, weight bytes, KV bytes (per token and per sequence) and decode FLOPs of a model."""
    wp = get_precision(weights, "weights")
    kp = get_precision(kv, "kv")
    ctx = m.max_context if context is None else int(context)
    if ctx < 1:
        raise UserError("context", f"context must be at least 1 token, got {ctx}")
    p = param_counts(m)
    by_kind = kv_bytes_per_token_by_kind(m, kp, kv_layout)
    notes = [n for n in (m.window_note(ctx),) if n]
    return {
        "name": m.name,
        "type": model_type_label(m),
        "source": m.source,
        "layers": m.num_layers,
        "layer_kinds": dict(m.layer_kinds),
        "hidden_size": m.hidden_size,
        "vocab_size": m.vocab_size,
        "max_context": m.max_context,
        "params_total": p.total,
        "params_active": p.active,
        "params_active_incl_embedding": p.active_incl_embedding,
        "params_embedding": p.embedding + p.lm_head,
        "weights": wp.name,
        "weight_bytes": weight_bytes(m, wp),
        "kv": kp.name,
        "kv_layout": kv_layout,
        "context": ctx,
        "kv_bytes_per_token": {**by_kind, "total": sum(by_kind.values())},
        "kv_bytes_per_sequence": kv_bytes_per_sequence(m, ctx, kp, kv_layout),
        "matmul_flops_per_token": matmul_flops_per_token(m),
        "decode_flops_per_token": decode_flops_per_token(m, ctx),
        "layer_groups": layer_kind_rows(m, kp.bytes_per_element, kv_layout),
        "notes": notes,
    }


def system_row(s: SystemSpec) -> dict[str, Any]:
    """One line of `lpxsim systems`."""
    return {
        "name": s.name,
        "title": s.title,
        "chip": s.chip.name,
        "kind": s.chip.kind,
        "unit_name": s.unit_name,
        "chips_per_unit": s.chips_per_unit,
        "memory_bytes_per_unit": s.memory_bytes(),
        "memory_bw_Bps_per_unit": s.memory_bw_Bps(),
        "fp8_flops_per_unit": s.peak_flops("fp8"),
        "power_w_per_unit": float(s.power_w),
        "power_grade": s.power_w.grade,
        "max_units": s.max_units,
        "aliases": list(s.aliases),
    }


# Above this many chips a BFS diameter over the dragonfly graph is too slow for a summary.
_BFS_DIAMETER_MAX_CHIPS = 1024


def units_totals(s: SystemSpec, units: int) -> dict[str, Any]:
    """Chips, memory, bandwidth, peak FLOP/s, power and hop diameter of `units` racks or nodes."""
    totals: dict[str, Any] = {
        "units": units,
        "chips": s.total_chips(units),
        "memory_bytes": s.memory_bytes(units),
        "memory_bw_Bps": s.memory_bw_Bps(units),
        "peak_flops": {k: s.peak_flops(k, units) for k in s.chip.peak_flops},
        "power_w": s.power(units),
        "diameter_hops": None,
    }
    if s.topology.kind != "dragonfly" or totals["chips"] <= _BFS_DIAMETER_MAX_CHIPS:
        totals["diameter_hops"] = chip_graph(s, units).diameter()
    return totals


# Published per-unit figures and the derived figure each is checked against (derived key, how it is derived).
_PUBLISHED_CHECKS = {
    "sram_bw_Bps": ("memory_bw_Bps_per_unit", "chips x per-chip SRAM bandwidth"),
    "hbm_bw_Bps": ("memory_bw_Bps_per_unit", "chips x per-chip HBM bandwidth"),
    "sram_bytes": ("memory_bytes_per_unit", "chips x per-chip SRAM"),
    "hbm_bytes": ("memory_bytes_per_unit", "chips x per-chip HBM"),
    "fp8_flops": ("fp8", "chips x per-chip dense FP8"),
    "fp4_flops": ("fp4", "chips x per-chip dense FP4"),
    "bf16_flops": ("bf16", "chips x per-chip dense BF16"),
    "scale_up_Bps": ("scale_up_bidir_Bps_line", "chips x scale-up lanes x line rate x 2 directions"),
}


def published_checks(s: SystemSpec, derived: dict[str, Any]) -> list[dict[str, Any]]:
    """Each published per-unit figure beside the figure derived from the chip: the derived one is used.

    Every timing and capacity is computed per chip (a stage's bytes over its chips' bandwidth), so the
    per-unit figure the model uses is chips x the chip's figure; a vendor's rack table is a check only.
    """
    rows = []
    for key, (dkey, how) in _PUBLISHED_CHECKS.items():
        pub = s.published.get(key)
        if pub is None:
            continue
        used = derived["peak_flops_per_unit"].get(dkey) if dkey in ("fp8", "fp4", "bf16") else derived.get(dkey)
        if used is None:
            continue
        rows.append({
            "figure": key, "used": float(used), "derived_as": how, "published": float(pub),
            "published_source": f"{pub.source} ({pub.grade})", "ratio_published_to_used": float(pub) / float(used),
        })
    return rows


def system_summary(s: SystemSpec, units: int = 1) -> dict[str, Any]:
    """A system with derived per-unit figures, totals for `units`, and every sourced number."""
    t = s.topology
    derived = {
        "chips_per_unit": s.chips_per_unit,
        "memory_bytes_per_unit": s.memory_bytes(),
        "memory_bw_Bps_per_unit": s.memory_bw_Bps(),
        "peak_flops_per_unit": {k: s.peak_flops(k) for k in s.chip.peak_flops},
        "scale_up_bidir_Bps_line": s.scale_up_bidir_Bps(line_rate=True),
        "scale_up_bidir_Bps_effective": s.scale_up_bidir_Bps(line_rate=False),
        "diameter_hops_one_unit": chip_graph(s).diameter(),
    }
    if s.is_lpu:
        derived["lanes_used_per_chip"] = s.lane_budget()
    return {
        **system_row(s),
        "topology": {
            "kind": t.kind,
            "chips_per_node": t.chips_per_node,
            "nodes_per_rack": t.nodes_per_rack,
            "links": {
                role: {"name": lk.name, "bandwidth_Bps": lk.bandwidth_Bps, "latency_s": float(lk.latency_s)}
                for role, lk in t.links.items()
            },
            "description": t.description,
            "variants": list(s.variants),
        },
        "derived": derived,
        "published_checks": published_checks(s, derived),
        "totals": units_totals(s, units),
        "provenance": [r._asdict() for r in s.provenance_rows()],
        "notes": list(s.notes),
    }
