"""``seeds_text`` writes seeds as ``--seeds`` takes them: what the CLI parses back is the same seeds."""

from hypothesis import given
from hypothesis import strategies as st

from arctl.cli.common import parse_seeds
from arctl.config.ranges import seeds_text


def test_runs_of_three_or_more_become_ranges():
    assert seeds_text([0, 1, 2, 3, 4, 5, 6, 7]) == "0-7"
    assert seeds_text([7, 5, 4, 0, 1]) == "0,1,4,5,7"
    assert seeds_text([3, 4, 5, 9, 11, 12, 13]) == "3-5,9,11-13"


@given(st.sets(st.integers(0, 60), min_size=1, max_size=40))
def test_the_cli_reads_back_the_same_seeds(seeds):
    assert sorted(parse_seeds(seeds_text(seeds))) == sorted(seeds)
