"""Trace replay: the shipped traces by name, and the publishers' larger files in their own formats.

Formats (detected from the file's columns/keys):

| format | columns / keys | arrival | prefix |
|---|---|---|---|
| azure (2023 code/conv, 2024 week-long) | TIMESTAMP, ContextTokens, GeneratedTokens | wall clock -> s since first | none |
| burstgpt | Timestamp, Model, Request tokens, Response tokens, Total tokens, Log Type [, Session ID, Elapsed time] | s | none (rows with 0 response tokens are failed calls: dropped) |
| mooncake (conversation, synthetic, toolagent) | timestamp (ms), input_length, output_length, hash_ids | ms -> s | 512-token hash ids |
| tracelab (agent_rounds.csv; JSONL rows with the same keys) | session_id, t_input_ready_s, input_tokens_total, output_tokens | per-session s, every session starting at 0 | session context is append-only |

Verified on the shipped files (Azure 2023, Mooncake conversation/synthetic, TraceLab CSV). The
BurstGPT, Azure 2024, Mooncake tool-agent and TraceLab JSONL paths follow the published column
names but were tested only on small files written in those formats, not on the originals.
`rate_scale` X multiplies the arrival rate (divides every arrival time by X); `trace_jitter_s` J adds
uniform [0, J) seconds to every arrival (the Mooncake timestamps fall in ~3 s buckets). Files may be gzipped.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from importlib import resources
from pathlib import Path

import numpy as np
import pandas as pd

from lpxsim.core.errors import UserError
from lpxsim.core.inputs import TOKENS_MAX
from lpxsim.serving.request import Request
from lpxsim.serving.workload import Workload, WorkloadConfig

TRACES = {
    "azure-code": "azure_llm_2023/AzureLLMInferenceTrace_code.csv",
    "azure-conv": "azure_llm_2023/AzureLLMInferenceTrace_conv.csv",
    "mooncake-conversation": "mooncake_fast25/conversation_trace.jsonl",
    "mooncake-synthetic": "mooncake_fast25/synthetic_trace.jsonl",
    "tracelab-agent": "tracelab_example/agent_rounds.csv",
}
TRACE_ALIASES = {"azure-code-2023": "azure-code", "azure-conv-2023": "azure-conv", "mooncake": "mooncake-conversation",
                 "tracelab": "tracelab-agent"}
MOONCAKE_BLOCK = 512


def trace_path(name_or_path: str) -> Path:
    """A shipped trace by name, or a file path."""
    key = TRACE_ALIASES.get(name_or_path.lower(), name_or_path.lower())
    if key in TRACES:
        return Path(str(resources.files("lpxsim").joinpath("data/traces", TRACES[key])))
    from lpxsim.core.inputs import check_path, is_file

    p = check_path(name_or_path, "trace")
    if is_file(p):
        return p
    raise UserError("trace", f"unknown trace {name_or_path!r}; expected a file or one of {', '.join(TRACES)}")


def _read_bytes(p: Path) -> bytes:
    """The trace's bytes (a .gz file decompressed), capped before and after decompression (a gzip bomb
    stops at the cap): `lpxsim.core.inputs.read_bytes`."""
    from lpxsim.core.inputs import TRACE_FILE_MAX_BYTES, read_bytes

    return read_bytes(p, "trace", TRACE_FILE_MAX_BYTES)


def _read_jsonl(p: Path) -> list[dict]:
    rows = []
    data = _read_bytes(p)
    i = 0
    try:
        text = data.decode("utf-8-sig")  # a byte-order mark is not part of the first row
    except UnicodeDecodeError as e:
        i = data.count(b"\n", 0, e.start)
        raise UserError("trace", f"{p.name} line {i + 1} is not UTF-8 text; expected a JSONL or CSV trace") from None
    for i, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line:
            continue
        try:
            row = json.loads(line)
        except (ValueError, RecursionError):  # bad JSON, absurd nesting, a number past the digit limit
            raise UserError("trace", f"{p.name} line {i} is not valid JSON") from None
        if not isinstance(row, dict):
            raise UserError("trace", f"{p.name} line {i}: expected a JSON object, got {type(row).__name__}")
        rows.append(row)
    return rows


def _need_keys(rows: list[dict], keys: tuple[str, ...], name: str) -> None:
    """Every row has every key the format needs (the format was detected from the first row)."""
    for i, r in enumerate(rows, 1):
        missing = [k for k in keys if k not in r]
        if missing:
            raise UserError(f"trace.{missing[0]}", f"{name} row {i} lacks {', '.join(missing)}")


def load_trace(name_or_path: str) -> pd.DataFrame:
    """Normalised trace: arrival_s (from 0), isl, osl, session, hash_ids (tuple or ()) — sorted by arrival."""
    p = trace_path(name_or_path)
    kind = Path(p.stem).suffix if p.suffix == ".gz" else p.suffix  # publishers ship .jsonl.gz / .csv.gz too
    if kind in (".jsonl", ".json") or (kind != ".csv" and _starts_json(p)):
        rows = _read_jsonl(p)
        if not rows:
            raise UserError("trace", f"{p.name} has no rows")
        keys = set(rows[0])
        if {"timestamp", "input_length", "output_length"} <= keys:
            _need_keys(rows, ("timestamp", "input_length", "output_length"), p.name)
            df = pd.DataFrame({
                "arrival_s": _numbers([r["timestamp"] for r in rows], "timestamp", p.name) / 1e3,
                "isl": _json_counts(rows, "input_length", p.name),
                "osl": _json_counts(rows, "output_length", p.name),
                "hash_ids": [_hash_ids(r.get("hash_ids", []), i, p.name) for i, r in enumerate(rows, 1)],
            })
            df["session"] = -1
            return _finish(df, p.name)
        if set(TRACELAB_KEYS) <= keys:
            _need_keys(rows, TRACELAB_KEYS, p.name)
            return _tracelab(pd.DataFrame(rows), p.name)
        raise UserError("trace", f"{p.name}: unrecognised JSONL keys {sorted(keys)[:6]}")
    try:
        raw = pd.read_csv(io.BytesIO(_read_bytes(p)))
    except UserError:
        raise
    except Exception as e:  # pandas raises several parser errors (and UnicodeDecodeError on binary files)
        raise UserError("trace", f"{p.name} is not a readable CSV ({type(e).__name__})") from None
    if raw.empty:
        raise UserError("trace", f"{p.name} has no rows")
    cols = {str(c) for c in raw.columns}
    if {"TIMESTAMP", "ContextTokens", "GeneratedTokens"} <= cols:
        try:
            with np.errstate(invalid="ignore"):  # an out-of-range stamp becomes NaT, refused just below
                ts = pd.to_datetime(raw["TIMESTAMP"], format="mixed")
        except (ValueError, TypeError, OverflowError):
            raise UserError("trace.TIMESTAMP", f"{p.name}: expected date-time stamps") from None
        if ts.isna().any():
            raise UserError("trace.TIMESTAMP", f"{p.name} row {int(ts.isna().to_numpy().argmax()) + 1} has no time")
        df = pd.DataFrame({"arrival_s": (ts - ts.min()).dt.total_seconds(), "isl": raw["ContextTokens"],
                           "osl": raw["GeneratedTokens"]})
        df["session"] = -1
        df["hash_ids"] = [()] * len(df)
        return _finish(df, p.name)
    if {"Timestamp", "Request tokens", "Response tokens"} <= cols:
        response = _numbers(raw["Response tokens"], "Response tokens", p.name)
        raw = raw[response > 0]
        stamp = _numbers(raw["Timestamp"], "Timestamp", p.name)
        df = pd.DataFrame({"arrival_s": stamp - (stamp.min() if len(stamp) else 0.0), "isl": raw["Request tokens"],
                           "osl": raw["Response tokens"]})
        df["session"] = pd.factorize(raw["Session ID"])[0] if "Session ID" in raw else -1
        df["hash_ids"] = [()] * len(df)
        return _finish(df, p.name)
    if set(TRACELAB_KEYS) <= cols:
        return _tracelab(raw, p.name)
    raise UserError("trace", f"{p.name}: unrecognised columns {sorted(cols)[:6]}")


TRACELAB_KEYS = ("session_id", "t_input_ready_s", "input_tokens_total", "output_tokens")
ARRIVAL_MAX_S = 1e12  # a trace's arrival times (after unit conversion) must be finite and within this


def _tracelab(raw: pd.DataFrame, name: str) -> pd.DataFrame:
    try:
        session = pd.factorize(raw["session_id"].astype(str))[0]
    except TypeError:
        raise UserError("trace.session_id", f"{name}: expected session ids") from None
    df = pd.DataFrame({
        "arrival_s": _numbers(raw["t_input_ready_s"], "t_input_ready_s", name),
        "isl": raw["input_tokens_total"].to_numpy(),
        "osl": raw["output_tokens"].to_numpy(),
        "session": session,
    })
    df["hash_ids"] = [()] * len(df)
    return _finish(df, name)


def _numbers(values, column: str, name: str, lo: float = -ARRIVAL_MAX_S, hi: float = ARRIVAL_MAX_S) -> np.ndarray:
    """A column as finite floats in [lo, hi], or a UserError naming the column and the first bad row."""
    raw = pd.Series(list(values) if not isinstance(values, pd.Series) else values.to_numpy(), dtype=object)
    is_bool = raw.map(lambda v: isinstance(v, bool)).to_numpy(dtype=bool)
    num = pd.to_numeric(raw, errors="coerce").to_numpy(dtype=float)
    bad = is_bool | ~np.isfinite(num) | (num < lo) | (num > hi)
    if bad.any():
        i = int(bad.argmax())
        raise UserError(f"trace.{column}", f"{name} row {i + 1}: expected a number in {lo:g}..{hi:g}, "
                                           f"got {raw.iloc[i]!r}")
    return num


def _starts_json(p: Path) -> bool:
    """A file without a .csv/.jsonl name whose first character is `{`: JSON lines (a CSV header never opens so)."""
    return _read_bytes(p).lstrip(b"\xef\xbb\xbf \t\r\n").startswith(b"{")


def _json_counts(rows: list[dict], key: str, name: str) -> list[int]:
    """A JSONL column of token counts: JSON whole numbers (a string or a fraction is refused, naming the row; the
    range is checked with the other formats' in `_finish`)."""
    for i, r in enumerate(rows, 1):
        v = r[key]
        if isinstance(v, bool) or not (isinstance(v, int) or (isinstance(v, float) and v.is_integer())):
            raise UserError(f"trace.{key}", f"{name} row {i}: expected a whole number of tokens, got {v!r}")
    return [r[key] for r in rows]


def _hash_ids(v: object, row: int, name: str) -> tuple[int, ...]:
    if not isinstance(v, (list, tuple)) or not all(isinstance(h, int) and not isinstance(h, bool) for h in v):
        raise UserError("trace.hash_ids", f"{name} row {row}: expected a list of integers")
    return tuple(v)


def _finish(df: pd.DataFrame, name: str = "trace") -> pd.DataFrame:
    if df.empty:
        raise UserError("trace", f"{name} has no requests")
    df = df.copy()
    df["arrival_s"] = _numbers(df["arrival_s"], "arrival", name)
    df["isl"] = np.maximum(1, _whole(_numbers(df["isl"], "input tokens", name, 0, TOKENS_MAX), "input tokens", name))
    df["osl"] = np.maximum(1, _whole(_numbers(df["osl"], "output tokens", name, 0, TOKENS_MAX), "output tokens", name))
    df = df.sort_values("arrival_s", kind="stable").reset_index(drop=True)
    return df


def _whole(num: np.ndarray, column: str, name: str) -> np.ndarray:
    """Token counts as integers; a fraction (10.5 tokens) is refused, naming the column and the row."""
    frac = num != np.floor(num)
    if frac.any():
        i = int(frac.argmax())
        raise UserError(f"trace.{column}", f"{name} row {i + 1}: expected a whole number of tokens, got {num[i]:g}")
    return num.astype(int)


class TraceWorkload(Workload):
    """Open-loop replay of a trace, arrival times divided by `rate_scale`."""

    SESSION_STRIDE = 1 << 24

    def __init__(self, cfg: WorkloadConfig, rng: np.random.Generator, duration_s: float | None) -> None:
        super().__init__(cfg, rng, duration_s)
        df = load_trace(cfg.trace or "")
        if cfg.trace_jitter_s > 0:  # spread bucketed timestamps (Mooncake: ~3 s buckets) uniformly
            df = df.assign(arrival_s=df["arrival_s"] + rng.uniform(0.0, cfg.trace_jitter_s, len(df)))
            df = df.sort_values("arrival_s", kind="stable").reset_index(drop=True)
            df["arrival_s"] -= df["arrival_s"].iloc[0]
        self.df = df
        self.scale = cfg.rate_scale

    def arrivals(self) -> Iterator[Request]:
        df = self.df
        n = len(df)
        klass = self._classes(n)
        acc = self._accept(n)
        times = (df["arrival_s"].to_numpy() / self.scale).tolist()
        isl, osl = df["isl"].tolist(), df["osl"].tolist()
        sess, hashes = df["session"].tolist(), df["hash_ids"].tolist()
        in_session = df["session"] >= 0
        turn = df.groupby("session").cumcount().where(in_session, 0).tolist()
        last = (in_session & ~df["session"].duplicated(keep="last")).tolist()
        limit = self.cfg.num_requests or n
        for i in range(min(n, limit)):
            t = times[i]
            if not self._in_window(t):
                return
            s = int(sess[i])
            r = Request(self._rid(), t, isl[i], osl[i], hash_ids=hashes[i], hash_block_tokens=MOONCAKE_BLOCK,
                        session_hash_base=s * self.SESSION_STRIDE if s >= 0 and not hashes[i] else -1,
                        session=s, turn=int(turn[i]), klass=klass[i])
            r.last_turn = bool(last[i])
            r.accept_rate = float(acc[i])
            yield r
