"""The names arctl registers with verl (one home: the plugin registers them, the overrides select them)."""

AGENT_LOOP_NAME = "arctl_tree"
TRAINER_MODE = "arctl"
POLICY_LOSS_NAME = "arctl_drgrpo"  # PPO clip, the authors' loss
POLICY_LOSS_DUAL_NAME = "arctl_drgrpo_dual"  # with dual clip (optim.dual_clip)
BLOCK_SIZE_ENV = "ARCTL_TREE_BLOCK_SIZE"  # verl.block_size, to the patched engine in every worker (Ray's runtime env)
