"""Small fleets and workloads shared by the serving tests (catalog systems; the modules run `backend: auto`
pools on the test double of tests/analytic_double.py)."""

from __future__ import annotations


def pool(name="p", system="vr-nvl72", model="gemma-4-31b", workers=1, role="aggregated", backend="auto",
         **kw) -> dict:
    d = {"name": name, "system": system, "backend": backend, "model": model, "workers": workers, "role": role}
    if "gpus_per_worker" not in kw and "chips_per_worker" not in kw and "racks_per_worker" not in kw:
        kw["gpus_per_worker" if system != "lpx" else "racks_per_worker"] = 8 if system != "lpx" else 1
    d.update(kw)
    return d


def fleet(*pools, **kw) -> dict:
    return {"name": kw.pop("name", "test"), "pools": list(pools), **kw}


def synthetic(n=200, rate=20.0, isl=(512, 4096), osl=(16, 256), **kw) -> dict:
    d = {
        "name": "syn", "kind": "synthetic", "num_requests": n,
        "arrival": {"process": "poisson", "rate": rate},
        "isl": {"kind": "uniform", "low": isl[0], "high": isl[1]} if isinstance(isl, tuple) else isl,
        "osl": {"kind": "uniform", "low": osl[0], "high": osl[1]} if isinstance(osl, tuple) else osl,
    }
    d.update(kw)
    return d


LINK = {"kind": "ethernet", "bandwidth_Bps": 100e9, "latency_s": 5e-6}


def link(a: str, b: str, **kw) -> dict:
    return {"between": [a, b], **LINK, **kw}
