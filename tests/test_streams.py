"""Streams on tpu, as a CUDA user expects them: ids from a pool, the current stream per thread
and device, stream guards, and cross-stream ordering through events (one in-order queue per
device underneath)."""

from __future__ import annotations

import threading

import torch
from conftest import TPU, assert_close, make, run_python


def test_new_streams_are_on_the_current_device_with_their_own_ids():
    a, b = torch.Stream("tpu"), torch.tpu.Stream()
    for stream in (a, b):
        assert stream.device == torch.device("tpu", 0) and stream.device_index == torch.tpu.current_device()
        assert stream.stream_id != 0  # not the default stream
    assert a.stream_id != b.stream_id
    assert a != b and a == torch.Stream(stream_id=a.stream_id, device_index=0, device_type=a.device_type)


def test_the_default_stream_is_current_until_a_guard_changes_it():
    default = torch.tpu.current_stream()
    assert default.stream_id == 0 and default == torch.tpu.default_stream()
    stream = torch.tpu.Stream()
    with torch.tpu.stream(stream):
        assert torch.tpu.current_stream() == stream
        assert torch.accelerator.current_stream() == stream
    assert torch.tpu.current_stream() == default
    with stream:  # torch.Stream's own guard
        assert torch.tpu.current_stream() == stream
    assert torch.tpu.current_stream() == default
    torch.tpu.set_stream(stream)
    try:
        assert torch.tpu.current_stream() == stream
    finally:
        torch.tpu.set_stream(default)
    with torch.tpu.stream(None):
        assert torch.tpu.current_stream() == default


def test_the_current_stream_is_per_thread():
    stream = torch.tpu.Stream()
    seen = []
    with torch.tpu.stream(stream):
        worker = threading.Thread(target=lambda: seen.append(torch.tpu.current_stream().stream_id))
        worker.start()
        worker.join()
        assert torch.tpu.current_stream() == stream
    assert seen == [0]


def test_work_ordered_across_streams_by_events():
    x = make((256, 256))
    a = x.to(TPU)
    producer, consumer = torch.tpu.Stream(), torch.tpu.Stream()
    with torch.tpu.stream(producer):
        product = a @ a
        done = producer.record_event()
    consumer.wait_event(done)
    with torch.tpu.stream(consumer):
        shifted = product + 1
    consumer.wait_stream(producer)
    consumer.synchronize()
    assert done.query() and consumer.query()
    assert_close(shifted, x @ x + 1, rtol=1e-4, atol=1e-3)


def test_event_timing_across_streams_is_positive():
    a = make((512, 512)).to(TPU)
    (a @ a).cpu()
    stream = torch.tpu.Stream()
    start, end = torch.tpu.Event(enable_timing=True), torch.tpu.Event(enable_timing=True)
    start.record(stream)
    with torch.tpu.stream(stream):
        for _ in range(3):
            a = a @ a / 512
    end.record(stream)
    end.synchronize()
    assert start.elapsed_time(end) > 0


def test_a_stream_on_another_device_guards_that_device():
    code = """
import torch, torch_tpu
s = torch.Stream("tpu:1")
print("INDEX", s.device_index, s.stream_id != 0)
with torch.tpu.stream(s):
    print("INSIDE", torch.tpu.current_device(), torch.tpu.current_stream(1) == s)
print("AFTER", torch.tpu.current_device(), torch.tpu.current_stream(1).stream_id)
with s:
    print("WITH", torch.tpu.current_stream(1) == s)
print("DEFAULT0", torch.tpu.current_stream(0).stream_id)
"""
    result = run_python(code, TORCH_TPU_NUM_DEVICES="2")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "INDEX 1 True" in out and "INSIDE 1 True" in out and "AFTER 0 0" in out, out
    assert "WITH True" in out and "DEFAULT0 0" in out, out
