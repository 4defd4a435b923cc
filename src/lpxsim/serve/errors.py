"""OpenAI-style error objects: every refusal is `{"error": {message, type, param, code}}` with a 4xx.

Malformed JSON, unknown fields and wrong types are caught here and answered with a 400 naming the field;
nothing a client sends reaches a traceback.
"""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException


class ApiError(Exception):
    """A refusal with its HTTP status, OpenAI error type, offending field and code."""

    def __init__(self, status: int, message: str, param: str | None = None, code: str | None = None,
                 type_: str = "invalid_request_error") -> None:
        super().__init__(message)
        self.status, self.message, self.param, self.code, self.type = status, message, param, code, type_


def error_body(message: str, type_: str = "invalid_request_error", param: str | None = None,
               code: str | None = None) -> dict:
    return {"error": {"message": message, "type": type_, "param": param, "code": code}}


def error_response(status: int, message: str, type_: str = "invalid_request_error", param: str | None = None,
                   code: str | None = None, headers: dict | None = None) -> JSONResponse:
    return JSONResponse(error_body(message, type_, param, code), status_code=status, headers=headers)


def _validation(exc: RequestValidationError) -> JSONResponse:
    errs = exc.errors()
    if not errs:
        return error_response(400, "invalid request body")
    e = errs[0]
    loc = [str(x) for x in e.get("loc", ()) if x != "body"]
    param = ".".join(loc) or None
    kind = e.get("type", "")
    if kind == "json_invalid":
        return error_response(400, "the body is not valid JSON", code="invalid_json")
    if kind == "extra_forbidden":
        return error_response(400, f"unknown field {param!r}", param=param, code="unknown_field")
    if kind == "missing":
        return error_response(400, f"missing field {param!r}", param=param, code="missing_field")
    msg = str(e.get("msg", "invalid value")).removeprefix("Value error, ")
    return error_response(400, f"{param}: {msg}" if param else msg, param=param, code="invalid_value")


def install(app: FastAPI) -> None:
    """Answer every refusal (and any unexpected failure) with an OpenAI-style error object."""

    @app.exception_handler(ApiError)
    async def _api(_: Request, exc: ApiError) -> JSONResponse:
        return error_response(exc.status, exc.message, exc.type, exc.param, exc.code)

    @app.exception_handler(RequestValidationError)
    async def _invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        return _validation(exc)

    @app.exception_handler(StarletteHTTPException)
    async def _http(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = {404: "not_found", 405: "method_not_allowed", 413: "body_too_large"}.get(exc.status_code)
        return error_response(exc.status_code, str(exc.detail), code=code)

    @app.exception_handler(Exception)
    async def _internal(_: Request, exc: Exception) -> JSONResponse:  # a bug here, never the client's input
        return error_response(500, f"internal error ({type(exc).__name__})", type_="server_error")
