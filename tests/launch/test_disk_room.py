"""Whether the checkpoints of the runs a launch starts fit the workspace's file system, said by its dry run before any
GPU hour is spent (``--json``: ``checkpoint_disk``): each run keeps ``verl.keep_checkpoints`` checkpoints and holds one
more while a save completes (~21 GB each at 1.5B). Before, nothing checked the room: a paper sweep's 27 runs keep up
to ~1.7 TB, and a run whose save did not fit failed after hours on 8 GPUs. A note, never a refusal."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest

from arctl.backends.verl.disk import BYTES_PER_PARAMETER, GB, qwen2_parameters
from arctl.launch.disk_room import checkpoint_room, disk_note
from arctl.launch.workspace import Workspace

# DeepSeek-R1-Distill-Qwen-1.5B's config.json (1,777,088,000 parameters)
R1_1_5B = {"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 1536, "num_hidden_layers": 28,
           "intermediate_size": 8960, "vocab_size": 151936, "num_attention_heads": 12, "num_key_value_heads": 2,
           "tie_word_embeddings": False, "max_position_embeddings": 131072, "torch_dtype": "bfloat16"}
ONE = qwen2_parameters(R1_1_5B) * BYTES_PER_PARAMETER / GB  # ~21.3 GB


@pytest.fixture
def model(tmp_path) -> Path:
    folder = tmp_path / "models" / "r1-1.5b"
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps(R1_1_5B))
    return folder


def free(monkeypatch, gb: float) -> None:
    """The file system's free space, as shutil.disk_usage says it (the folder measured is recorded)."""
    def usage(path):
        free.seen = Path(path)
        return shutil._ntuple_diskusage(10**15, 10**15 - int(gb * GB), int(gb * GB))  # noqa: SLF001

    monkeypatch.setattr(shutil, "disk_usage", usage)


def _item(n: int, model: Path | str | None, action: str = "new", **verl) -> SimpleNamespace:
    config = {"backend": "verl", "model": {"path": str(model)}, "verl": verl} if model else {"backend": "tiny"}
    return SimpleNamespace(run_id=f"r{n}", action=action, config=config)


def test_the_note_adds_what_every_run_keeps_at_once(tmp_path, model, monkeypatch):
    workspace = Workspace(tmp_path / "ws")  # not made yet: measured at its nearest existing folder
    free(monkeypatch, 50)
    items = [_item(n, model) for n in range(3)]
    note = disk_note(items, workspace)
    assert free.seen == tmp_path  # the runs folder's nearest existing folder
    need = 3 * 3 * ONE  # keep_checkpoints=2, +1 while a save completes: 191.9 GB
    assert note == (f"the 3 runs' checkpoints need up to {need:,.0f} GB at once (3 x ~21 GB each: "
                    f"verl.keep_checkpoints=2, +1 while a save completes); the workspace's file system ({tmp_path}) "
                    "has 50 GB free: a save that does not fit fails its run after hours of GPU time "
                    f"(verl.keep_checkpoints=1 needs {3 * 2 * ONE:,.0f} GB; or put the workspace where there is room)")
    room = checkpoint_room(items, workspace)
    assert room.as_json() == {"gb": round(need, 1), "free_gb": 50.0, "runs": 3, "unknown": 0}
    # room enough: no note, the line only informs
    free(monkeypatch, 500)
    assert disk_note(items, workspace) is None
    assert checkpoint_room(items, workspace).line().endswith(f"({tmp_path}) has 500 GB free")
    # keep_checkpoints=1 already: no setting to lower; a model not downloaded is named, not guessed
    free(monkeypatch, 50)
    mixed = [_item(0, model, keep_checkpoints=1), _item(1, model, keep_checkpoints=1), _item(2, "nobody/not-cached")]
    note = disk_note(mixed, workspace)
    assert note.startswith(f"the 2 runs' checkpoints need up to {2 * 2 * ONE:,.0f} GB at once (2 x ~21 GB each: "
                           "verl.keep_checkpoints=1, +1 while a save completes; and 1 run of unknown size)"), note
    assert note.endswith("(put the workspace where there is room)"), note
    assert checkpoint_room([_item(0, model, rehearsal_steps=2), _item(1, None)], workspace) is None  # nothing to count


def test_a_resumed_run_counts_what_its_folder_holds_already(tmp_path, model, monkeypatch):
    workspace = Workspace(tmp_path / "ws")
    kept = workspace.run_dir("r0") / "checkpoints" / "global_step_10"
    kept.mkdir(parents=True)
    with open(kept / "model.pt", "wb") as f:  # two checkpoints' bytes, sparse: nothing really written
        f.truncate(int(2 * ONE * GB))
    free(monkeypatch, 30)
    room = checkpoint_room([_item(0, model, action="resume")], workspace)
    assert free.seen == workspace.runs_dir
    assert room.gb == pytest.approx(ONE, rel=1e-6) and room.over is False  # the save's one more checkpoint
    assert f"less the {2 * ONE:,.0f} GB the resumed runs hold already" in room.line()


def test_a_paper_runs_dry_run_says_its_checkpoints_do_not_fit(sandbox, model, monkeypatch):
    """3 new paper runs of R1-Distill-Qwen-1.5B (a local folder with its config.json) keep up to 3 checkpoints each
    (~192 GB); with 40 GB free the dry run says so after the reservation line (the SLURM programs are shims). The
    launch checks of what is seen from here are skipped (no datasets here); a CPU rehearsal saves no model."""
    monkeypatch.setenv("ARCTL_VERL_LAUNCH_CHECK", "0")
    free(monkeypatch, 40)
    args = ["run", "main-grpo", "--scale", "paper", "--seeds", "0-2", "cluster=slurm", f"model.path={model}",
            "--dry-run", "--workdir", str(sandbox.ws)]
    result = sandbox.run(*args, "--json")
    assert result.crash is None and result.code == 0, result.err + (result.crash or "")
    doc = json.loads(result.out)
    assert doc["checkpoint_disk"] == {"gb": round(9 * ONE, 1), "free_gb": 40.0, "runs": 3, "unknown": 0}, doc
    text = sandbox.run(*args)
    assert text.code == 0, text.err
    out = " ".join(text.out.split())
    reserved = out.index("asks SLURM for 3 job(s)")
    note = out.index(f"note: the 3 runs' checkpoints need up to {9 * ONE:,.0f} GB at once (3 x ~21 GB each")
    assert reserved < note and f"({sandbox.ws}) has 40 GB free" in out[note:], out[reserved:]
    rehearsal = sandbox.run(*args, "verl.rehearsal_steps=2", "--json")
    assert rehearsal.code == 0 and json.loads(rehearsal.out)["checkpoint_disk"] is None, rehearsal.err
    assert os.listdir(sandbox.ws) == ["registry.sqlite"]  # a dry run writes nothing


def test_a_launch_says_it_too_before_it_submits(sandbox, model, monkeypatch):
    """The launch itself (not only its dry run) says it before sbatch is asked (the sandbox's sbatch refuses)."""
    monkeypatch.setenv("ARCTL_VERL_LAUNCH_CHECK", "0")
    free(monkeypatch, 40)
    result = sandbox.run("run", "main-grpo", "--scale", "paper", "--seeds", "0-2", "cluster=slurm",
                         f"model.path={model}", "--workdir", str(sandbox.ws))
    said = " ".join((result.out + result.err).split())
    assert f"note: the 3 runs' checkpoints need up to {9 * ONE:,.0f} GB at once" in said, said
    assert said.index("note: the 3 runs' checkpoints") < said.index("sbatch"), said
