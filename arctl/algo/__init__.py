"""The AnytimeReasoner mathematics as pure torch functions (no I/O), shared by all backends.

- ``priors``: budget priors P over {b_1 < ... < b_m} (Eq. 3)
- ``advantages``: returns R, baselines V1 / V2, BRPO thinking advantages (Eqs. 6-9), token spreading,
  decoupled summary and outcome GRPO advantages (Dr. GRPO, no std)
- ``rewards``: length-penalised rewards (L1-style v1, Arora-style v2)
- ``objective``: J_anytime (Eq. 3, App. B bounds; J, the final accuracy: ``metrics.final_accuracy``)
- ``metrics``: per-budget / anytime / final accuracy, curve area, variance diagnostics (Fig. 2)
- ``prompts``: summary prompts after a cut thinking (App. A)
- ``tree``: tree packing and its attention masks (dense, FlexAttention mask_mod / BlockMask) (App. C)
- ``verify``: answer extraction, math-verify equivalence with timeouts, the formatting rule
"""
