"""OpenEnv environment server for one seat of a Nexus env, over the text protocol (extra `openenv`).

Built on `openenv-core` (`openenv.core`): `NexusEnvironment` is an `Environment` with typed
pydantic models, `NexusAction(message=...)` (a reply in the seed's syntax, read by
`protocol.parse`: `PROPOSE 2 10E 5C`, `ACCEPT 1`, prose around it is fine) and
`NexusObservation` (the `protocol.render` prompt plus structured fields, reward and done).

    from nexus_jax.adapters.openenv import NexusAction, NexusClient, serve
    with serve("nexus-v0") as server:                      # uvicorn on 127.0.0.1, a free port
        client = NexusClient(base_url=server.url).sync()     # WebSocket session (/ws)
        with client:
            r = client.reset(seed=0)
            print(r.observation.prompt)
            r = client.step(NexusAction(message="WORK E"))

`create_nexus_app(env_id, **overrides)` gives the FastAPI app (serve it however you like:
`uvicorn.run(app, host=..., port=...)`). A session is a WebSocket connection (`/ws`), with its
own episode; OpenEnv's HTTP `/reset` and `/step` are stateless (a fresh env per request), so
multi-step play goes through the WebSocket client: HTTP `/reset` returns a first observation,
and HTTP `/step` is a 409 saying so (a fresh env has no episode to step). Both HTTP routes have
the WebSocket path's limits (`HttpLimits`; docs/robustness.md). Every session of a server shares
one compiled env (`adapters._core.compiled`): reset and step compile once per process.

Semantics are `nexus_jax.play`'s: `reset(seed=s)` starts its key schedule at PRNGKey(s)
(`reset()` continues the running key), each step parses the reply (WAIT on a parse error),
the env's NPCs play the other seats inside the step, and the next prompt carries the
feedback on the reply and the env's error code for an invalid action. The env must leave
exactly one seat to the caller (`nexus-v0` and its NPC variants; `seat=i` plays seat i).
The observation at `done` is the terminal state's; step again only after `reset`.

crisis-v0 (and `crisis-v0-levelN`) is served the same way through its text seat
(`nexus_jax.protocol.seats`): the message is the seed's JSON action
(`{"action_type": "request_resource", "task_id": "clean_batch_1"}`; a reply that cannot be
read is an invalid action), `seat=i` is the seat played (default 0), and since crisis-v0 has
no NPC seats (`env.spec.npc_seats`) the other seats play `others` ("random", "wait" or one of
the env's heuristics, by default its reference "edf", earliest deadline first), with play.py's
`k_others` key: a session's trajectory is `nexus_jax.play`'s.
"""
from __future__ import annotations

import asyncio
import functools
import json
import threading
import time
from typing import Any, List, Optional
from uuid import uuid4

import numpy as np
from pydantic import Field
from starlette.responses import JSONResponse
from starlette.websockets import WebSocketDisconnect

from openenv.core.client_types import StepResult
from openenv.core.env_client import EnvClient
from openenv.core.env_server.http_server import create_fastapi_app
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import Action, EnvironmentMetadata, Observation, State

from nexus_jax.cli import ArgumentParser, entry_point, params_error, positive_int
from nexus_jax.adapters._core import HostSession, compiled
from nexus_jax.play import _feedback, default_others, resolve_others
from nexus_jax.protocol.seats import text_seat
from nexus_jax.registry import DEFAULT_ENV

__all__ = ["NexusAction", "NexusObservation", "NexusState", "NexusEnvironment", "NexusClient",
           "create_nexus_app", "serve", "NexusServer", "RequestError", "NotReset", "HttpLimits"]


