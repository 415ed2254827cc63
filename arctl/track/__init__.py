"""W&B writing helpers, the offline .wandb reader, the online reader and the metric schema."""
