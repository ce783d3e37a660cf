"""The per-topic rates of GET_CONSUMER_RUNNING_INFO's statusTable, computed as Java 4.9.8's
ConsumerStatsManager / StatsItem do (figures worked by hand from Java's formulas)."""

from __future__ import annotations

from trocket.client.consume_stats import ConsumerStatsManager, snapshot


def test_a_window_is_javas_compute_stats_data():
    stats = ConsumerStatsManager()
    ok = stats.topic("T").consume_ok
    assert snapshot(ok.minute) == (0, 0.0, 0.0)  # never sampled: Java's empty StatsSnapshot
    ok.value, ok.times = 30, 3  # three calls, 30 messages, before the first sample
    stats.sample(100_000, hour=False)
    # the first sample is preceded by a zero one 10 s earlier (samplingInSeconds)
    assert list(ok.minute) == [(90_000, 0, 0), (100_000, 3, 30)]
    assert snapshot(ok.minute) == (30, 3.0, 10.0)
    for i in range(1, 8):  # seven more samples, 10 s apart, 5 messages in one call each
        ok.value += 5
        ok.times += 1
        stats.sample(100_000 + i * 10_000, hour=False)
    # 7 samples kept: the minute from 110 s to 170 s
    assert [t for t, _, _ in ok.minute] == [110_000 + i * 10_000 for i in range(7)]
    assert snapshot(ok.minute) == (30, 0.5, 5.0)


def test_consume_status_takes_each_figure_from_javas_window():
    stats = ConsumerStatsManager()
    t = stats.topic("T")
    assert stats.status("other").consume_ok_tps == 0.0  # a topic never seen: zeros
    t.pull_rt.value, t.pull_rt.times = 120, 4  # 4 FOUND pulls, 30 ms each
    t.pull_tps.value, t.pull_tps.times = 40, 4
    t.consume_rt.value, t.consume_rt.times = 50, 10
    t.consume_ok.value, t.consume_ok.times = 38, 10
    t.consume_failed.value, t.consume_failed.times = 2, 10
    stats.sample(1_000_000, hour=True)
    s = stats.status("T")
    assert (s.pull_rt, s.pull_tps, s.consume_rt, s.consume_ok_tps, s.consume_failed_tps) == (
        30.0, 4.0, 5.0, 3.8, 0.2)
    assert s.consume_failed_msgs == 2  # the hour's sum
    # a quiet minute: consumeRT falls back to the hour's average, the rates to 0
    for i in range(1, 7):
        stats.sample(1_000_000 + i * 10_000, hour=False)
    s = stats.status("T")
    assert (s.consume_ok_tps, s.consume_rt, s.consume_failed_msgs) == (0.0, 5.0, 2)
    assert s.pull_rt == 0.0


async def test_the_sampler_runs_every_ten_seconds(autojump_clock):
    import trio

    stats = ConsumerStatsManager()
    item = stats.topic("T").consume_ok
    async with trio.open_nursery() as nursery:
        nursery.start_soon(stats.run)
        await trio.sleep(25)
        nursery.cancel_scope.cancel()
    # passes at 0, 10 and 20 s (a zero sample first); the hour window at the first only
    assert len(item.minute) == 4 and len(item.hour) == 2

