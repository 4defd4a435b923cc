"""What an emulated chip holds: its buffers (with the cycles they become readable) and its KV cache."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

F32 = np.float32


class EmulationError(RuntimeError):
    """A compiled Program did something the hardware cannot: named by op, chip and cycle."""

    def __init__(self, op: str, chip: int, cycle: int, message: str) -> None:
        super().__init__(f"op {op!r} on chip {chip} at cycle {cycle}: {message}")
        self.op, self.chip, self.cycle = op, chip, cycle


@dataclass
class Value:
    """A buffer's contents on one chip.

    `data` is an ndarray [rows, cols] for ordinary tensors, (o, lse) for "lse"
    partials, (max_logit, token) for "argmax" partials, (weights, expert ids)
    for a router's output and None for a kv_write (a pure dependency).
    `avail` is the cycle from which a reader may start (first vector),
    `end` the cycle its last vector is in place. `meta` carries layout facts a
    consumer needs (rope buffers: q_cols, k_cols).
    """

    data: Any
    avail: int
    end: int
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass
class KVSlot:
    """One (layer, sequence, KV head) of cache on one chip: positions it has written, grown on demand."""

    k: np.ndarray
    v: np.ndarray
    have: np.ndarray

    @classmethod
    def empty(cls, d: int, dv: int) -> KVSlot:
        return cls(np.zeros((0, d), F32), np.zeros((0, dv), F32), np.zeros(0, bool))

    def write(self, pos: int, k: np.ndarray, v: np.ndarray) -> None:
        if pos >= len(self.have):
            grow = max(pos + 1, 2 * len(self.have), 16) - len(self.have)
            self.k = np.concatenate([self.k, np.zeros((grow, self.k.shape[1]), F32)])
            self.v = np.concatenate([self.v, np.zeros((grow, self.v.shape[1]), F32)])
            self.have = np.concatenate([self.have, np.zeros(grow, bool)])
        self.k[pos], self.v[pos], self.have[pos] = k, v, True

    def holds(self, positions: np.ndarray) -> bool:
        return bool(len(positions) == 0 or (positions.max() < len(self.have) and self.have[positions].all()))


@dataclass
class ChipState:
    """One chip: its buffers by id and its KV cache by (layer, sequence, kv head)."""

    chip: int
    buffers: dict[str, Value] = field(default_factory=dict)
    kv: dict[tuple[int, int, int], KVSlot] = field(default_factory=dict)

    def slot(self, layer: int, seq: int, head: int, d: int, dv: int) -> KVSlot:
        key = (layer, seq, head)
        if key not in self.kv:
            self.kv[key] = KVSlot.empty(d, dv)
        return self.kv[key]
