"""A parallel layout of one model on GPUs: tensor, expert, pipeline and attention-data parallelism.

One replica spans tp x pp GPUs: tp GPUs per pipeline stage, pp stages. Expert
parallelism runs inside the TP group (ep divides tp), as SGLang and
TensorRT-LLM do on one node: each GPU holds E/ep whole experts, each split over
tp/ep GPUs. With attention data-parallelism the tp GPUs of a stage each run
attention for their own share of the sequences (attention weights replicated,
KV not), and the FFN/MoE part runs over the gathered tokens. With KV
parallelism (Helix-style, for long contexts) each of the tp GPUs holds 1/tp of
every sequence's KV, split along the sequence, and attends over its slice for all
heads; queries are gathered and partial outputs merged by collectives. `replicas`
independent copies of the replica sit behind one router.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from lpxsim.core.errors import UserError
from lpxsim.specs.model import ModelSpec


@dataclass(frozen=True)
class Layout:
    tp: int = 1
    ep: int = 1
    pp: int = 1
    dp_attention: bool = False
    replicas: int = 1
    kv_parallel: bool = False

    @property
    def gpus_per_replica(self) -> int:
        return self.tp * self.pp

    @property
    def gpus(self) -> int:
        return self.gpus_per_replica * self.replicas

    @property
    def attention_ranks(self) -> int:
        """Attention data-parallel ranks of a replica, each scheduling its own requests (1 without DP-attention)."""
        return self.tp if self.dp_attention else 1

    def label(self) -> str:
        s = f"TP{self.tp}"
        if self.ep > 1:
            s += f"/EP{self.ep}"
        if self.pp > 1:
            s += f"/PP{self.pp}"
        if self.dp_attention:
            s += "/DPattn"
        if self.kv_parallel:
            s += "/KVP"
        if self.replicas > 1:
            s += f" x{self.replicas}"
        return s

    @classmethod
    def make(
        cls,
        model: ModelSpec,
        gpus: int | None,
        tp: int | None,
        ep: int = 1,
        pp: int = 1,
        dp_attention: bool = False,
        kv_parallel: bool = False,
    ) -> Layout:
        """Validate a layout for `model`; `gpus` defaults to tp x pp, `tp` to gpus / pp."""
        for name, v in (("ep", ep), ("pp", pp)):
            if not isinstance(v, int) or v < 1:
                raise UserError(name, f"expected a positive integer, got {v!r}")
        if tp is None and gpus is None:
            raise UserError("tp", "give --tp or --gpus")
        if tp is None:
            if gpus % pp:  # type: ignore[operator]
                raise UserError("gpus", f"{gpus} GPUs do not split into {pp} pipeline stages")
            tp = gpus // pp  # type: ignore[operator]
        if not isinstance(tp, int) or tp < 1:
            raise UserError("tp", f"expected a positive integer, got {tp!r}")
        gpus = tp * pp if gpus is None else gpus
        if not isinstance(gpus, int) or gpus < 1 or gpus % (tp * pp):
            raise UserError("gpus", f"{gpus} GPUs is not a multiple of tp x pp = {tp * pp}")
        _check_model_split(model, tp, ep, pp, dp_attention)
        if kv_parallel and dp_attention:
            raise UserError("kv_parallel", "KV parallelism and attention data-parallelism both split the KV; pick one")
        return cls(tp=tp, ep=ep, pp=pp, dp_attention=dp_attention, replicas=gpus // (tp * pp),
                   kv_parallel=kv_parallel and tp > 1)


def _check_model_split(model: ModelSpec, tp: int, ep: int, pp: int, dp_attention: bool) -> None:
    if pp > model.num_layers:
        raise UserError("pp", f"{pp} stages for {model.num_layers} layers")
    heads = model.layers[0].attention.num_heads
    if not dp_attention and heads % tp:
        raise UserError("tp", f"{model.name} has {heads} attention heads, not divisible by tp={tp}")
    if ep > 1:
        if not model.is_moe:
            raise UserError("ep", f"{model.name} is dense; expert parallelism needs a MoE model")
        experts = next(layer.ffn.num_experts for layer in model.layers if layer.ffn.is_moe)
        if tp % ep:
            raise UserError("ep", f"ep={ep} must divide tp={tp} (experts are spread inside the TP group)")
        if experts % ep:
            raise UserError("ep", f"{experts} experts do not split evenly over ep={ep}")


def busiest_share(sequences: int, ranks: int, spread: bool = False) -> float:
    """Sequences on the busiest of `ranks` data-parallel ranks.

    Without `spread`, an exact even split (ceil). With it, the running sequences are taken as
    scattered over the ranks like independent draws (arrivals and finishes of random-length
    requests): the busiest rank holds about mean + sd sqrt(2 ln ranks) of them, the same
    expected-maximum estimate used for expert groups.
    """
    even = math.ceil(sequences / ranks)
    if not spread or ranks <= 1:
        return float(even)
    mean = sequences / ranks
    sd = math.sqrt(sequences * (1.0 / ranks) * (1.0 - 1.0 / ranks))
    return float(min(sequences, max(even, mean + sd * math.sqrt(2.0 * math.log(ranks)))))


def kv_split(model: ModelSpec, layout: Layout) -> float:
    """How many ways a replica's KV is divided over the GPUs of one stage (the rest is replication).

    MLA's latent is shared by all heads, so under tensor parallelism every GPU keeps all of it;
    GQA splits over at most num_kv_heads GPUs; attention data-parallelism splits sequences over tp,
    KV parallelism each sequence over tp.
    Weighted over layers by KV bytes per token, so mixed models get one effective figure.
    """
    if layout.dp_attention or layout.kv_parallel:
        return float(layout.tp)
    num = den = 0.0
    for layer in model.layers:
        a = layer.attention
        per_tok = (a.kv_lora_rank + a.qk_rope_head_dim) if a.kind == "mla" else 2 * a.num_kv_heads * a.head_dim
        split = 1 if a.kind == "mla" else min(layout.tp, a.num_kv_heads)
        num += per_tok
        den += per_tok / split
    return num / den if den else 1.0
