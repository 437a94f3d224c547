"""HTTP/1.1 for ``estflow serve``: one event loop owns the connections, a fixed pool of worker
threads answers complete requests.

The loop accepts connections and reads them without blocking, buffering until a request is
complete (its headers and its whole body); only then does a worker answer it. So a connection
that is idle between keep-alive requests, or whose client stalls in the middle of its headers or
body, or never sends a byte, costs a buffer in the loop and no thread. Standard library only:
the socket is bound before TensorFlow is imported (``estflow serve`` on a busy port fails at
once).

Limits (each refusal is JSON ``{"error": message}``, and the connection is then closed):

* a request not complete ``request_timeout`` seconds after its first byte: 408;
* request line and headers over :data:`MAX_HEADER_BYTES`: 431; a body over ``max_body_bytes``:
  413, refused from its Content-Length before it is read; a chunked body: 411; a malformed
  request line, header or Content-Length: 400; an HTTP version other than 1.0/1.1: 505;
* a new connection while ``max_connections`` are open: 503;
* a keep-alive connection idle for ``idle_timeout`` seconds is closed; an answer the client
  does not take within ``request_timeout`` seconds is abandoned (the connection closed).

The application is a function ``Request -> (status, JSON-able payload, extra headers)``,
called on a worker thread; an exception it lets through is answered 500.

Why this loop and not a maintained server (measured, ``tests/benchmarks/bench_serve.py
--http-layers``: the same application behind aiohttp 3.14, its handlers run in a pool of 16
threads as the model calls block; 2026-11-29, 2 shared cores of an Intel Xeon, busy: load
average 10 to 13 from other jobs; medians of 3 interleaved rounds, test fixture model): this
loop answered 1104 batch-1 requests/s against aiohttp's 672, 34,952 examples/s at batch 64
against 15,489, and 2,444 requests/s against 2,254 for 16 concurrent batch-1 clients. The
time a request costs is TensorFlow's and the JSON codec's (:mod:`.json_fast`), not the
socket loop's; an asyncio server adds an executor hop per request and a dependency, and
gains nothing here, so the standard-library loop stays.
"""

from __future__ import annotations

import collections
import dataclasses
import errno
import logging
import math
import queue
import selectors
import socket
import threading
import time
from collections.abc import Callable
from http import HTTPStatus
from typing import Any

from estflow.components.serve import json_fast
from estflow.components.serve.errors import ServingError

__all__ = ["Limits", "Request", "Response", "HttpServer", "ListenError", "listen",
           "MAX_HEADER_BYTES"]

log = logging.getLogger("estflow.serve")

MAX_HEADER_BYTES = 65536
"""Request line plus headers, at most (431 above)."""

_RECV_BYTES = 262144
_LINGER_SECONDS = 2.0     # after an answer that closes: wait this long for the client's FIN
_SWEEP_SECONDS = 0.1      # timeouts are checked this often
_HOT_SECONDS = 0.002      # a worker waits this long for a keep-alive client's next request
_ACCEPT, _WAKE = object(), object()


@dataclasses.dataclass(frozen=True)
class Limits:
    """The bounds of one server (see the module docstring)."""

    max_body_bytes: int
    threads: int = 16
    request_timeout: float = 30.0
    idle_timeout: float = 60.0
    max_connections: int = 256


@dataclasses.dataclass(frozen=True)
class Request:
    """A complete request. ``headers`` has lower-case names; ``body`` is None without a
    Content-Length."""

    method: str
    target: str
    version: str
    headers: dict[str, str]
    body: bytes | None


Response = tuple[int, Any, dict[str, str]]
"""(status, payload to send as JSON (bytes: sent as they are), extra headers)."""


class ListenError(OSError):
    """The address cannot be bound; ``str()`` says which address and why."""

    def __str__(self) -> str:
        return str(self.strerror)


