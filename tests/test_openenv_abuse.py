"""The OpenEnv server under abuse, on loopback: every bad message is an error for its own session only.

One server (capacity 3) for the module. Malformed JSON, unknown message types, missing or
oversized fields, steps before reset, unparseable replies, binary frames, frames over the size
limit and abrupt disconnects each get an error (or a closed connection) for that session, the
session or server goes on, and a vanished client's slot is free again. The stateless HTTP
/reset and /step get the same: oversized, malformed or unknown fields, session ids they do not
have, slow uploads and floods are 4xx/503 answers, and the server goes on. Bounded: at most 12
sockets at once, every receive has a timeout.
"""
import asyncio
import json
import socket
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

pytest.importorskip("openenv.core")
sync_client = pytest.importorskip("websockets.sync.client")
ConnectionClosed = pytest.importorskip("websockets.exceptions").ConnectionClosed
requests = pytest.importorskip("requests")

from nexus_jax.adapters.openenv import HTTP_MAX_BYTES, MAX_MESSAGE_CHARS, WS_MAX_BYTES, HttpLimits, serve  # noqa: E402

CAPACITY = 3
BODY_TIMEOUT_S = 2.0  # the server's HTTP body timeout here (default 10 s), so a slow upload's 408 comes soon


@pytest.fixture(scope="module")
def server():
    srv = serve("nexus-v0", max_concurrent_envs=CAPACITY, http_body_timeout_s=BODY_TIMEOUT_S)
    try:
        yield srv
    finally:
        srv.stop()


def _ws(server):
    return sync_client.connect(server.url.replace("http://", "ws://") + "/ws", max_size=None, open_timeout=30)


def _call(ws, msg):
    ws.send(msg if isinstance(msg, (str, bytes)) else json.dumps(msg))
    return json.loads(ws.recv(timeout=120))


def _reset_reply(ws, seed) -> str:
    """The type of the server's reply to a reset, or "closed": a server still at capacity sends its
    CAPACITY_REACHED error as soon as it accepts and closes, which can beat the reset to the socket."""
    try:
        return _call(ws, {"type": "reset", "data": {"seed": seed}})["type"]
    except ConnectionClosed:
        return "closed"


def _healthy(server, sessions=CAPACITY, timeout_s=20.0):
    """The server answers HTTP and `sessions` new sessions can open (no slot leaked); retried while
    the server is still freeing the slots of clients that just vanished."""
    assert requests.get(server.url + "/health", timeout=30).status_code == 200
    deadline = time.monotonic() + timeout_s
    while True:
        socks = [_ws(server) for _ in range(sessions)]
        try:
            replies = [_reset_reply(ws, i) for i, ws in enumerate(socks)]
        finally:
            for ws in socks:
                ws.close()
        if all(r == "observation" for r in replies) or time.monotonic() > deadline:
            return replies
        time.sleep(0.2)


def test_binds_loopback_by_default(server):
    assert server.host == "127.0.0.1"


def test_bad_messages_are_errors_for_that_session(server):
    with _ws(server) as ws:
        assert _call(ws, "{not json")["data"]["code"] == "INVALID_JSON"
        assert _call(ws, {"type": "teleport"})["data"]["code"] == "UNKNOWN_TYPE"
        assert _call(ws, {"type": "step", "data": {}})["data"]["code"] == "VALIDATION_ERROR"
        assert _call(ws, {"type": "step", "data": {"message": 7}})["data"]["code"] == "VALIDATION_ERROR"
        before = _call(ws, {"type": "step", "data": {"message": "WAIT"}})
        assert before["data"]["code"] == "EXECUTION_ERROR" and "reset" in before["data"]["message"]
        assert _call(ws, {"type": "reset", "data": {"seed": 3}})["data"]["observation"]["step"] == 0
        long = _call(ws, {"type": "step", "data": {"message": "W" * (MAX_MESSAGE_CHARS + 1)}})
        assert long["data"]["code"] == "VALIDATION_ERROR" and "4096" in json.dumps(long)
        # an unknown action is read as WAIT, with the reason in the observation
        obs = _call(ws, {"type": "step", "data": {"message": "FLY TO THE MOON"}})["data"]["observation"]
        assert obs["step"] == 1 and obs["parse_error"] == "UNKNOWN_COMMAND" and obs["action"][0] == 0
        # the session is intact after all of it
        assert _call(ws, {"type": "step", "data": {"message": "WORK E"}})["data"]["observation"]["step"] == 2
    assert _healthy(server) == ["observation"] * CAPACITY


def test_frames_over_the_limit_and_binary_frames_close_only_that_connection(server):
    with _ws(server) as ws, _ws(server) as other:
        assert _call(other, {"type": "reset", "data": {"seed": 1}})["type"] == "observation"
        ws.send("x" * (WS_MAX_BYTES + 1))
        with pytest.raises(Exception, match="1009|too big"):
            ws.recv(timeout=60)
        assert _call(other, {"type": "step", "data": {"message": "WAIT"}})["data"]["observation"]["step"] == 1
    with _ws(server) as ws:
        assert _call(ws, b"\x00\x01 not text")["data"]["code"] == "SESSION_ERROR"
    assert _healthy(server) == ["observation"] * CAPACITY


def test_abrupt_disconnects_free_their_sessions(server):
    for _ in range(2):  # fill the server twice over with clients that vanish mid-session
        socks = [_ws(server) for _ in range(CAPACITY)]
        for ws in socks:
            assert _call(ws, {"type": "reset", "data": {}})["type"] == "observation"
            ws.send(json.dumps({"type": "step", "data": {"message": "WORK E"}}))  # and leave before the reply
            ws.socket.shutdown(socket.SHUT_RDWR)
            ws.socket.close()
        # every slot comes back (the server frees them asynchronously: retried up to 20 s)
        assert _healthy(server) == ["observation"] * CAPACITY


