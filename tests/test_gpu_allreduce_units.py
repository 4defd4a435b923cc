"""The measured all-reduce table is looked up by BF16 elements, as aiconfigurator-core keys it (AIC-AR-UNITS)."""

import pytest


def test_compose_looks_up_elements_not_bytes(monkeypatch):
    from lpxsim.gpu.step import GpuStepModel
    from lpxsim.step.protocol import PrefillChunk

    m = GpuStepModel("llama-3.1-70b", "b200-hgx", tp=8, weights="fp8", kv="fp8", framework="trtllm")
    ops = m.source[0]
    if ops is None or ops.all_reduce(1 << 20, 8, False) is None:
        pytest.skip("no measured all-reduce table installed")
    seen = []
    real = type(ops).all_reduce

    def spy(self, size, gpus, graphs):
        seen.append(size)
        return real(self, size, gpus, graphs)

    monkeypatch.setattr(type(ops), "all_reduce", spy)
    m._priced.clear()
    m._persisted_price = lambda *a: __import__("lpxsim.gpu.compose", fromlist=["x"]).price_measured(
        m, m._get("prefill", a[1], (0,) * a[2]), a[0], a[1], a[3], a[4])
    m.prefill(PrefillChunk(4096))
    assert seen and max(seen) == 4096 * m.model.hidden_size  # elements: tokens x hidden, not x 2 bytes