# ---- typed models ---------------------------------------------------------------------------
MAX_MESSAGE_CHARS = 4096  # a reply longer than this is a validation error for its session, never parsed
WS_MAX_BYTES = 1 << 20  # a WebSocket frame larger than this closes that connection (1009); the server goes on
HTTP_MAX_BYTES = WS_MAX_BYTES  # an HTTP request body larger than this is a 413, read no further
HTTP_BODY_TIMEOUT_S = 10.0  # an HTTP body not received in full within this is a 408 (a slow upload holds no slot)
RESET_FIELDS = ("seed", "episode_id")
STEP_FIELDS = ("timeout_s", "request_id")  # OpenEnv's StepRequest fields besides `action`; neither changes the step
NO_SESSIONS = ("OpenEnv's HTTP routes are stateless (each request gets a fresh env), so there are no sessions to name "
               "or continue: an episode is played over a WebSocket session (/ws; NexusClient(base_url=...).sync())")


class RequestError(ValueError):
    """A request the env cannot serve as asked: HTTP answers `status` with the message, a WebSocket
    session gets it as an error for that session only."""

    status = 422


class NotReset(RequestError):
    """A step on an env with no episode (a WebSocket step before reset; every HTTP /step)."""

    status = 409


class NexusAction(Action):
    """One reply of the agent, in the text protocol's syntax (docs/protocol.md)."""

    message: str = Field(..., max_length=MAX_MESSAGE_CHARS,
                         description="the reply, e.g. 'PROPOSE 2 10E 5C', 'ACCEPT 1', 'WORK C', 'WAIT' (nexus-v0) or "
                                     "'{\"action_type\": \"wait\"}' (crisis-v0)")


class NexusObservation(Observation):
    """What the seat sees: the prompt text, and the same facts as fields."""

    prompt: str = Field(default="", description="protocol.render text of the seat's view (with feedback)")
    step: int = Field(default=0, description="env step of the state shown")
    seat: int = Field(default=0, description="the seat played")
    env_id: str = Field(default="", description="registered nexus_jax env id")
    parse_error: str = Field(default="OK", description="ParseError name of the last reply")
    parse_error_code: int = Field(default=0, description="ParseError code of the last reply")
    parse_message: str = Field(default="", description="what the last reply was read as, or why not")
    action: List[int] = Field(default_factory=lambda: [0, 0, 0, 0, 0],
                              description="the action the reply became: structured (5,) for nexus, [flat index] for crisis")
    flat_action: int = Field(default=0, description="its index in the flat Discrete enumeration")
    error_code: int = Field(default=0, description="env error code of the seat's last action (0 = valid)")
    error_name: str = Field(default="OK", description="its name")
    terminated: bool = Field(default=False, description="episode ended early (random end)")
    truncated: bool = Field(default=False, description="episode hit max_steps")
    utility: List[float] = Field(default_factory=list,
                                 description="every seat's utility after the step (crisis: task completion rate)")
    episode_return: float = Field(default=0.0, description="the seat's return so far")
    num_valid_actions: int = Field(default=0, description="actions the mask allows next step")
    vector: List[float] = Field(default_factory=list, description="the seat's flat observation vector")


class NexusState(State):
    env_id: str = DEFAULT_ENV
    seat: int = 0
    seed: Optional[int] = None
    done: bool = False
    episode_return: float = 0.0


