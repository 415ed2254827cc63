"""status.json is written by a job but read as input: a field whose value is not of its kind is left out."""

from __future__ import annotations

import json

from arctl.launch.status_file import STATUS_FILE, read_status


def test_only_the_fields_of_their_kind_are_read(tmp_path):
    good = {"state": "running", "pid": 41, "step": -1, "first_step": 3, "first_step_at": 1.5, "total_steps": 100,
            "test_freq": 20, "attempt": 0, "metric_value": 0.25, "job_id": "7_1", "metric_files": {"m": [1, 2, 3]},
            "error": None}
    bad = {"state": "dancing", "pid": 0, "step": True, "first_step": 2.0, "first_step_at": float("inf"),
           "total_steps": 0, "test_freq": "20", "attempt": -1, "metric_value": False, "job_id": 7,
           "metric_files": {"m": [1, True, 3]}, "error": ["x"], "unknown": 1}
    for key, value in bad.items():
        (tmp_path / STATUS_FILE).write_text(json.dumps({**good, key: value}))
        assert read_status(tmp_path) == {k: v for k, v in good.items() if k != key}, key
    (tmp_path / STATUS_FILE).write_text(json.dumps(good))
    assert read_status(tmp_path) == good
