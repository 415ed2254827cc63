"""stitch_fragments: hand-worked cases and a dictionary-loop reference on random fragments."""

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from arctl.track.run_data import RunData
from arctl.track.runs import stitch_fragments, stitch_logged

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


_CELL = st.one_of(st.none(), st.integers(0, 9), st.just("nan"))  # not logged, a number, a logged NaN


@settings(max_examples=120, deadline=None)
@given(st.lists(st.tuples(st.one_of(st.none(), st.integers(0, 6)),
                          st.lists(st.tuples(st.one_of(st.none(), st.integers(0, 6)), _CELL, _CELL),
                                   min_size=1, max_size=8)), min_size=1, max_size=3))
def test_matches_a_loop_reference(fragments):
    frags = []
    for i, (rewind, rows) in enumerate(fragments):
        vals = [[NAN if v in (None, "nan") else float(v) for v in r] for r in rows]
        f = frag(f"f{i}", float(i), ["trainer/global_step", "m", "n"], vals)
        f.nan = np.array([[v == "nan" for v in r] for r in rows], dtype=bool).reshape(len(rows), 3)
        f.rewind_step = rewind if i else None
        frags.append(f)
    # reference: walk fragments in start order, rows in order; a rewind forgets the steps after it; carry
    # the last step; last write wins, a logged NaN too
    ref: dict[tuple[int, str], object] = {}
    for f, (_, rows) in zip(frags, fragments):
        if f.rewind_step is not None:
            ref = {k: v for k, v in ref.items() if k[0] <= f.rewind_step}
        step = None
        for row in rows:
            if row[0] is not None:
                step = int(row[0])
            if step is None:
                continue
            for key, v in zip(("m", "n"), row[1:]):
                if v is not None:
                    ref[(step, key)] = v
            ref.setdefault((step, "_seen"), 1)
    wide, logged, _ = stitch_logged(frags)
    got = {(int(s), str(k)): ("nan" if math.isnan(wide.iloc[i, j]) else wide.iloc[i, j])
           for i, s in enumerate(wide.index) for j, k in enumerate(wide.columns) if logged[i, j]}
    assert got == {k: v for k, v in ref.items() if k[1] != "_seen"}
    assert not (~logged & ~np.isnan(wide.to_numpy())).any()  # a cell not logged holds NaN
    assert sorted(wide.index) == sorted({s for s, k in ref if k == "_seen"})
    plain, _ = stitch_fragments(frags)
    assert plain.equals(wide)


def test_a_fragment_a_rewind_cuts_whole_keeps_its_columns_first():
    """From a review: the numpy stitching dropped a fragment a later rewind cut to nothing, columns and
    all, so the column order (the cache's groups, the metric categories) differed from the old code's."""
    first = frag("a", 0.0, ["trainer/global_step", "b"], [[5, 1.0]])
    second = frag("b", 1.0, ["trainer/global_step", "a", "b"], [[2, 2.0, 3.0]])
    second.rewind_step = 1
    wide, logged, _ = stitch_logged([first, second])
    assert list(wide.columns) == ["b", "a"] and list(wide.index) == [2]
    assert wide.loc[2].tolist() == [3.0, 2.0] and logged.tolist() == [[True, True]]


def test_a_logged_nan_is_kept_and_a_later_attempt_overrides_it_either_way():
    """A loss that went NaN at step 2 shows NaN there, not the earlier attempt's value; a later
    attempt's number replaces an earlier NaN; a step that logged nothing stays unlogged."""
    first = frag("a", 0.0, ["trainer/global_step", "loss", "acc"], [[1, 0.5, 0.1], [2, 0.4, NAN], [3, NAN, NAN]])
    first.nan = np.array([[0, 0, 0], [0, 0, 0], [0, 1, 0]], dtype=bool)
    second = frag("b", 1.0, ["trainer/global_step", "loss"], [[2, NAN], [3, 0.3]])
    second.nan = np.array([[0, 1], [0, 0]], dtype=bool)
    wide, logged, _ = stitch_logged([second, first])
    assert list(wide.index) == [1, 2, 3]
    assert wide["loss"].tolist()[0] == 0.5 and math.isnan(wide["loss"].tolist()[1]) and wide["loss"].tolist()[2] == 0.3
    assert logged.tolist() == [[True, True], [True, False], [True, False]]


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