# ---- the environment ----------------------------------------------------------------------------
class NexusEnvironment(Environment[NexusAction, NexusObservation, NexusState]):
    """One seat of a nexus_jax env behind OpenEnv's `Environment` interface (host-side JAX state)."""

    SUPPORTS_CONCURRENT_SESSIONS = True  # each instance owns its state; the compiled functions are shared

    def __init__(self, env_id: str = DEFAULT_ENV, seat: Optional[int] = None, include_help: bool = True,
                 others: Optional[str] = None, **overrides: Any):
        super().__init__()
        self._c = compiled(env_id, **overrides)
        npcs = self._c.env.spec.npc_seats
        if npcs and seat is not None:
            self._c = compiled(env_id, **{**overrides, "learner_seats": (int(seat),)})
        self._text = text_seat(self._c.env)  # a ValueError for an env without a text protocol
        self._fill = None
        if not npcs:  # the caller's seat is one row, `others` plays the rest
            seat = 0 if seat is None else int(seat)
            if seat not in self._c.seats:
                raise ValueError(f"seat {seat} is not a seat of {env_id!r} (seats: {self._c.seats})")
            env, row = self._c.env, self._c.seats.index(seat)
            policy = resolve_others(others or default_others(env), env)

            def fill(k_others, state, flat):
                rows = self._text.rows(policy(k_others, state, env))[:, 0].copy()
                rows[row] = np.asarray(flat).reshape(-1)[0]
                return rows

            self._fill, self.seat, self._row = fill, seat, row
        else:
            if others is not None:
                raise ValueError(f"others={others!r}: {env_id!r} has NPC seats, which its NPCs play; only an env "
                                 "without NPC seats takes an others policy")
            if len(self._c.agents) != 1:
                raise ValueError(f"{env_id!r} leaves {len(self._c.agents)} seats to the caller ({self._c.agents}); "
                                 "the OpenEnv server plays exactly one: use an env with NPC seats, or seat=i")
            self.seat, self._row = self._c.seats[0], 0
        self.env_id = env_id
        self.include_help = include_help
        self._session = HostSession(self._c)
        self._state = NexusState(env_id=env_id, seat=self.seat)

    @property
    def state(self) -> NexusState:
        return self._state

    def get_metadata(self) -> EnvironmentMetadata:
        return EnvironmentMetadata(
            name=f"nexus_jax/{self.env_id}",
            description="Protocol: Nexus (nexus_jax): trade, trust, signals and shocks; one seat played through "
                        "the text protocol against jitted NPCs",
            version="0.1.0",
        )

    def _observe(self, feedback, res=None, reward=None, terminated=False, truncated=False, info=None, obs_vec=None):
        s = self._session.state
        err = int(np.asarray(s.last_error)[self.seat])
        o = NexusObservation(
            prompt=self._text.render(s, self.seat, feedback=feedback, include_help=self.include_help),
            step=int(np.asarray(s.step)),
            seat=self.seat,
            env_id=self.env_id,
            error_code=err,
            error_name=self._text.error_name(err),
            terminated=terminated,
            truncated=truncated,
            episode_return=float(self._state.episode_return),
            num_valid_actions=int(self._session.mask[self._row].sum()),
            vector=[float(x) for x in obs_vec],
            done=terminated or truncated,
            reward=reward,
        )
        if res is not None:
            o.parse_error, o.parse_error_code, o.parse_message = res.error.name, int(res.error), res.message
            o.action = [int(x) for x in res.action]
            o.flat_action = self._text.flat(res)
        if info is not None:
            o.utility = [float(x) for x in self._text.utility(info, s)]
        return o

    def reset(self, seed: Optional[int] = None, episode_id: Optional[str] = None, **kwargs: Any) -> NexusObservation:
        refuse_unknown("reset", kwargs, RESET_FIELDS)
        obs, _ = self._session.reset(seed)
        self._state = NexusState(env_id=self.env_id, seat=self.seat, seed=seed,
                                 episode_id=episode_id or str(uuid4()), step_count=0)
        return self._observe(None, obs_vec=obs[self._row])

    def step(self, action: NexusAction, timeout_s: Optional[float] = None, **kwargs: Any) -> NexusObservation:
        refuse_unknown("step", {k: v for k, v in kwargs.items() if k != "request_id"}, STEP_FIELDS)
        if self._session.state is None:
            raise NotReset(f"reset() before step(): this env has no episode yet (a WebSocket session: reset first). "
                           f"{NO_SESSIONS}")
        res = self._text.parse(action.message, self._session.state, self.seat)
        obs, rew, terminated, truncated, info, _ = self._session.step(np.asarray([self._text.flat(res)], np.int32),
                                                                      self._fill)
        r = float(rew[self._row])
        self._state.step_count += 1
        self._state.episode_return += r
        self._state.done = terminated or truncated
        return self._observe(_feedback(res, self._text.fallback), res, r, terminated, truncated, info,
                             obs[self._row])


def refuse_unknown(route: str, extra: dict, known: tuple) -> None:
    """OpenEnv hands a request's extra fields to reset/step as keywords: one this env does not read is an
    error naming it, never ignored (a `session_id` most of all: the HTTP routes have no sessions)."""
    if extra:
        hint = f"; {NO_SESSIONS}" if {"session_id", "session"} & set(extra) else ""
        raise RequestError(f"{route}: unknown field(s) {sorted(extra)}; {route} takes {', '.join(known)}{hint}")


