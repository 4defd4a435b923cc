"""The op graph: what one model step computes, op by op, with shapes, FLOPs and bytes.

Both backends read it: the LPX compiler partitions, places and schedules these
ops; the GPU cost model prices each one against a roofline. An op's byte counts
are totals for the whole step (all sequences of the batch); a backend that
splits an op across chips divides them by its split.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from lpxsim.specs.model import ModelSpec

OpKind = Literal[
    "embed",  # token-id gather from the embedding table
    "norm",  # RMSNorm over the hidden size (or per head for q/k norms)
    "matmul",  # [M, K] x [K, N]
    "rope",  # rotary position embedding on q and k
    "kv_write",  # append this step's K/V (or MLA latent) to the cache
    "attention",  # scores over the cached context, softmax, weighted sum of V
    "elementwise",  # activation, gating, scaling, soft-capping
    "residual",  # add the block output to the residual stream
    "router",  # MoE gate: logits over experts and top-k selection
    "experts",  # MoE routed experts as one grouped matmul op
    "sample",  # argmax / sampling over the vocabulary
]

PhaseKind = Literal["decode", "prefill", "verify"]


@dataclass(frozen=True, slots=True)
class Op:
    """One op of a step. Bytes and FLOPs are totals over the whole batch."""

    name: str  # unique in the graph, e.g. "L12.q_proj"
    kind: OpKind
    layer: int  # -1 = embedding, 0..L-1 = decoder layers, L = final norm / head
    inputs: tuple[str, ...]  # names of the ops this one consumes
    tokens: int  # rows processed (batch x new tokens per sequence)
    flops: float
    weight_bytes: float = 0.0  # weights read (MoE: expected distinct experts touched)
    kv_read_bytes: float = 0.0
    kv_write_bytes: float = 0.0
    act_in_bytes: float = 0.0
    act_out_bytes: float = 0.0
    shape: tuple[int, ...] = ()  # matmul: (M, K, N); others: see attrs
    weight: str = ""  # logical weight name (Hugging Face module path), "" if none
    attrs: Mapping[str, Any] = field(default_factory=dict)

    @property
    def bytes_total(self) -> float:
        return self.weight_bytes + self.kv_read_bytes + self.kv_write_bytes + self.act_in_bytes + self.act_out_bytes


@dataclass(frozen=True)
class Phase:
    """What step is lowered: `new_tokens` per sequence over each sequence's cached context."""

    kind: PhaseKind
    contexts: tuple[int, ...]  # tokens already in the KV cache, per sequence
    new_tokens: int = 1  # decode 1; prefill chunk length; verify k + 1

    @property
    def sequences(self) -> int:
        return len(self.contexts)

    @property
    def tokens(self) -> int:
        return self.sequences * self.new_tokens

    @classmethod
    def decode(cls, contexts: tuple[int, ...] | list[int]) -> Phase:
        return cls("decode", tuple(contexts), 1)

    @classmethod
    def prefill(cls, tokens: int, context: int = 0, sequences: int = 1) -> Phase:
        return cls("prefill", tuple([context] * sequences), tokens)

    @classmethod
    def verify(cls, contexts: tuple[int, ...] | list[int], k: int) -> Phase:
        return cls("verify", tuple(contexts), k + 1)


@dataclass
class OpGraph:
    """Ops of one step in topological order, with the precisions they were lowered at."""

    model: ModelSpec
    phase: Phase
    weights: str
    kv: str
    kv_layout: str
    act_bytes_per_element: float
    ops: list[Op]

    def __post_init__(self) -> None:
        self._by_name = {op.name: op for op in self.ops}
        if len(self._by_name) != len(self.ops):
            raise ValueError("op names must be unique")

    def __iter__(self) -> Iterator[Op]:
        return iter(self.ops)

    def __len__(self) -> int:
        return len(self.ops)

    def op(self, name: str) -> Op:
        return self._by_name[name]

    def layer_ops(self, layer: int) -> list[Op]:
        return [op for op in self.ops if op.layer == layer]

    def total(self, attr: str) -> float:
        """Sum of one numeric field (e.g. "flops", "weight_bytes", "kv_read_bytes") over all ops."""
        return float(sum(getattr(op, attr) for op in self.ops))

    def summary(self) -> dict[str, float]:
        keys = ("flops", "weight_bytes", "kv_read_bytes", "kv_write_bytes", "act_in_bytes", "act_out_bytes")
        return {k: self.total(k) for k in keys} | {"ops": float(len(self.ops))}
