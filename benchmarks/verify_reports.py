"""Verify reports on ~65 corrupted copies of a compiled program, as JSON: a verifier speed change must leave
every report identical (docs/benchmarks.md, "A faster verifier, sixth pass").

Each case corrupts one thing (the mutations of tests/test_lpu_verify.py and tests/test_lpu_compile.py, and
more: undeclared names, equal-but-distinct buffer ids, broken link paths, clashing buffers, ...) in the
step-model program of `benchmarks/bench_verify.py` and records the whole report (ok, errors, counts, link
conflicts, region overlaps, dependency errors, skipped). Run it on the tree before and after and compare:

    PYTHONPATH=<tree>/src python benchmarks/verify_reports.py gemma-decode,gemma-prefill OUT.json

`LPXSIM_VERIFY_IDMIN=<n>` sets `lpxsim.lpu.verify.IDENTITY_MIN_BUFFERS` (10**12: buffer names through the dict).
"""

import importlib
import json
import os
import sys
import tempfile
from dataclasses import replace as R
from pathlib import Path

os.environ.setdefault("LPXSIM_CACHE", tempfile.mkdtemp())
sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_verify import _compiled  # noqa: E402
from lpxsim.lpu import Program, verify  # noqa: E402

if os.environ.get("LPXSIM_VERIFY_IDMIN"):
    importlib.import_module("lpxsim.lpu.verify").IDENTITY_MIN_BUFFERS = int(os.environ["LPXSIM_VERIFY_IDMIN"])
out: dict = {}


def rec(name, q, graph, arch):
    r = verify(q, graph, arch)
    out[name] = [
        r.ok,
        r.errors,
        r.counts,
        r.link_conflicts,
        r.region_overlaps,
        r.dependency_errors,
        r.skipped,
    ]


