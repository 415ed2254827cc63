"""stitch_fragments: hand-worked cases and a dictionary-loop reference on random fragments."""

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from arctl.track.run_data import RunData
from arctl.track.runs import stitch_fragments

NAN = math.nan


def frag(source, start, keys, rows):
    return RunData(wandb_id="x", source=source, start_time=start, keys=keys,
                   values=np.array(rows, dtype=float).reshape(len(rows), len(keys)))


def test_rows_without_the_step_key_take_the_last_step():
    f = frag("a", 0, ["trainer/global_step", "train/loss", "eval/d/final_acc"],
             [[NAN, 9.0, NAN], [5, 1.0, NAN], [NAN, NAN, 0.5], [6, 2.0, NAN]])
    wide, notes = stitch_fragments([f])
    assert list(wide.index) == [5, 6]  # the row before any step is dropped
    assert wide.loc[5, "eval/d/final_acc"] == 0.5 and wide.loc[5, "train/loss"] == 1.0
    assert notes == []


def test_later_fragment_wins_per_metric_and_order_is_by_start_time():
    first = frag("b", 10.0, ["trainer/global_step", "m", "n"], [[0, 1, 1], [1, 2, 2], [2, 3, 3]])
    second = frag("a", 20.0, ["trainer/global_step", "m"], [[1, 20], [2, 30], [3, 40]])
    wide, _ = stitch_fragments([second, first])  # given out of order
    assert wide["m"].tolist() == [1, 20, 30, 40]
    assert wide["n"].tolist()[:3] == [1, 2, 3] and math.isnan(wide["n"].tolist()[3])


def test_fragment_without_step_key_falls_back_to_wandb_step():
    f = frag("c", 0, ["_step", "m"], [[0, 1.0], [1, 2.0]])
    wide, notes = stitch_fragments([f])
    assert wide["m"].tolist() == [1.0, 2.0] and "used W&B's _step" in notes[0]


@settings(max_examples=80, deadline=None)
@given(st.lists(st.lists(st.tuples(st.one_of(st.none(), st.integers(0, 6)),
                                   st.one_of(st.none(), st.integers(0, 9)),
                                   st.one_of(st.none(), st.integers(0, 9))),
                         min_size=1, max_size=8), min_size=1, max_size=3))
def test_matches_a_loop_reference(fragments):
    frags = []
    for i, rows in enumerate(fragments):
        vals = [[NAN if v is None else float(v) for v in r] for r in rows]
        frags.append(frag(f"f{i}", float(i), ["trainer/global_step", "m", "n"], vals))
    # reference: walk fragments in start order, rows in order; carry the last step; last write wins
    ref: dict[tuple[int, str], float] = {}
    for f in frags:
        step = None
        for row in f.values:
            if not math.isnan(row[0]):
                step = int(row[0])
            if step is None:
                continue
            for key, v in zip(("m", "n"), row[1:]):
                if not math.isnan(v):
                    ref[(step, key)] = v
            ref.setdefault((step, "_seen"), 1)
    wide, _ = stitch_fragments(frags)
    got = {(int(s), k): v for s, row in wide.iterrows() for k, v in row.items() if not math.isnan(v)}
    assert got == {k: v for k, v in ref.items() if k[1] != "_seen"}
    assert sorted(wide.index) == sorted({s for s, k in ref if k == "_seen"})


def test_equal_start_times_follow_w_and_b_s_count_of_attempts_in_one_second():
    """The second attempt started within the same second is in ``...-<id>-1/``, which sorts before ``...-<id>/``."""
    from arctl.track.runs.stitch import attempt_order

    first = frag("w/offline-run-20260101_120000-r1/run-r1.wandb", 5.0, ["trainer/global_step", "m"], [[0, 1], [1, 1]])
    second = frag("w/offline-run-20260101_120000-r1-1/run-r1.wandb", 5.0, ["trainer/global_step", "m"], [[1, 2]])
    tenth = frag("w/offline-run-20260101_120000-r1-10/run-r1.wandb", 5.0, ["trainer/global_step", "m"], [[1, 3]])
    assert [f.source for f in sorted([tenth, second, first], key=attempt_order)] == [first.source, second.source,
                                                                                     tenth.source]
    assert stitch_fragments([second, first])[0]["m"].tolist() == [1, 2]
    assert stitch_fragments([tenth, second, first])[0]["m"].tolist() == [1, 3]
    # an id that ends like the count is not read as one; an earlier start time still comes first
    own = frag("w/offline-run-20260101_120000-r1-1/run-r1-1.wandb", 5.0, [], [])
    assert attempt_order(own)[1] == 0
    assert sorted([second, frag("x/run-r1.wandb", 4.0, [], [])], key=attempt_order)[1] is second
