"""Shared-prefix attention equals plain attention over each row's own concatenated sequence."""

from types import SimpleNamespace

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from arctl.backends.tiny import prefix_attention as pa
from arctl.backends.tiny.prefix_attention import SharedPrefix, shared_prefix, shared_prefix_attention


def reference(query, kp_rows, vp_rows, prefix_valid, ks, vs, own_valid, scale):
    """Row by row, head by head: softmax over [visible prefix columns, visible own columns]."""
    n, h, q, d = query.shape
    groups = h // ks.shape[1]
    out = torch.zeros(n, q, h, d, dtype=torch.float64)
    for i in range(n):
        for head in range(h):
            kvh = head // groups
            for t in range(q):
                keys = torch.cat([kp_rows[i, kvh][prefix_valid[i]], ks[i, kvh][own_valid[i, t]]])
                vals = torch.cat([vp_rows[i, kvh][prefix_valid[i]], vs[i, kvh][own_valid[i, t]]])
                w = torch.softmax((keys.double() @ query[i, head, t].double()) * scale, 0)
                out[i, t, head] = w @ vals.double()
    return out


@settings(max_examples=40, deadline=None)
@given(
    n_think=st.integers(1, 4), per_row=st.integers(1, 3), width=st.integers(1, 7), q=st.integers(1, 3),
    own=st.integers(0, 3), kv_heads=st.sampled_from([1, 2]), groups=st.sampled_from([1, 2]),
    repeats=st.integers(1, 3), seed=st.integers(0, 10_000),
)
def test_matches_per_row_attention(n_think, per_row, width, q, own, kv_heads, groups, repeats, seed):
    g = torch.Generator().manual_seed(seed)
    h, d = kv_heads * groups, 4
    # thinking cache [R, Hkv, width + 2, d]: longer than the prefix the rows use
    kt, vt = (torch.randn(n_think, kv_heads, width + 2, d, generator=g) for _ in range(2))
    rows = torch.randint(0, n_think, (n_think * per_row,), generator=g)
    prefix_valid = torch.rand(len(rows), width, generator=g) < 0.7
    prefix_valid[:, 0] = True  # every row sees at least the first prompt token
    prefix = SharedPrefix.build([(kt, vt)], rows, prefix_valid, torch.float32).expand(repeats)
    rows_x, valid_x = rows.repeat_interleave(repeats), prefix_valid.repeat_interleave(repeats, 0)
    n, k = len(rows_x), own + q
    query = torch.randn(n, h, q, d, generator=g)
    ks, vs = (torch.randn(n, kv_heads, k, d, generator=g) for _ in range(2))
    own_valid = torch.rand(n, q, k, generator=g) < 0.6
    own_valid[:, torch.arange(q), own + torch.arange(q)] = True  # each query sees itself
    mask = torch.zeros(n, 1, q, k).masked_fill_(~own_valid[:, None], float("-inf"))
    module = SimpleNamespace(layer_idx=0)
    ctx = pa._ACTIVE.set(prefix)
    try:
        got, _ = shared_prefix_attention(module, query, ks, vs, mask, scaling=0.5)
    finally:
        pa._ACTIVE.reset(ctx)
    want = reference(query, kt[rows_x, :, :width], vt[rows_x, :, :width], valid_x, ks, vs, own_valid, 0.5)
    torch.testing.assert_close(got.double(), want, atol=1e-5, rtol=1e-5)


def test_without_prefix_it_is_plain_causal_attention():
    g = torch.Generator().manual_seed(0)
    query = torch.randn(3, 2, 1, 8, generator=g)
    key, value = torch.randn(3, 2, 5, 8, generator=g), torch.randn(3, 2, 5, 8, generator=g)
    valid = torch.tensor([[1, 1, 1, 1, 1], [0, 0, 1, 1, 1], [1, 0, 1, 0, 1]], dtype=torch.bool)
    mask = torch.zeros(3, 1, 1, 5).masked_fill_(~valid[:, None, None], float("-inf"))
    got, _ = shared_prefix_attention(SimpleNamespace(layer_idx=0), query, key, value, mask, scaling=0.3)
    want = torch.nn.functional.scaled_dot_product_attention(query, key, value, attn_mask=mask, scale=0.3)
    torch.testing.assert_close(got, want.transpose(1, 2))


def test_context_restores_the_models_attention():
    from arctl.backends.tiny.model import build_model, model_config

    model = build_model(model_config(dict(hidden_size=16, num_layers=1, num_heads=2, num_kv_heads=1,
                                          intermediate_size=32, tie_embeddings=True, max_position_embeddings=32),
                                     12, 0, 1), 0)
    before = model.config._attn_implementation
    with pytest.raises(RuntimeError, match="boom"):
        with shared_prefix(model, None):
            assert model.config._attn_implementation == "arctl_shared_prefix"
            raise RuntimeError("boom")
    assert model.config._attn_implementation == before
