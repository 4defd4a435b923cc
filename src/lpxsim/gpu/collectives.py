"""Collectives on GPU fabrics with an alpha-beta model.

t = alpha + wire bytes per GPU / effective bandwidth. Ring algorithms move
2(n-1)/n of the buffer per GPU for an all-reduce, (n-1)/n for an all-gather or
reduce-scatter (buffer = the gathered size) and for an all-to-all (buffer = the
bytes one GPU sends in total). alpha and the effective bandwidth come from the
system catalog: NVLink inside the scale-up domain (an HGX node of 8, or an
NVL72 rack of 72), the scale-out NIC between domains (hardware.md §9: NCCL
all-reduce alpha ~6 us with CUDA graphs on NVLink, ~45 us across IB nodes;
ring busBW ~370 GB/s on NVLink4).
"""

from __future__ import annotations

from dataclasses import dataclass

from lpxsim.specs.hardware import SystemSpec

# Fraction of the NIC line rate NCCL reaches across nodes. Only the NVLink figure is measured
# (370/450); the same protocol overhead is assumed for IB (docs/assumptions.md, "GPU cost model").
SCALE_OUT_BW_EFF = 370.0 / 450.0
# alpha without CUDA graphs when the catalog has no separate figure: hardware.md §9 "5-10 us intra-node
# (3-6 us with CUDA graphs)", i.e. about 1.25x.
NO_GRAPH_ALPHA_FACTOR = 1.25


@dataclass(frozen=True)
class Fabric:
    """One collective fabric: small-message latency and effective per-GPU bandwidth per direction."""

    name: str
    alpha_s: float
    bw_Bps: float

    def all_reduce_s(self, nbytes: float, n: int) -> float:
        """Ring all-reduce of an `nbytes` buffer over `n` GPUs."""
        return 0.0 if n <= 1 else self.alpha_s + 2.0 * (n - 1) / n * nbytes / self.bw_Bps

    def all_gather_s(self, nbytes: float, n: int) -> float:
        """All-gather whose gathered (output) buffer is `nbytes`."""
        return 0.0 if n <= 1 else self.alpha_s + (n - 1) / n * nbytes / self.bw_Bps

    def reduce_scatter_s(self, nbytes: float, n: int) -> float:
        """Reduce-scatter whose input buffer is `nbytes`."""
        return self.all_gather_s(nbytes, n)

    def all_to_all_s(self, nbytes: float, n: int) -> float:
        """All-to-all where each GPU sends `nbytes` in total, spread evenly over the group."""
        return 0.0 if n <= 1 else self.alpha_s + (n - 1) / n * nbytes / self.bw_Bps

    def p2p_s(self, nbytes: float) -> float:
        """One point-to-point send (pipeline stage boundary)."""
        return self.alpha_s + nbytes / self.bw_Bps


def _extra(system: SystemSpec, key: str) -> float | None:
    v = system.chip.extra.get(key)
    return float(v) if v is not None else None


def scale_up_fabric(system: SystemSpec, cuda_graphs: bool = True) -> Fabric:
    """NVLink (or Infinity Fabric) inside one scale-up domain."""
    link = system.topology.links.get("scale_up")
    alpha = _extra(system, "allreduce_alpha_s") or (float(link.latency_s) if link else 6e-6)
    if not cuda_graphs:
        alpha = _extra(system, "allreduce_alpha_nograph_s") or alpha * NO_GRAPH_ALPHA_FACTOR
    bw = _extra(system, "scale_up_busbw_Bps")
    if bw is None:
        bw = link.bandwidth_Bps if link else float(system.chip.nvlink_Bps or 0.0)
    return Fabric("scale-up", alpha, bw)


def scale_out_fabric(system: SystemSpec) -> Fabric:
    """The NIC path between scale-up domains (InfiniBand / Ethernet)."""
    link = system.topology.links.get("scale_out")
    alpha = _extra(system, "allreduce_alpha_scale_out_s") or (float(link.latency_s) if link else 45e-6)
    bw = link.line_bandwidth_Bps * SCALE_OUT_BW_EFF if link else 50e9
    return Fabric("scale-out", alpha, bw)


def domain_size(system: SystemSpec) -> int:
    """GPUs in one scale-up domain (8 in an HGX node, 72 in an NVL72 rack)."""
    return system.topology.chips_per_node * (
        system.topology.nodes_per_rack if system.topology.kind == "nvlink-domain" else 1
    )


def fabric_for(system: SystemSpec, group: int, cuda_graphs: bool = True) -> Fabric:
    """The fabric a collective over `group` GPUs runs on: NVLink if it fits one domain, else scale-out.

    A group spanning domains is bounded by its slowest hop: the scale-out alpha and NIC bandwidth
    (hierarchical algorithms do the NVLink part in parallel and are limited by the NIC).
    """
    if group <= domain_size(system):
        return scale_up_fabric(system, cuda_graphs)
    return scale_out_fabric(system)
