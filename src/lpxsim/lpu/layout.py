"""A layout of one model on LPUs: stage groups, tensor-parallel degree, KV split, replicas.

`Layout` is the decision the partitioner searches over (and a user may force
with a string such as ``"tp=16,stages=16,kvsplit=4"``); `realise` turns it into
concrete stages (layer ranges) on concrete chips of the topology.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

from lpxsim.core.errors import DoesNotFit, UserError
from lpxsim.lpu.program import Stage
from lpxsim.specs.accounting import layer_weight_bytes
from lpxsim.specs.model import ModelSpec
from lpxsim.specs.precision import get_precision


@dataclass(frozen=True)
class Layout:
    """tp chips per stage, `stages` pipeline stages, `replicas` data-parallel copies.

    `kv_seq_split`: how many chips of a stage split one stream's full-attention KV
    along the sequence (flash-decoding); heads are split over tp / kv_seq_split chips.
    `kv_spread`: helper chips in other stages (same position in the group) that hold
    further sequence chunks of each chip's full-attention KV and attend over them.
    `kv_block`: tokens per KV block; a split layer's blocks are striped round-robin
    over its holders, a fixed ownership of positions for the whole deployment.
    """

    tp: int
    stages: int
    replicas: int = 1
    kv_seq_split: int = 1
    kv_spread: int = 0
    kv_block: int = 1

    @property
    def chips(self) -> int:
        return self.tp * self.stages * self.replicas

    def describe(self) -> str:
        spread = f",kvspread={self.kv_spread}" if self.kv_spread else ""
        spread += f",kvblock={self.kv_block}" if self.kv_block != 1 else ""
        return f"tp={self.tp},stages={self.stages},kvsplit={self.kv_seq_split}{spread},replicas={self.replicas}"


_KEYS = {"tp": "tp", "stages": "stages", "pp": "stages", "kvsplit": "kv_seq_split", "kv_seq_split": "kv_seq_split",
         "replicas": "replicas", "dp": "replicas", "kvspread": "kv_spread", "kvblock": "kv_block"}


def parse_layout(text: str) -> dict[str, int]:
    """Parse ``"tp=16,stages=16,kvsplit=4,replicas=1"`` (any subset) into Layout fields."""
    out: dict[str, int] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, _, val = part.partition("=")
        key = key.strip().lower()
        ok = val.strip().isdigit() and (int(val) > 0 or (key == "kvspread" and int(val) == 0))
        if key not in _KEYS or not ok:
            raise UserError("layout", f"bad item {part!r}; expected e.g. tp=16,stages=16,kvsplit=4,replicas=1")
        if _KEYS[key] in out:  # tp=16,tp=8 (or stages= beside pp=): which one was meant is not ours to guess
            raise UserError("layout", f"{key} given twice in {text!r}; give each of tp, stages, kvsplit, replicas once")
        out[_KEYS[key]] = int(val)
    if not out:
        raise UserError("layout", "empty layout; expected e.g. tp=16,stages=16,kvsplit=4")
    return out


def layer_costs(model: ModelSpec, weights: str) -> list[float]:
    """Weight bytes per pipeline unit: [embed, layer 0, ..., layer L-1, head] (tied embeddings on the head)."""
    return list(_layer_costs(model, weights))


@lru_cache(maxsize=64)
def _layer_costs(model: ModelSpec, weights: str) -> tuple[float, ...]:
    wb = get_precision(weights, "weights").bytes_per_element
    table = model.vocab_size * model.hidden_size * wb
    per_layer = layer_weight_bytes(model, weights)
    head = table + model.hidden_size * wb
    embed = 0.0 if model.tie_embeddings else table
    return (embed, *per_layer, head)


def split_layers(model: ModelSpec, stages: int, weights: str) -> list[tuple[int, int]]:
    """Contiguous layer ranges per stage minimising the heaviest stage's weight bytes (embedding on
    stage 0, head on the last): binary search on the bottleneck with greedy packing."""
    L = model.num_layers
    if stages > L:
        raise UserError("stages", f"{stages} stages for {L} layers; expected at most {L}")
    costs = layer_costs(model, weights)
    w = list(costs[1:-1])
    w[0] += costs[0]
    w[-1] += costs[-1]

    def pack(cap: float) -> list[int] | None:
        bounds, acc = [0], 0.0
        for i, c in enumerate(w):
            if acc + c > cap and i > bounds[-1]:
                bounds.append(i)
                acc = 0.0
            acc += c
        return bounds if len(bounds) <= stages else None

    lo, hi = max(w), sum(w)
    for _ in range(60):
        mid = (lo + hi) / 2
        if pack(mid) is None:
            lo = mid
        else:
            hi = mid
    bounds = pack(hi) or [0]
    bounds.append(L)
    while len(bounds) < stages + 1:  # fewer stages than asked: split the heaviest multi-layer range
        spans = [(sum(w[bounds[i]:bounds[i + 1]]), i) for i in range(len(bounds) - 1)
                 if bounds[i + 1] - bounds[i] > 1]
        _, i = max(spans)
        bounds.insert(i + 1, (bounds[i] + bounds[i + 1]) // 2)
    return [(bounds[i], bounds[i + 1]) for i in range(stages)]


def check_shape(layout: Layout, chips_per_node: int, n_chips: int) -> None:
    """The layout's groups must tile nodes: tp divides a node, or is a whole number of nodes."""
    tp = layout.tp
    if min(tp, layout.stages, layout.replicas, layout.kv_seq_split, layout.kv_block) <= 0:
        raise UserError("layout", "tp, stages, replicas, kvsplit and kvblock must be positive")
    if not (chips_per_node % tp == 0 or tp % chips_per_node == 0):
        raise UserError("layout", f"tp={tp} must divide or be a multiple of the {chips_per_node} chips of a node")
    if tp % layout.kv_seq_split:
        raise UserError("layout", f"kvsplit={layout.kv_seq_split} must divide tp={tp}")
    if layout.kv_spread < 0 or layout.kv_spread >= layout.stages:
        raise UserError("layout", f"kvspread={layout.kv_spread} needs that many other stages (stages={layout.stages})")
    if layout.chips > n_chips:
        raise DoesNotFit("chips", f"layout {layout.describe()} needs {layout.chips} chips; the system has {n_chips}")


