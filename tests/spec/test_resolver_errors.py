"""Errors of arctl's interpolation resolvers (``arctl.last``, ``arctl.grid``, ``arctl.part``) and of ``${KEY}``
interpolations: one line naming the resolver's problem and the key the user wrote, where it was written."""

import textwrap

import pytest

from arctl.compose import SpecError, resolve_experiment, resolve_sweep
from arctl.compose.resolvers import RESOLVERS


def _error(overrides, name="ablation-vr", arm="grpo") -> str:
    with pytest.raises(SpecError) as info:
        resolve_experiment(name, overrides, arms=[arm])
    text = str(info.value)
    assert "\n" not in text and "raised while resolving" not in text and "positional argument" not in text
    return text


@pytest.mark.parametrize("size", ["0", "-3", "100000000"])
def test_a_bad_grid_size_names_the_key_that_calls_the_resolver(size):
    """From a review: thinking.budgets='${arctl.grid:...,0}' said "eval.grid_size=0 is invalid", a key the user
    did not write."""
    text = _error([f"thinking.budgets='${{arctl.grid:${{scale.budgets}},{size}}}'"])
    assert text.startswith(f"command line (ablation-vr/grpo): thinking.budgets: arctl.grid: size {size} is invalid: "
                           "expected an integer >= 1 and <= 10000")


@pytest.mark.parametrize("size, shown", [("2.5", "2.5"), ("true", "true"), ("abc", "'abc'")])
def test_a_grid_size_that_is_no_integer_is_refused(size, shown):
    """From a review: 2.5 was truncated to 2 and true read as 1, silently; 'abc' was Python's ValueError."""
    text = _error([f"eval.grid='${{arctl.grid:${{scale.budgets}},{size}}}'"])
    assert text.startswith(f"command line (ablation-vr/grpo): eval.grid: arctl.grid: size {shown} is invalid: "
                           "expected an integer")


def test_the_grid_resolver_by_hand():
    grid = RESOLVERS["arctl.grid"]
    assert grid([2000, 8000], 4) == [2000, 4000, 6000, 8000]
    for bad in (0, 2.5, True, "4", None):
        with pytest.raises(SpecError, match="arctl.grid: size .* is invalid"):
            grid([8000], bad)


@pytest.mark.parametrize("call, says", [
    ("${arctl.last:}", "arctl.last takes 1 argument, BUDGETS (a list of token budgets), not 0 — e.g. "
                       "${arctl.last:${scale.budgets}}"),
    ("${arctl.last:[8],[16]}", "arctl.last takes 1 argument, BUDGETS (a list of token budgets), not 2"),
    ("${arctl.grid:${scale.budgets}}", "arctl.grid takes 2 arguments, BUDGETS,SIZE"),
    ("${arctl.part:${scale.budgets},0.5,1}", "arctl.part takes 2 arguments, BUDGETS,FRACTION"),
])
def test_a_resolver_called_with_the_wrong_number_of_arguments_says_what_it_takes(call, says):
    """From a review: ${arctl.last:} printed Python's "missing 1 required positional argument"."""
    text = _error([f"thinking.budgets='{call}'"])
    assert text.startswith(f"command line (ablation-vr/grpo): thinking.budgets: {says}")


def test_a_bad_value_a_resolver_reads_from_another_key_is_that_keys_error():
    """A spec's eval.grid='${arctl.grid:...,${eval.grid_size}}' and the user's eval.grid_size=0: the user's key."""
    text = _error(["eval.grid_size=0"], name="baselines-elastic", arm="elastic")
    assert text.startswith("command line (baselines-elastic/elastic): eval.grid_size: eval.grid_size=0 is invalid")


@pytest.mark.parametrize("override, key", [("thinking.lam=${nope}", "thinking.lam"), ("eval.grid=[${nope}]",
                                                                                          "eval.grid[0]")])
def test_an_unknown_interpolation_key_names_the_key_that_holds_it(override, key):
    text = _error([override])
    assert text.startswith(f"command line (ablation-vr/grpo): {key}: Interpolation key 'nope' not found")


@pytest.fixture
def sweeps(tmp_path, monkeypatch):
    (tmp_path / "sweeps").mkdir()
    monkeypatch.setenv("ARCTL_SPECS", str(tmp_path))

    def write(text):
        path = tmp_path / "sweeps" / "mine.yaml"
        path.write_text(textwrap.dedent(text))
        return path

    return write


@pytest.mark.parametrize("body", ['overrides: ["thinking.lam=${nope}"]\n', 'grid: {thinking.lam: ["${nope}"]}\n'],
                         ids=["overrides", "grid"])
def test_an_interpolation_error_in_a_sweep_names_its_file_and_key(sweeps, body):
    """From a review: a user's sweep with ${nope} said "ablation-vr/grpo: overrides: ...", no file."""
    path = sweeps("description: x\nexperiments: [ablation-vr]\nseeds: [0]\n" + body)
    with pytest.raises(SpecError) as info:
        resolve_sweep("mine")
    assert str(info.value).startswith(f"{path} (ablation-vr/grpo): thinking.lam: Interpolation key 'nope' not found")


def test_a_bad_resolver_call_in_a_sweep_names_its_file(sweeps):
    path = sweeps("""\
        experiments: [ablation-vr]
        seeds: [0]
        overrides: ["eval.grid='${arctl.grid:${scale.budgets},2.5}'"]
        """)
    with pytest.raises(SpecError) as info:
        resolve_sweep("mine")
    assert str(info.value).startswith(f"{path} (ablation-vr/grpo): eval.grid: arctl.grid: size 2.5 is invalid")


def test_an_unquoted_interpolation_with_a_comma_is_told_to_quote_it():
    """Hydra cannot parse ``eval.grid=${arctl.grid:${scale.budgets},32}`` unquoted (the comma); its message
    only repeated the override. The line now shows the quoted form, which resolves."""
    text = _error(["eval.grid=${arctl.grid:${scale.budgets},32}"])
    assert "cannot parse override" in text
    quoted = 'eval.grid="${arctl.grid:${scale.budgets},32}"'
    assert f"quote a value holding an interpolation with a comma: {quoted}" in text
    assert f"'{quoted}'" in text  # the shell form: single quotes outside, so bash leaves ${...} alone
    run = resolve_experiment("ablation-vr", [quoted], arms=["grpo"])[0]  # the form shown resolves
    assert len(run.config["eval"]["grid"]) == 32
    import subprocess
    shell = subprocess.run(["bash", "-c", f"printf %s '{quoted}'"], capture_output=True, text=True)
    assert shell.stdout == quoted  # what the shell hands arctl, unchanged
    assert "quote" not in _error(["thinking.budgets=[1,2"])  # a bracket left open: not a quoting problem