def test_sessions_are_isolated(server):
    """Interleaved sessions on the same seed end where each would alone."""
    mine, noise = ["WORK E", "VAULT 2E", "PROPOSE 2 10E 5C"], ["WAIT", "WORK C", "ACCEPT 1", "REJECT 3"]
    with _ws(server) as a, _ws(server) as b:
        _call(a, {"type": "reset", "data": {"seed": 9}})
        _call(b, {"type": "reset", "data": {"seed": 9}})
        for i in range(4):
            ob = _call(b, {"type": "step", "data": {"message": noise[i]}})["data"]["observation"]
            if i < len(mine):
                oa = _call(a, {"type": "step", "data": {"message": mine[i]}})["data"]["observation"]
    with _ws(server) as alone:
        _call(alone, {"type": "reset", "data": {"seed": 9}})
        for m in mine:
            solo = _call(alone, {"type": "step", "data": {"message": m}})["data"]["observation"]
    assert oa["step"] == 3 and ob["step"] == 4
    assert oa["prompt"] == solo["prompt"] and oa["vector"] == solo["vector"]
    assert oa["vector"] != ob["vector"]


def _post(server, route, **kw):
    return requests.post(server.url + route, timeout=120, **kw)


def _slow_upload(server, route="/reset"):
    """A raw HTTP request that declares a 100-byte body and sends 10: it holds an HTTP slot until the server
    gives up on it (408 after BODY_TIMEOUT_S)."""
    sock = socket.create_connection((server.host, server.port), timeout=60)
    sock.sendall(f"POST {route} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 "Content-Length: 100\r\n\r\n{\"seed\": 1".encode())
    return sock


def test_http_bad_requests_are_4xx_naming_the_problem(server):
    ok = _post(server, "/reset", json={"seed": 3})
    assert ok.status_code == 200 and ok.json()["observation"]["step"] == 0
    for route in ("/reset", "/step"):
        bad = _post(server, route, data="{not json", headers={"content-type": "application/json"})
        assert bad.status_code == 422 and "json_invalid" in bad.text
        big = _post(server, route, json={"seed": 1, "pad": "x" * HTTP_MAX_BYTES})  # declared: refused unread
        assert big.status_code == 413 and f"the limit is {HTTP_MAX_BYTES}" in big.json()["detail"]
        chunked = _post(server, route, data=(b"x" * 65536 for _ in range(HTTP_MAX_BYTES // 65536 + 1)))
        assert chunked.status_code == 413 and "over the limit" in chunked.json()["detail"]
    long = _post(server, "/step", json={"action": {"message": "W" * (MAX_MESSAGE_CHARS + 1)}})
    assert long.status_code == 422 and "string_too_long" in long.text
    unknown = _post(server, "/reset", json={"seed": 1, "map_name": "2s3z"})
    assert unknown.status_code == 422 and "reset: unknown field(s) ['map_name']" in unknown.json()["detail"]
    # no sessions over HTTP: naming one is an error, and a step (a fresh env each time) has no episode
    for route, body in (("/reset", {"session_id": "abc"}), ("/step", {"action": {"message": "WAIT"}, "session_id": "abc"})):
        named = _post(server, route, json=body)
        assert named.status_code == 422 and "no sessions" in named.json()["detail"]
    step = _post(server, "/step", json={"action": {"message": "WAIT"}, "request_id": "r1"})
    assert step.status_code == 409 and "reset() before step()" in step.json()["detail"] and "/ws" in step.json()["detail"]
    assert _post(server, "/reset", json={"seed": 3}).json() == ok.json()  # stateless: the same seed, the same reply
    assert _healthy(server) == ["observation"] * CAPACITY


def test_http_floods_and_slow_uploads_hold_no_more_than_capacity(server):
    held = [_slow_upload(server) for _ in range(CAPACITY)]
    try:
        time.sleep(0.5)  # the server has taken all three in
        busy = _post(server, "/reset", json={"seed": 1})
        assert busy.status_code == 503 and busy.headers["retry-after"] == "1" and "capacity" in busy.json()["detail"]
        assert requests.get(server.url + "/health", timeout=30).status_code == 200  # GET routes are not held
        for sock in held:  # each slow upload is given up on after the timeout, freeing its slot
            assert sock.recv(4096).startswith(b"HTTP/1.1 408")
    finally:
        for sock in held:
            sock.close()
    with ThreadPoolExecutor(4 * CAPACITY) as pool:  # a burst of 12 at once: served or told to retry, nothing else
        codes = list(pool.map(lambda i: _post(server, "/reset", json={"seed": i}).status_code, range(4 * CAPACITY)))
    assert set(codes) <= {200, 503} and 200 in codes
    assert _post(server, "/reset", json={"seed": 1}).status_code == 200
    assert _healthy(server) == ["observation"] * CAPACITY


def test_a_content_length_that_is_no_number_is_a_400_before_the_app():
    """uvicorn refuses such a header itself; another ASGI server may pass it on, and the limit must not crash."""
    sent, reached = [], []

    async def app(scope, receive, send):
        reached.append(scope)

    async def receive():
        return {"type": "http.request", "body": b"{}", "more_body": False}

    async def send(message):
        sent.append(message)

    scope = {"type": "http", "method": "POST", "path": "/reset", "headers": [(b"content-length", b"12abc")]}
    asyncio.run(HttpLimits(app, capacity=1)(scope, receive, send))
    assert sent[0]["status"] == 400 and b"not a byte count" in sent[1]["body"] and not reached
