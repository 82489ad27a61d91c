"""JSON as the RFC has it, for the operator API's FastAPI routes: ``NaN``, ``Infinity`` and
numbers beyond a float are refused (a 422), and a 422 that echoes such input still encodes."""

from __future__ import annotations

import json
import math
from collections.abc import Callable

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from fastapi.routing import APIRoute


def _not_finite(text: str) -> float:
    raise json.JSONDecodeError(f"{text} is not a finite number (JSON has none)", text, 0)


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise json.JSONDecodeError(f"{text} is out of the range of a float", text, 0)
    return value


def strict_loads(raw: bytes | str) -> object:
    """JSON as the RFC has it: ``NaN``, ``Infinity`` and numbers beyond a float (``1e400``) are
    refused (a 422 from FastAPI's JSON-error path, instead of a value that later fails to encode
    in an answer: the 500s of issue 22)."""
    return json.loads(raw, parse_constant=_not_finite, parse_float=_finite_float)


class StrictJsonRequest(Request):
    """A request whose JSON body is read with :func:`strict_loads`."""

    async def json(self) -> object:
        if not hasattr(self, "_json"):
            self._json = strict_loads(await self.body())
        return self._json


class StrictJsonRoute(APIRoute):
    """Every FastAPI route reads its body through :class:`StrictJsonRequest`."""

    def get_route_handler(self) -> Callable:
        handler = super().get_route_handler()

        async def route(request: Request) -> Response:
            return await handler(StrictJsonRequest(request.scope, request.receive))
        return route


def _encodable(obj: object) -> object:
    """``obj`` with every non-finite float written as text, so that an error answer that echoes
    the input always encodes."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return repr(obj)
    if isinstance(obj, dict):
        return {k: _encodable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_encodable(v) for v in obj]
    return obj


async def validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
    """FastAPI's 422, with inputs it could not encode (NaN, inf) written as text."""
    from fastapi.encoders import jsonable_encoder

    return JSONResponse(status_code=422, content={"detail": jsonable_encoder(_encodable(exc.errors()))})