# ---- client -------------------------------------------------------------------------------------
class NexusClient(EnvClient[NexusAction, NexusObservation, NexusState]):
    """WebSocket client of a Nexus OpenEnv server (`.sync()` for blocking calls)."""

    def _step_payload(self, action: NexusAction) -> dict:
        return {"message": action.message}

    def _parse_result(self, payload: dict) -> StepResult[NexusObservation]:
        obs = NexusObservation(**payload.get("observation", {}), done=payload.get("done", False),
                               reward=payload.get("reward"))
        return StepResult(observation=obs, reward=payload.get("reward"), done=payload.get("done", False))

    def _parse_state(self, payload: dict) -> NexusState:
        return NexusState(**payload)


# ---- server -------------------------------------------------------------------------------------
class ClientGone:
    """ASGI middleware: a WebSocket client that vanished (abrupt disconnect, a frame over the size
    limit) ends its connection quietly. openenv-core frees the session first and then tries to
    close the socket; on a socket already gone that raises, which uvicorn would log as an
    'Exception in ASGI application' traceback although nothing is wrong with the server."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "websocket":
            return await self.app(scope, receive, send)
        try:
            await self.app(scope, receive, send)
        except WebSocketDisconnect:
            pass


class BodyTooLarge(Exception):
    pass


class ClientLeft(Exception):
    pass


class HttpLimits:
    """ASGI middleware: the WebSocket path's limits on every HTTP request with a body (OpenEnv's stateless
    /reset and /step, and /mcp). At most `capacity` such requests in flight, as many as session slots (the
    next is a 503 at once, `Retry-After: 1`); a body over `max_bytes` is a 413, read no further (a declared
    Content-Length over it is refused before reading); a body not in full within `timeout_s` is a 408, so a
    slow upload cannot hold a slot. GET routes (/health, /state, /schema) pass untouched."""

    def __init__(self, app, capacity: int, max_bytes: int = HTTP_MAX_BYTES, timeout_s: float = HTTP_BODY_TIMEOUT_S):
        self.app, self.capacity, self.max_bytes, self.timeout_s = app, capacity, max_bytes, timeout_s
        self.in_flight = 0  # the event loop is one thread: no lock needed

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope["method"] in ("GET", "HEAD", "OPTIONS"):
            return await self.app(scope, receive, send)
        if self.in_flight >= self.capacity:
            return await reply(send, 503, f"the server is at capacity ({self.capacity} HTTP requests in flight); "
                                          "retry later", [(b"retry-after", b"1")])
        self.in_flight += 1
        try:
            declared = dict(scope["headers"]).get(b"content-length", b"0")
            if not declared.isdigit():
                return await reply(send, 400, f"Content-Length {declared[:32]!r} is not a byte count")
            if int(declared) > self.max_bytes:
                return await reply(send, 413, f"request body of {int(declared)} bytes; the limit is {self.max_bytes}")
            try:
                body = await asyncio.wait_for(self.read(receive), self.timeout_s)
            except BodyTooLarge:
                return await reply(send, 413, f"request body over the limit of {self.max_bytes} bytes")
            except asyncio.TimeoutError:
                return await reply(send, 408, f"request body not received within {self.timeout_s:g} s")
            except ClientLeft:
                return
            await self.app(scope, replay(body, receive), send)
        finally:
            self.in_flight -= 1

    async def read(self, receive) -> bytes:
        chunks, size = [], 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                raise ClientLeft
            chunks.append(message.get("body", b""))
            size += len(chunks[-1])
            if size > self.max_bytes:
                raise BodyTooLarge
            if not message.get("more_body", False):
                return b"".join(chunks)


def replay(body: bytes, receive):
    """An ASGI `receive` that hands the app the body already read, then the client's next messages."""
    sent = False

    async def again():
        nonlocal sent
        if sent:
            return await receive()
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    return again


