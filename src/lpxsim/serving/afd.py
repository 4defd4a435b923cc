"""Attention/FFN disaggregation as one StepModel: attention + KV on one pool, FFN/MoE on another.

Per layer and token, the attention side sends the hidden state to the FFN side
and gets the result back: activations cross twice per layer per token. The
batch is split into `micro_batches` (2 = ping-pong, as MegaScale-Infer): while
one micro-batch is in the FFN, the other runs attention. With A, F the
per-layer attention and FFN times of one micro-batch, X the one-way transfer
(link latency + bytes / bandwidth), and the FFN rack and the link time-shared by
the `s` attention replicas currently busy on the same FFN replica:

    ping-pong:  T_layer = max(2A, 2 s F_interval, A + F_latency + 2X, 2 s bytes / bandwidth)
    one batch:  T_layer = A + max(F_latency, s F_interval) + 2X

and a step is num_layers x T_layer (a serial cost: the attention side is a GPU).
The attention side implements the attention half of `lpxsim.serving.protocols.SplitStepModel`
(the GPU model does), the FFN side its `ffn_step` (a compiled FFN-only LPX program does).
"""

from __future__ import annotations

from lpxsim.core.errors import UserError
from lpxsim.serving.spec import Link
from lpxsim.serving.worker import SharedResource
from lpxsim.step.protocol import DecodeBatch, PrefillChunk, StepCost, StepModel


class AfdStepModel:
    """One attention replica plus its share of an FFN replica, seen as a single StepModel."""

    def __init__(self, attention: StepModel, ffn: StepModel, link: Link, share: SharedResource,
                 attention_per_ffn: int, micro_batches: int = 2) -> None:
        for side, m, need in (("attention", attention, ("attention_step", "attention_prefill", "num_layers",
                                                           "activation_bytes_per_token")),
                              ("ffn", ffn, ("ffn_step",))):
            if not all(hasattr(m, a) for a in need):
                raise UserError(f"pools.{side}.backend", f"{m.name} cannot serve as the {side} side of an AFD "
                                                         f"pair (needs {', '.join(need)})")
        if micro_batches not in (1, 2):
            raise UserError("afd.micro_batches", f"expected 1 or 2, got {micro_batches}")
        self.attention = attention
        self.ffn = ffn
        self.link = link
        self.share = share
        self.attention_per_ffn = max(1, attention_per_ffn)
        self.micro_batches = micro_batches
        self._cache: dict = {}

    @property
    def name(self) -> str:
        return f"afd({self.attention.name} | {self.ffn.name})"

    @property
    def chips(self) -> int:
        return self.attention.chips + self.ffn.chips // self.attention_per_ffn

    @property
    def power_w(self) -> float:
        return self.attention.power_w + self.ffn.power_w / self.attention_per_ffn

    def kv_capacity_bytes(self) -> float:
        return self.attention.kv_capacity_bytes()

    def kv_bytes(self, context: int) -> float:
        return self.attention.kv_bytes(context)

    def max_batch(self) -> int:
        return min(self.attention.max_batch(), self.ffn.max_batch())

    def _layered(self, tokens: int, attn: StepCost) -> StepCost:
        s = max(1, self.share.active)
        key = (tokens, attn.latency_s, s)
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        layers = self.attention.num_layers
        m = self.micro_batches if tokens >= 2 else 1
        mb = -(-tokens // m)
        a = attn.latency_s / layers
        f = self.ffn.ffn_step(mb)
        f_lat, f_int = f.latency_s / layers, f.interval_s / layers
        nbytes = mb * self.attention.activation_bytes_per_token
        x = self.link.latency_s + nbytes / self.link.bandwidth_Bps
        if m == 2:
            t = max(2 * a, 2 * s * f_int, a + f_lat + 2 * x, 2 * s * nbytes / self.link.bandwidth_Bps)
        else:
            t = a + max(f_lat, s * f_int) + 2 * x
        cost = self._cache[key] = StepCost.serial(layers * t)
        return cost

    def decode_step(self, batch: DecodeBatch) -> StepCost:
        m = self.micro_batches if batch.size >= 2 else 1
        mb = -(-batch.size // m)
        ctx = sum(batch.contexts) // max(1, batch.size)
        return self._layered(batch.size, self.attention.attention_step(DecodeBatch.uniform(mb, ctx)))

    def prefill(self, chunk: PrefillChunk) -> StepCost:
        tokens = chunk.tokens * chunk.sequences
        m = self.micro_batches if tokens >= 2 else 1
        half = PrefillChunk(max(1, -(-chunk.tokens // m)), chunk.context, chunk.sequences)
        return self._layered(tokens, self.attention.attention_prefill(half))

    def verify(self, batch: DecodeBatch, k: int) -> StepCost:
        ctx = sum(batch.contexts) // max(1, batch.size)
        return self.prefill(PrefillChunk(k + 1, ctx, batch.size))
