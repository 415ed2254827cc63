"""Suite-wide test settings. Area fixtures live in tests/<area>/conftest.py."""

import os

# Never talk to a W&B server from tests; never pick up a developer's key.
os.environ.setdefault("WANDB_MODE", "offline")
os.environ.setdefault("WANDB_SILENT", "true")
os.environ.pop("WANDB_API_KEY", None)
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