async def reply(send, status: int, detail: str, headers: list | None = None) -> None:
    body = json.dumps({"detail": detail}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                            *(headers or [])]})
    await send({"type": "http.response.body", "body": body})


async def request_error(request, exc: RequestError) -> JSONResponse:
    return JSONResponse({"detail": str(exc)}, status_code=exc.status)


def create_nexus_app(env_id: str = DEFAULT_ENV, *, max_concurrent_envs: int = 4,
                     http_body_timeout_s: float = HTTP_BODY_TIMEOUT_S, **env_kwargs: Any):
    """The FastAPI app (OpenEnv's routes: /ws, /reset, /step, /state, /schema, /health, ...)."""
    # build (and check) the env once here, so a bad env_id fails now and sessions reuse the compile
    NexusEnvironment(env_id, **env_kwargs)
    factory = functools.partial(NexusEnvironment, env_id, **env_kwargs)
    app = create_fastapi_app(factory, NexusAction, NexusObservation, max_concurrent_envs=max_concurrent_envs)
    app.add_exception_handler(RequestError, request_error)
    app.add_middleware(HttpLimits, capacity=max_concurrent_envs, timeout_s=http_body_timeout_s)
    app.add_middleware(ClientGone)
    return app


class NexusServer:
    """A uvicorn server in a background thread; `url`, `stop()`, context manager."""

    def __init__(self, app, host: str = "127.0.0.1", port: int = 0, start_timeout_s: float = 60.0,
                 ws_max_size: int = WS_MAX_BYTES):
        import uvicorn

        self._server = uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on",
                                                     ws_max_size=ws_max_size))
        self._server.install_signal_handlers = lambda: None  # not the main thread
        self._thread = threading.Thread(target=self._server.run, name="nexus-openenv-server", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + start_timeout_s
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"the OpenEnv server did not start on {host}:{port}")
            time.sleep(0.02)
        sock = self._server.servers[0].sockets[0]
        self.host, self.port = sock.getsockname()[:2]
        self.url = f"http://{self.host}:{self.port}"

    def stop(self, timeout_s: float = 10.0) -> None:
        self._server.should_exit = True
        self._thread.join(timeout_s)

    def __enter__(self) -> "NexusServer":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def serve(env_id: str = DEFAULT_ENV, host: str = "127.0.0.1", port: int = 0, **kwargs: Any) -> NexusServer:
    """Start a server for `env_id` (loopback and a free port by default); returns it running."""
    return NexusServer(create_nexus_app(env_id, **kwargs), host=host, port=port)


@entry_point("python -m nexus_jax.adapters.openenv")
def main(argv: Optional[list] = None) -> int:
    """`python -m nexus_jax.adapters.openenv [--env nexus-v0] [--host 127.0.0.1] [--port 8000]`"""
    import uvicorn

    ap = ArgumentParser(prog="python -m nexus_jax.adapters.openenv", description=main.__doc__)
    ap.add_argument("--env", default=DEFAULT_ENV)
    ap.add_argument("--host", default="127.0.0.1", help="bind address (default loopback only; docs/robustness.md "
                                                         "says what exposing it would need)")
    ap.add_argument("--port", type=int, default=8000)
    ap.add_argument("--seat", type=int, default=None)
    ap.add_argument("--others", default=None,
                    help="an env without NPC seats (crisis-v0) only: who plays the other seats: random, wait or one "
                         "of the env's heuristics (default: its reference heuristic, crisis-v0's edf)")
    ap.add_argument("--max-sessions", type=positive_int, default=64, help="concurrent WebSocket sessions (default 64)")
    args = ap.parse_args(argv)
    try:
        app = create_nexus_app(args.env, seat=args.seat, others=args.others, max_concurrent_envs=args.max_sessions)
    except (ValueError, TypeError, KeyError) as e:  # an unknown env id, a bad seat: named by the env
        raise params_error(f"--env {args.env} --seat {args.seat}", e) from None
    uvicorn.run(app, host=args.host, port=args.port, ws_max_size=WS_MAX_BYTES)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