def listen(host: str, port: int, backlog: int = 128) -> socket.socket:
    """A TCP socket bound to ``(host, port)`` and listening.

    Raises:
        ListenError: naming the address, e.g. ``cannot listen on 127.0.0.1:8501: port 8501 is
            already in use (choose another with --port)``.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    where = f"[{host}]:{port}" if family == socket.AF_INET6 else f"{host}:{port}"
    try:
        sock = socket.socket(family, socket.SOCK_STREAM)
    except OSError as e:
        raise ListenError(e.errno, f"cannot listen on {where}: {e.strerror or e}") from None
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # not over a live listener
        sock.bind((host, port))
        sock.listen(backlog)
    except OSError as e:
        sock.close()
        reason = (f"port {port} is already in use (choose another with --port)"
                  if e.errno == errno.EADDRINUSE else (e.strerror or str(e)))
        raise ListenError(e.errno, f"cannot listen on {where}: {reason}") from None
    return sock


@dataclasses.dataclass
class _Head:
    method: str
    target: str
    version: str
    headers: dict[str, str]
    length: int | None
    keep_alive: bool
    expect_continue: bool


class _Conn:
    """One client connection. Owned by the loop thread, except while ``busy`` (a worker is
    answering its request; the loop then neither reads nor closes it)."""

    __slots__ = ("sock", "fd", "buf", "head", "deadline", "started", "busy", "draining")

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.fd = sock.fileno()
        self.buf = bytearray()
        self.head: _Head | None = None
        self.deadline = math.inf
        self.started: float | None = None  # when the pending request's first byte came
        self.busy = False
        self.draining = False


def _parse_head(raw: bytes) -> _Head:
    """The request line and headers (without the blank line); ServingError if malformed."""
    lines = raw.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or not parts[0].isalpha() or not parts[1] \
            or not parts[2].startswith("HTTP/"):
        raise ServingError(400, f"malformed request line {lines[0][:100]!r}; expected "
                           "'METHOD /path HTTP/1.1'")
    method, target, version = parts
    if version not in ("HTTP/1.1", "HTTP/1.0"):
        raise ServingError(505, f"{version[:20]} is not supported; use HTTP/1.1")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if not sep or not name or any(c in name for c in " \t"):
            raise ServingError(400, f"malformed header line {line[:100]!r}; expected "
                               "'Name: value'")
        key, value = name.lower(), value.strip(" \t")
        if key in headers:
            if key == "content-length" and headers[key] != value:
                raise ServingError(400, "conflicting Content-Length headers")
            if key != "content-length":
                headers[key] = f"{headers[key]}, {value}"
        else:
            headers[key] = value
    if headers.get("transfer-encoding", "identity").lower() != "identity":
        raise ServingError(411, "chunked request bodies are not supported; send a "
                           "Content-Length header")
    length_text = headers.get("content-length")
    length = None
    if length_text is not None:
        if not (length_text.isascii() and length_text.isdigit()):
            raise ServingError(400, f"invalid Content-Length {length_text[:40]!r}")
        length = int(length_text) if len(length_text) <= 18 else 10**18
    tokens = {t.strip().lower() for t in headers.get("connection", "").split(",")}
    keep_alive = "close" not in tokens if version == "HTTP/1.1" else "keep-alive" in tokens
    expect = version == "HTTP/1.1" and headers.get("expect", "").lower() == "100-continue"
    return _Head(method, target, version, headers, length, keep_alive, expect)


def _complete_request(buf: bytearray, max_body_bytes: int) -> tuple[Request, bool] | None:
    """Take a complete, acceptable request (and whether to keep the connection) off the front
    of ``buf``; None, leaving ``buf`` as it is, for anything else (incomplete, malformed, over
    a limit, waiting for ``100 Continue``): the loop deals with those."""
    end = buf.find(b"\r\n\r\n", 0, MAX_HEADER_BYTES + 4)
    if end <= 0:
        return None
    try:
        head = _parse_head(bytes(buf[:end]))
    except ServingError:
        return None
    length = head.length or 0
    if length > max_body_bytes or len(buf) < end + 4 + length:
        return None
    body = bytes(buf[end + 4:end + 4 + length]) if head.length is not None else None
    del buf[:end + 4 + length]
    return Request(head.method, head.target, head.version, head.headers, body), head.keep_alive


def _reason(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Unknown"


def _response_bytes(status: int, payload: Any, headers: dict[str, str], close: bool,
                    keep_alive_1_0: bool = False, head_only: bool = False) -> bytes:
    # bytes are sent as they are (the metrics page: its Content-Type is in ``headers``)
    body = payload if isinstance(payload, bytes) else json_fast.dumps(payload)
    kind = () if "Content-Type" in headers else ("Content-Type: application/json",)
    lines = [f"HTTP/1.1 {status} {_reason(status)}", *kind,
             f"Content-Length: {len(body)}", *(f"{k}: {v}" for k, v in headers.items())]
    if close:
        lines.append("Connection: close")
    elif keep_alive_1_0:
        lines.append("Connection: keep-alive")
    head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
    return head if head_only else head + body


class HttpServer:
    """Serves ``app`` on a listening socket (from :func:`listen`) until :meth:`shutdown`.

    ``serve_forever()`` runs the loop in the calling thread and starts ``limits.threads``
    workers; ``shutdown()`` (from another thread) stops both; ``server_close()`` closes the
    socket. ``server_address`` is the bound address.
    """

    def __init__(self, listener: socket.socket, app: Callable[[Request], Response],
                 limits: Limits, name: str = "estflow-serve") -> None:
        self._listener = listener
        self._listener.setblocking(False)
        self.server_address = listener.getsockname()
        self._app = app
        self._limits = limits
        self._name = name
        self._selector = selectors.DefaultSelector()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._work: queue.SimpleQueue = queue.SimpleQueue()
        self._returned: collections.deque = collections.deque()  # (conn, keep) from workers
        self._conns: dict[int, _Conn] = {}     # open connections, busy ones included
        self._draining: dict[int, _Conn] = {}  # answered, closing: waiting for the client's FIN
        self._stop = threading.Event()
        self._started = threading.Event()
        self._stopped = threading.Event()
        self._running = False
        self._closed = False

    # -- lifecycle -----------------------------------------------------------------------

    def serve_forever(self, poll_interval: float = 0.5) -> None:
        workers = [threading.Thread(target=self._worker, name=f"{self._name}-worker-{i}",
                                    daemon=True) for i in range(self._limits.threads)]
        for worker in workers:
            worker.start()
        self._running = True
        self._started.set()
        try:
            self._loop(min(poll_interval, _SWEEP_SECONDS))
        finally:
            self._close_all(workers)
            self._stopped.set()

    def wait_started(self, timeout: float | None = None) -> bool:
        """Block until ``serve_forever`` runs (its workers started)."""
        return self._started.wait(timeout)

    def shutdown(self) -> None:
        """Stop the loop and the workers; returns when ``serve_forever`` has returned."""
        self._stop.set()
        self._wake()
        if self._running:
            self._stopped.wait()

    def server_close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._listener.close()
        self._selector.close()
        self._wake_r.close()
        self._wake_w.close()

    def _close_all(self, workers: list[threading.Thread]) -> None:
        for _ in workers:
            self._work.put(None)
        for conn in self._conns.values():
            if conn.busy:  # wake a worker blocked sending to it
                try:
                    conn.sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
        deadline = time.monotonic() + 5.0  # a worker running a model is not waited for long
        for worker in workers:
            worker.join(timeout=max(0.0, deadline - time.monotonic()))
        for conn in [*self._conns.values(), *self._draining.values()]:
            self._close(conn)

    # -- the loop ------------------------------------------------------------------------

    def _loop(self, tick: float) -> None:
        selector = self._selector
        selector.register(self._listener, selectors.EVENT_READ, _ACCEPT)
        selector.register(self._wake_r, selectors.EVENT_READ, _WAKE)
        next_sweep = time.monotonic() + _SWEEP_SECONDS
        while not self._stop.is_set():
            for key, _events in selector.select(tick):
                if key.data is _ACCEPT:
                    self._accept()
                elif key.data is _WAKE:
                    self._drain_wake()
                else:
                    self._readable(key.data)
            self._take_returned()
            now = time.monotonic()
            if now >= next_sweep:
                self._sweep(now)
                next_sweep = now + _SWEEP_SECONDS

    def _wake(self) -> None:
        try:
            self._wake_w.send(b"x")
        except OSError:  # full (the loop will wake anyway) or closed
            pass

    def _drain_wake(self) -> None:
        try:
            while self._wake_r.recv(4096):
                pass
        except OSError:
            pass

    def _accept(self) -> None:
        for _ in range(64):
            try:
                sock, _peer = self._listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as e:  # e.g. out of file descriptors: retry after a pause
                log.error("cannot accept a connection: %s", e)
                time.sleep(0.05)
                return
            sock.setblocking(False)
            if sock.family in (socket.AF_INET, socket.AF_INET6):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            conn = _Conn(sock)
            if len(self._conns) >= self._limits.max_connections:
                self._conns[conn.fd] = conn
                self._fail(conn, 503, f"too many connections (limit "
                           f"{self._limits.max_connections}, --max-connections); try again "
                           "later")
                continue
            self._conns[conn.fd] = conn
            conn.deadline = time.monotonic() + self._limits.idle_timeout
            self._selector.register(sock, selectors.EVENT_READ, conn)

    def _readable(self, conn: _Conn) -> None:
        try:
            data = conn.sock.recv(_RECV_BYTES)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self._close(conn)
            return
        if not data:
            self._close(conn)
            return
        if conn.draining:
            return  # discarded: the answer has been sent
        if conn.started is None:
            conn.started = time.monotonic()
            conn.deadline = conn.started + self._limits.request_timeout
        conn.buf += data
        self._advance(conn)

    def _advance(self, conn: _Conn) -> None:
        """Parse what the connection has buffered; hand a complete request to a worker."""
        buf = conn.buf
        if conn.head is None:
            while buf[:2] == b"\r\n":  # empty lines before a request line are ignored
                del buf[:2]
            if not buf:
                self._idle(conn)
                return
            end = buf.find(b"\r\n\r\n", 0, MAX_HEADER_BYTES + 4)
            if end < 0:
                if len(buf) > MAX_HEADER_BYTES:
                    self._fail(conn, 431, f"request headers over {MAX_HEADER_BYTES} bytes")
                return
            try:
                conn.head = _parse_head(bytes(buf[:end]))
            except ServingError as e:
                self._fail(conn, e.status, e.message)
                return
            del buf[:end + 4]
            length = conn.head.length or 0
            if length > self._limits.max_body_bytes:
                # refused unread: the body that follows would be taken for the next request
                self._fail(conn, 413, f"request body of {length} bytes is over the limit of "
                           f"{self._limits.max_body_bytes} bytes (--max-body-bytes)")
                return
            if conn.head.expect_continue and len(buf) < length:
                self._send_now(conn, b"HTTP/1.1 100 Continue\r\n\r\n")
        head = conn.head
        length = head.length or 0
        if len(buf) < length:
            return
        body = bytes(buf[:length]) if head.length is not None else None
        del buf[:length]
        conn.head, conn.started, conn.deadline, conn.busy = None, None, math.inf, True
        self._selector.unregister(conn.sock)
        self._work.put((conn, Request(head.method, head.target, head.version, head.headers,
                                      body), head.keep_alive))

    def _idle(self, conn: _Conn) -> None:
        conn.started = None
        conn.deadline = time.monotonic() + self._limits.idle_timeout

    def _take_returned(self) -> None:
        while self._returned:
            conn, keep = self._returned.popleft()
            conn.busy = False
            if conn.fd not in self._conns:
                continue
            if not keep:
                self._linger(conn)
                continue
            self._selector.register(conn.sock, selectors.EVENT_READ, conn)
            if conn.buf:  # pipelined: the next request (or its start) is already here
                conn.started = time.monotonic()
                conn.deadline = conn.started + self._limits.request_timeout
                self._advance(conn)
            else:
                self._idle(conn)

    def _sweep(self, now: float) -> None:
        for conn in [c for c in self._conns.values() if not c.busy and c.deadline <= now]:
            if conn.started is None:
                self._close(conn)  # idle keep-alive connection
            else:
                self._fail(conn, 408, "request not received within "
                           f"{self._limits.request_timeout:g} seconds "
                           "(--request-timeout-seconds)")
        for conn in [c for c in self._draining.values() if c.deadline <= now]:
            self._close(conn)

    # -- answering -----------------------------------------------------------------------

    def _send_now(self, conn: _Conn, data: bytes) -> None:
        """Best-effort send from the loop (small answers fit in the socket buffer)."""
        try:
            conn.sock.send(data)
        except OSError:
            pass

    def _fail(self, conn: _Conn, status: int, message: str) -> None:
        """Answer ``{"error": message}`` from the loop and close the connection."""
        self._send_now(conn, _response_bytes(status, {"error": message}, {}, close=True))
        self._linger(conn)

    def _linger(self, conn: _Conn) -> None:
        """Close after an answer without losing it: stop sending, discard what the client
        still sends until it closes (closing with unread input would reset the connection and
        could destroy the answer in flight), at most :data:`_LINGER_SECONDS`."""
        try:
            conn.sock.shutdown(socket.SHUT_WR)
        except OSError:
            self._close(conn)
            return
        self._conns.pop(conn.fd, None)
        conn.draining, conn.deadline = True, time.monotonic() + _LINGER_SECONDS
        conn.buf.clear()
        self._draining[conn.fd] = conn
        try:
            self._selector.register(conn.sock, selectors.EVENT_READ, conn)
        except KeyError:  # still registered
            pass

    def _close(self, conn: _Conn) -> None:
        try:
            self._selector.unregister(conn.sock)
        except (KeyError, ValueError):
            pass
        conn.sock.close()
        self._conns.pop(conn.fd, None)
        self._draining.pop(conn.fd, None)

    def _worker(self) -> None:
        while True:
            item = self._work.get()
            if item is None:
                return
            conn, request, keep_alive = item
            while True:
                keep = self._answer(conn, request, keep_alive)
                following = self._next_request(conn) if keep else None
                if following is None:
                    break
                request, keep_alive = following
            self._returned.append((conn, keep))
            self._wake()

    def _next_request(self, conn: _Conn) -> tuple[Request, bool] | None:
        """A keep-alive client's next request, if all of it arrives within
        :data:`_HOT_SECONDS` (a client sending requests back to back stays on its worker
        instead of going through the loop each time). Anything else (nothing yet, a partial
        or refused request, the client gone) is left to the loop: the wait is bounded, so a
        slow client cannot hold the worker."""
        deadline = time.monotonic() + _HOT_SECONDS
        try:
            while not self._stop.is_set():
                request = _complete_request(conn.buf, self._limits.max_body_bytes)
                if request is not None:
                    return request
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return None
                conn.sock.settimeout(remaining)
                data = conn.sock.recv(_RECV_BYTES)
                if not data:
                    return None  # the loop sees the end of the connection and closes it
                conn.buf += data
            return None
        except OSError:  # a timeout (nothing more came), or the connection failed
            return None
        finally:
            conn.sock.setblocking(False)

    def _answer(self, conn: _Conn, request: Request, keep_alive: bool) -> bool:
        """Run the app, send its answer; whether the connection stays open."""
        try:
            status, payload, headers = self._app(request)
        except Exception as e:  # noqa: BLE001 - a bug must still answer the client
            log.exception("internal error serving %s %s", request.method, request.target)
            status, payload, headers = 500, {"error": f"internal error: {type(e).__name__}: "
                                                      f"{e}"}, {}
        data = _response_bytes(status, payload, headers, close=not keep_alive,
                               keep_alive_1_0=request.version == "HTTP/1.0",
                               head_only=request.method == "HEAD")
        try:
            conn.sock.settimeout(self._limits.request_timeout)
            conn.sock.sendall(data)
            conn.sock.setblocking(False)
        except OSError as e:  # the client went away, or does not read its answer
            log.debug("could not send the answer to %s %s: %s", request.method,
                      request.target, e)
            return False
        return keep_alive
