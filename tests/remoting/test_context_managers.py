"""``async with`` a client or server: the body's errors come back as themselves."""

import socket

import pytest
import trio

from trocket.codecs.command import RemotingCommand
from trocket.remoting import (
    RemotingClient,
    RemotingConnectError,
    RemotingError,
    RemotingShutdownError,
    ServiceContextManager,
)

from .conftest import ECHO, SLOW, Gate, client_of, serving


def _unused_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def test_connect_error_is_not_wrapped_in_a_group():
    port = _unused_port()
    with pytest.raises(RemotingConnectError) as info:
        async with RemotingClient() as client:
            await client.invoke_sync(f"127.0.0.1:{port}", RemotingCommand.request(ECHO), timeout=2)
    assert f"127.0.0.1:{port}" in str(info.value)


async def test_body_exception_from_inside_a_server_block_is_unwrapped():
    with pytest.raises(KeyError):
        async with serving():
            raise KeyError("mine")


async def test_client_still_works_after_a_caught_error():
    async with serving() as server, client_of() as client:
        with pytest.raises(RemotingConnectError):
            await client.invoke_sync(f"127.0.0.1:{_unused_port()}", RemotingCommand.request(ECHO), timeout=2)
        resp = await client.invoke_sync(f"127.0.0.1:{server.port}", RemotingCommand.request(ECHO, body=b"x"), timeout=2)
        assert resp.body == b"x"


async def test_cancellation_passes_through():
    with trio.move_on_after(0.05) as scope:
        async with RemotingClient():
            await trio.sleep_forever()
    assert scope.cancelled_caught


async def test_an_enclosing_cancel_during_a_clean_exit_still_closes_the_owned_nursery():
    # the body ends normally but its enclosing scope is cancelled: the graceful close
    # is cancelled too, and the client's own nursery must still be exited properly
    async with serving() as server:
        with trio.CancelScope() as scope:
            async with client_of() as client:
                await client.invoke_sync(server.address, RemotingCommand.request(ECHO), timeout=2)
                scope.cancel()
        assert scope.cancelled_caught
        async with client_of() as client:  # trio's state is sound: the next one works
            await client.invoke_sync(server.address, RemotingCommand.request(ECHO), timeout=2)


async def test_a_body_error_fails_the_pending_calls_as_shut_down():
    """An ``async with client`` left by an exception stops at once, and a call still
    pending in another task learns that the client shut down, not that a peer went away."""
    gate = Gate()
    errors: list[BaseException] = []
    failed = trio.Event()

    async def call(client: RemotingClient, address: str) -> None:
        try:
            await client.invoke_sync(address, RemotingCommand.request(SLOW), timeout=10)
        except RemotingError as exc:
            errors.append(exc)
            failed.set()

    async with serving() as server, trio.open_nursery() as callers:
        server.register_processor(SLOW, gate)
        with pytest.raises(KeyError):
            async with client_of() as client:
                callers.start_soon(call, client, server.address)
                await gate.wait_arrivals(1)
                raise KeyError("mine")
        with trio.fail_after(5):
            await failed.wait()
        gate.release.set()
    assert len(errors) == 1 and isinstance(errors[0], RemotingShutdownError), errors


class _Service(ServiceContextManager):
    """A service as the base asks: ``run`` and ``aclose``, nothing else."""

    def __init__(self) -> None:
        self.log: list[str] = []
        self._stop = trio.Event()

    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        self.log.append("started")
        task_status.started(self)
        try:
            await self._stop.wait()
            self.log.append("stopped")
        except trio.Cancelled:
            self.log.append("cancelled")
            raise

    async def aclose(self) -> None:
        self.log.append("aclose")
        self._stop.set()


async def test_a_service_defines_run_and_aclose_and_the_base_does_the_rest():
    service = _Service()
    async with service as entered:
        assert entered is service and service.log == ["started"]
    assert service.log == ["started", "aclose", "stopped"]  # a clean exit: the graceful stop

    service = _Service()
    with pytest.raises(KeyError):  # unwrapped
        async with service:
            raise KeyError("mine")
    assert service.log == ["started", "cancelled"]  # an exit by exception: cancelled at once


async def test_a_service_that_fails_to_start_raises_from_the_async_with():
    class Broken(_Service):
        async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
            raise OSError("no port")

    with pytest.raises(BaseException) as info:
        async with Broken():
            pytest.fail("the body must not run")
    exc = info.value
    while isinstance(exc, BaseExceptionGroup):
        exc = exc.exceptions[0]
    assert isinstance(exc, OSError) and str(exc) == "no port"