def corrupt_all(case: str) -> None:
    """Verify the case's program and each corrupted copy; reports into `out`."""
    p, graph, arch, _ = _compiled(case)

    def go(name, **kw):
        rec(f"{case}:{name}", R(p, **kw), graph, arch)

    def go_buffer(name, key, **changes):
        """The program with buffer `key` replaced by a copy with `changes`."""
        go(name, buffers={**B, key: R(B[key], **changes)})

    rec(f"{case}:clean", p, graph, arch)
    rec(f"{case}:noctx", p, None, None)
    INS, T, B, G = list(p.instructions), list(p.transfers), dict(p.buffers), list(p.regions)
    # test_lpu_verify mutations
    k, ins = max(
        ((k, i) for k, i in enumerate(INS) if i.unit == "MXM"), key=lambda x: x[1].attrs["busy_cycles"]
    )
    L = list(INS)
    L[k] = R(ins, attrs={**ins.attrs, "busy_cycles": 1})
    go("busycut", instructions=L)
    red = [
        (k, i)
        for k, i in enumerate(INS)
        if i.kind == "reduce"
        and len(i.inputs) >= 3
        and B[i.output].partial is None
        and i.attrs.get("fn") != "argmax"
    ]
    for j, (k, ins) in enumerate(red[:3] + red[-2:]):
        L = list(INS)
        L[k] = R(ins, inputs=ins.inputs[:-1])
        go(f"unreduced{j}", instructions=L)
        go(f"missingpartial{j}", instructions=L, transfers=[t for t in T if t.dst_buffer != ins.inputs[-1]])
        L = list(INS)
        L[k] = R(ins, inputs=(*ins.inputs, ins.inputs[-1]))
        go(f"twice{j}", instructions=L)
        L = list(INS)
        L[k] = R(ins, inputs=(*ins.inputs, ins.inputs[0], ins.inputs[1]))
        go(f"twice2{j}", instructions=L)
    go("delweights", regions=[r for r in G if not r.name.startswith("w:L7.")])
    for kk, r in enumerate(G):
        if r.kind == "weights":
            GG = list(G)
            GG[kk] = R(r, size_bytes=r.size_bytes // 2)
            go("shrunkw", regions=GG)
            break
    go("nonexttok", transfers=[t for t in T if not t.dst_buffer.startswith("next_tokens@")])
    tail = {"logits", "sample"}
    gone = {i.output for i in INS if i.op in tail}
    go(
        "notail",
        instructions=[i for i in INS if i.op not in tail],
        transfers=[t for t in T if t.src_buffer not in gone and B[t.dst_buffer].op not in tail],
    )
    for k, ins in enumerate(INS):
        if ins.kind == "matmul" and "cols" in ins.slice:
            L = list(INS)
            L[k] = R(ins, slice={**ins.slice, "cols": (ins.slice["cols"][0], ins.slice["cols"][0] + 1)})
            go("colslice", instructions=L)
            L = list(INS)
            lo, hi = ins.slice["cols"]
            L[k] = R(ins, slice={**ins.slice, "cols": (lo + 10**6, hi + 10**6)})
            go("outside", instructions=L)
            L = list(INS)
            L[k] = R(ins, slice={**ins.slice, "rows": (0, 1)})
            go("rows", instructions=L)
            L = list(INS)
            L.append(ins)
            go("dupins", instructions=L)
            break
    att = [k for k, i in enumerate(INS) if i.kind == "attention"]
    if att:
        a = INS[att[0]]
        kb = next(
            (k for k in att if INS[k].op == a.op and INS[k].slice.get("heads") != a.slice.get("heads")), None
        )
        if kb is not None:
            L = list(INS)
            L[kb] = R(INS[kb], slice={**INS[kb].slice, "heads": a.slice["heads"]})
            go("dupatt", instructions=L)
        L = list(INS)
        L[att[0]] = R(a, slice={**a.slice, "kv_stripe": (0, 7)})
        go("stripe", instructions=L)
    k, t = max(enumerate(T), key=lambda x: x[1].bytes)
    TT = list(T)
    TT[k] = R(t, ser_cycles=1)
    go("sercut", transfers=TT)
    # structural
    TT = list(T)
    TT[5] = R(T[5], links=())
    go("nolinks", transfers=TT)
    TT = list(T)
    TT[7] = R(T[7], links=((10**6, 0),) + tuple(T[7].links))
    go("unknownlink", transfers=TT)
    TT = list(T)
    TT[9] = R(T[9], links=tuple(T[9].links) + tuple(T[9].links))
    go("badpath", transfers=TT)
    TT = list(T)
    TT[11] = R(T[11], arrive_cycle=T[11].send_cycle)
    go("fast", transfers=TT)
    TT = list(T)
    TT[13] = R(T[13], send_cycle=0)
    go("earlysend", transfers=TT)
    TT = list(T)
    TT[15] = R(T[15], src_buffer="undeclared@x")
    go("undeclsrc", transfers=TT)
    TT = list(T)
    TT[17] = R(T[17], dst_buffer=T[18].dst_buffer)
    go("dupwrite", transfers=TT)
    by = {}
    for k, t in enumerate(T):
        by.setdefault(t.links[0] if t.links else None, []).append(k)
    k1, k2 = next(v for kk, v in by.items() if kk and len(v) > 1)[:2]
    TT = list(T)
    TT[k2] = R(
        T[k2],
        send_cycle=T[k1].send_cycle,
        arrive_cycle=T[k2].arrive_cycle + 10**6,
        end_cycle=T[k2].end_cycle + 10**6,
    )
    go("linkclash", transfers=TT)
    L = list(INS)
    L[-1] = R(INS[-1], inputs=(*INS[-1].inputs, "nothing@0"))
    go("missinginput", instructions=L)
    L = list(INS)
    L[3] = R(INS[3], output="undecl_out@3")
    go("undeclout", instructions=L)
    L = list(INS)
    L[4] = R(INS[4], cycle_start=INS[4].cycle_end + 5)
    go("inconsistent", instructions=L)
    L = list(INS)
    L[6] = R(INS[6], attrs={kk: v for kk, v in INS[6].attrs.items() if kk != "busy_cycles"})
    go("nobusy", instructions=L)
    L = list(INS)
    L[8] = R(INS[8], chip=(INS[8].chip + 1))
    go("wrongchip", instructions=L)
    L = list(INS)
    L[100] = R(INS[100], unit="XYZ")
    go("badunit", instructions=L)
    for k, ins in enumerate(INS):
        if any(b in {t.dst_buffer for t in T[:2000]} for b in ins.inputs):
            L = list(INS)
            L[k] = R(ins, cycle_start=0, first_out_cycle=0)
            go("earlyread", instructions=L)
            break
    by = {}
    for k, ins in enumerate(INS):
        by.setdefault((ins.chip, ins.unit), []).append(k)
    k1, k2 = next(v for v in by.values() if len(v) > 1)[:2]
    L = list(INS)
    L[k2] = R(INS[k2], cycle_start=INS[k1].cycle_start)
    go("unitoverlap", instructions=L)
    go("regionoverlap", regions=G + [R(G[0], name="intruder")])
    GG = list(G)
    GG[-1] = R(G[-1], size_bytes=p.chip_sram_bytes)
    go("overcap", regions=GG)
    GG = list(G)
    GG[2] = R(G[2], offset_bytes=-5)
    go("negregion", regions=GG)
    # buffers
    keys = list(B)
    go_buffer("badregion", keys[10], region="nowhere")
    go_buffer("bufoutside", keys[20], offset_bytes=10**12)
    go_buffer("noregion", keys[30], region="")
    go_buffer("idmismatch", keys[40], id="other-id")
    acts = [b for b in B.values() if b.region.startswith("act@")]
    go_buffer("share", acts[5].id, offset_bytes=acts[4].offset_bytes)
    go_buffer("share2", acts[50].id, offset_bytes=acts[51].offset_bytes)
    # equal-but-not-identical keys: the name path
    BB = {("" + k + "x")[:-1]: v for k, v in B.items()}
    go("copiedkeys", buffers=BB)
    BB = {k: v for k, v in list(B.items())[::-1]}
    go("reversedkeys", buffers=BB)
    BB = dict(B)
    del BB[keys[50]]
    go("delbuffer", buffers=BB)
    tok = [k for k, b in B.items() if b.op == "tokens"]
    if tok:
        go_buffer("tokop", tok[0], op="notokens")
    samp = [k for k, b in B.items() if b.op == "sample" and b.partial is None]
    if samp:
        go_buffer("samppart", samp[-1], partial="sum")
    q = Program.from_dict(p.to_dict())
    rec(f"{case}:roundtrip", q, graph, arch)


def main() -> None:
    for case in sys.argv[1].split(","):
        corrupt_all(case)
    with open(sys.argv[2], "w") as f:
        json.dump(out, f, indent=0, sort_keys=True, default=str)
    print(len(out), "cases;", sum(1 for v in out.values() if not v[0]), "failing")


if __name__ == "__main__":
    main()
