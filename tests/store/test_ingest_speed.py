"""PlainProgress: rate-limited plain progress lines for a stderr that is not a terminal."""

from __future__ import annotations

import io

from ragsieve.console import PlainProgress


def test_lines_are_rate_limited_but_first_and_last_always_print() -> None:
    now = [0.0]
    out = io.StringIO()
    report = PlainProgress(out, interval_s=5.0, clock=lambda: now[0])
    for step in range(1, 21):
        now[0] = step * 1.0
        report("embed", step * 10, 200)
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("embedding chunks: 10/200 (5%)")
    assert lines[-1].startswith("embedding chunks: 200/200 (100%)")
    assert len(lines) == 5  # t=1 (first), 6, 11, 16, and the last at t=20
    assert "10.0/s" in lines[-1]  # 190 chunks in the 19 s since the first report (its 10 came before the clock)


def test_each_stage_has_its_own_clock_and_label() -> None:
    now = [0.0]
    out = io.StringIO()
    report = PlainProgress(out, interval_s=60.0, clock=lambda: now[0])
    report("load", 1, 3)
    report("load", 2, 3)  # within the interval: silent
    report("index", 1, 2)
    assert out.getvalue().splitlines() == ["loading files: 1/3 (33%) 0.0s", "building indexes: 1/2 (50%) 0.0s"]


def test_embed_ahead_gives_the_vectors_of_embedding_at_the_end() -> None:
    import numpy as np
    from tests.helpers import HashEmbedder

    from ragsieve.embed.ahead import EmbedAhead

    emb = HashEmbedder()
    texts = [f"chunk number {i} about topic {i % 7}" for i in range(300)]
    reused = {texts[5], texts[77]}
    ahead = EmbedAhead(emb, batch=32, skip=lambda t: t in reused)
    for start in range(0, 250, 50):  # the last 50 are never submitted: embedded by finish()
        ahead.submit(texts[start : start + 50] + texts[:3])  # repeats are embedded once
    steps: list[tuple[int, int]] = []
    todo = [t for t in texts if t not in reused]
    got = ahead.finish(todo, lambda stage, done, total: steps.append((done, total)))
    np.testing.assert_allclose(got, emb.embed(todo), atol=1e-6)
    assert steps[-1] == (len(todo), len(todo)) and ahead.embed_seconds > 0


def test_lines_show_the_time_left_at_the_rate_so_far() -> None:
    now = [0.0]
    out = io.StringIO()
    report = PlainProgress(out, interval_s=0.0, clock=lambda: now[0])
    report("embed", 0, 300)
    now[0] = 10.0
    report("embed", 100, 300)  # 10/s: 200 left take 20 s
    now[0] = 30.0
    report("embed", 300, 300)
    lines = out.getvalue().splitlines()
    assert lines[1].endswith("10.0/s, 10.0s, ~20s left")
    assert "left" not in lines[0] and "left" not in lines[-1]