def realise(model: ModelSpec, layout: Layout, weights: str) -> list[Stage]:
    """Concrete stages for every replica: consecutive groups of `tp` chips in global chip order."""
    ranges = split_layers(model, layout.stages, weights)
    stages: list[Stage] = []
    for r in range(layout.replicas):
        for s, (lo, hi) in enumerate(ranges):
            g = r * layout.stages + s
            chips = tuple(range(g * layout.tp, (g + 1) * layout.tp))
            last = s == layout.stages - 1
            embed_here = last if model.tie_embeddings else s == 0
            stages.append(Stage(index=s, replica=r, layers=(lo, hi), chips=chips, head=last, embed=embed_here))
    return stages


def balanced(n: int, parts: int, i: int) -> tuple[int, int]:
    """The i-th of `parts` contiguous, balanced ranges over range(n)."""
    return (n * i) // parts, (n * (i + 1)) // parts


@lru_cache(maxsize=4096)
def heads_split(tp: int, heads: int, want_seq: int) -> tuple[int, int]:
    """(head shards, sequence shards) for a layer: shards multiply to tp, head shards <= heads."""
    seq = want_seq
    while tp // seq > heads or tp % seq:
        seq += 1
        if seq > tp:
            return 1, tp
    return tp // seq, seq


def min_stages_for(total_bytes: float, tp: int, sram: float) -> int:
    return max(1, math.ceil(total_bytes / (tp * sram)))


def helper_stages(stage: int, stages: int, spread: int) -> list[int]:
    """Stages whose chips hold chunks of `stage`'s full-attention KV: evenly spaced around the pipeline."""
    if spread <= 0:
        return []
    step = max(1, stages // (spread + 1))
    out: list[int] = []
    j = 1
    while len(out) < spread and j < 4 * stages:
        s = (stage + j * step) % stages
        if s != stage and s not in out:
            out.append(s)
        j += 1
    return out
