"""The run config: what a run config *is* - its schema (``schema.py``: one dataclass per section,
every key's type, default, range and choices; registered in Hydra's ConfigStore) and the value
ranges it is built from (``ranges.py``). No I/O; above ``arctl.algo`` (whose defaults and choice
lists it takes), below every layer that reads a config. Composing spec files into run configs and
validating them is ``arctl.compose``'s.
"""
