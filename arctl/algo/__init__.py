"""The AnytimeReasoner mathematics as pure torch functions (no I/O), shared by all backends."""
