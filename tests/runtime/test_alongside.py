"""``alongside``: a companion beside awaited work, the work's exception as it is."""

from __future__ import annotations

import anyio
import pytest

from service.runtime.alongside import alongside


async def idle(_: anyio.CancelScope) -> None:
    await anyio.sleep_forever()


@pytest.mark.anyio
async def test_the_result_comes_back_and_the_companion_is_stopped() -> None:
    async def work() -> int:
        return 5

    assert await alongside(work(), idle) == (True, 5)


@pytest.mark.anyio
async def test_the_works_exception_is_not_wrapped_in_a_group() -> None:
    async def work() -> int:
        raise ValueError("as it is")

    with pytest.raises(ValueError, match="as it is"):
        await alongside(work(), idle)


@pytest.mark.anyio
async def test_the_companion_can_cut_the_work_short_and_cleanup_runs() -> None:
    cleaned: list[bool] = []

    async def work() -> int:
        try:
            await anyio.sleep_forever()
        finally:
            cleaned.append(True)
        return 1  # pragma: no cover

    async def stop(scope: anyio.CancelScope) -> None:
        await anyio.sleep(0.01)
        scope.cancel()

    assert await alongside(work(), stop) == (False, None)
    assert cleaned == [True]
