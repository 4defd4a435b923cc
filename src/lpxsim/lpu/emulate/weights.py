"""Map a Hugging Face state dict (as numpy) onto the op graph's logical weight names.

Graph names are HF module paths without the `model.` prefix and `.weight`
suffix (`layers.3.self_attn.q_proj`, `embed_tokens`, `norm`, `lm_head`).
Linear weights keep HF's [out, in] orientation, so a matmul computes x @ W.T
and a column split of the product is a row slice of W. The graph fuses a dense
MLP's gate and up projections into `...mlp.gate_up_proj` ([gate; up] stacked
along `out`), as HF already stores routed experts (`...mlp.experts.gate_up_proj`
[E, 2I, H], `...mlp.experts.down_proj` [E, H, I]).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from lpxsim.core.errors import UserError


def graph_weights(state: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Rename and fuse an HF state dict (numpy float32) into graph weight names."""
    out: dict[str, np.ndarray] = {}
    gates: dict[str, np.ndarray] = {}
    ups: dict[str, np.ndarray] = {}
    for hf_name, arr in state.items():
        name = hf_name.removeprefix("model.")
        if name.endswith(".layer_scalar"):
            if not np.all(arr == 1.0):
                raise UserError("weights", f"{hf_name} is not 1: per-layer scalars are not in the op graph")
            continue
        name = name.removesuffix(".weight")
        a = np.ascontiguousarray(arr, dtype=np.float32)
        if name.endswith(".gate_proj"):
            gates[name.removesuffix(".gate_proj")] = a
        elif name.endswith(".up_proj"):
            ups[name.removesuffix(".up_proj")] = a
        else:
            out[name] = a
    for prefix, g in gates.items():
        if prefix not in ups:
            raise UserError("weights", f"{prefix}.gate_proj has no matching up_proj")
        out[f"{prefix}.gate_up_proj"] = np.concatenate([g, ups.pop(prefix)], axis=0)
    if ups:
        raise UserError("weights", f"up_proj without gate_proj: {sorted(ups)[0]}")
    return out
