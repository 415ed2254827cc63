"""The paper's figures and tables rebuilt from runs (pandas + matplotlib)."""
