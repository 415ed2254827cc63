"""Actor peak memory at paper scale, estimated on a CPU by running verl's own code on tensors without data.

    python benchmarks/gpu/memory_model.py --json OUT.json        # the table (a few minutes on 2 cores)
    python benchmarks/gpu/memory_model.py --quick                # 32,768 only, a smoke run

What runs, unchanged: transformers' Qwen2ForCausalLM (DeepSeek-R1-Distill-Qwen-1.5B's shape: hidden
1536, 28 layers, 12 query / 2 KV heads, intermediate 8960, vocabulary 151,936, untied embeddings) with
gradient checkpointing enabled as verl enables it; verl 0.9.1's ``FSDPEngineWithLMHead.forward_step``
(``prepare_model_inputs`` as patched by arctl's plugin, the model call under autocast,
``prepare_model_outputs`` on the padded path, ``logprobs_from_logits``, ``entropy_from_logits``,
``entropy_checkpointing``, verl's fused-kernel forward ``forward_with_torch_backend`` /
``FusedLinearForPPO`` when ``use_fused_kernels``), then ``loss.backward()`` for the update; verl's
``rearrange_micro_batches`` for the rows a token budget puts in one micro-batch. Where it differs
from a GPU run:

* Tensors have no data. The weights and every tensor computed from them are :class:`Phantom`
  tensors: a shape, dtype, strides, autograd, and a ``meta`` tensor underneath (``device`` says cpu,
  so CPU autocast and autograd's CPU queue serve them). Index tensors (ids, offsets, lengths, the
  tree mask) are real and small, so verl's and arctl's data-dependent code (nested-tensor offsets,
  ``.item()``) runs as written.
* CUDA autocast is emulated: the ops CUDA's autocast lists cast (softmax, log_softmax, logsumexp,
  sum, pow, rsqrt, ... to float32; matmuls to bf16) get CUDA's policy under CPU autocast
  (:func:`cuda_autocast_policy`). :func:`autocast_check` replays every distinct torch call of an
  emulated forward (Qwen2 at paper width and vocabulary, verl's entropy, log-prob and fused
  functions) on FakeTensors of a fake CUDA device under torch's own CUDA autocast kernels and
  compares the result dtypes; the run reports the result.
* ``logsumexp`` runs as torch's CUDA implementation does (``(x - max).exp_()``: a full-size
  temporary), so that temporary is counted; other kernels' internal workspaces are not.
* The attention kernels are stand-ins that allocate what the CUDA kernel allocates and save for
  backward what its autograd node saves: SDPA with arctl's boolean [B, 1, L, L] mask
  (layout ``dense``) as torch's ``scaled_dot_product_attention`` runs it on CUDA (the mask turned
  into an additive bf16 mask, then the memory-efficient kernel through
  ``aten._scaled_dot_product_efficient_attention`` and its real autograd formula; flash attention
  takes no mask), FlexAttention (layout ``flex``) as its compiled kernel (output, float32
  logsumexp; backward: delta, dQ, dK, dV). Their workspaces inside the kernel are not counted.
* FSDP is not run: the bf16 weights are not counted by the tally; what FSDP1 (verl's default
  strategy) holds per GPU is added from parameter counts (:func:`static_state`), and the gradients
  of the decoder layers are dropped as soon as they are accumulated (FSDP reduce-scatters and frees
  each layer's gradient in backward); those of the root unit (embeddings, final norm, lm_head) are
  kept to the end, as FSDP1 holds them.
* The loss of the update is a stand-in, a weighted sum of the per-token log-probs (arctl's PPO-clip
  loss is O(tokens) floats as well; its bytes do not matter here).

The byte counter is the GPU suite's ``TensorBytes`` (part e), subclassed (:class:`PeakBytes`): the
peak of the bytes of the tensor storages that ops create while it is active and that are still
alive (a TorchDispatchMode sees every op's outputs), keyed by storage identity, with the weights'
storages excluded (a ``t()`` of a weight is a view, not new bytes). It is not an allocator: no
caching, no fragmentation; the "fits" thresholds of ``suite.FITS_GIB`` keep 3 GiB for those, the
CUDA context and NCCL. Every number this script prints is an estimate for a GPU made on a CPU; none
was observed on a GPU.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import sys
import time
import warnings
import weakref
from pathlib import Path
from types import SimpleNamespace

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import suite  # noqa: E402  (benchmarks/gpu/suite.py: it puts the repository root and benchmarks/ on sys.path)
import torch  # noqa: E402
from _args import int_list  # noqa: E402
from torch.utils._pytree import tree_flatten, tree_unflatten  # noqa: E402

from arctl.backends.verl.settings import TREE_LAYOUTS  # noqa: E402

# the layouts that pack a tree (verl.tree_attention), the ones this model measures; "duplicate" packs none
LAYOUTS = tuple(x for x in TREE_LAYOUTS if x != "duplicate")

GIB = suite.GIB
FITS_GIB = suite.FITS_GIB  # usable GiB of an 80 GB and a 40 GB card (3 GiB kept for context, NCCL, fragmentation)
MODEL = suite.QWEN2_1_5B  # DeepSeek-R1-Distill-Qwen-1.5B's shape; untied embeddings below
TREE = suite.SHAPES["paper"]  # prompt 128, thinking 8,000, 4 cuts x 4 summaries x 128: rows of 10,176
ROW = 10176
# ppo_max_token_len_per_gpu / log_prob_max_token_len_per_gpu; 10,240: the smallest multiple of 128 that takes a
# 10,176 row; verl's default path (full-vocabulary logits) is measured up to DEFAULT_PATH_MAX only
BUDGETS = (8192, 10240, 16384, 24576, 32768, 65536)
DEFAULT_PATH_MAX = 32768
WORLD = 8  # FSDP ranks (one node of 8 GPUs)
REAL_LIMIT = 2 * GIB  # a real (CPU) tensor above this would mean a big tensor escaped the Phantom world
aten = torch.ops.aten


# ------------------------------------------------------------------------------ tensors without data
class Phantom(torch.Tensor):
    """A tensor without data: shape, dtype, strides and autograd of a CPU tensor, computed on a meta
    tensor (``elem``). Real tensors meeting a Phantom in an op are moved to meta for that op; an
    in-place op returns its (unchanged) first argument; ``.item()`` raises."""

    elem: torch.Tensor

    @staticmethod
    def __new__(cls, elem: torch.Tensor):
        r = torch.Tensor._make_wrapper_subclass(cls, elem.shape, strides=elem.stride(),
                                                storage_offset=elem.storage_offset(), dtype=elem.dtype,
                                                device="cpu", requires_grad=False)
        r.elem = elem
        return r

    def __repr__(self):
        return f"Phantom({tuple(self.shape)}, {self.dtype})"

    __torch_function__ = torch._C._disabled_torch_function_impl

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        if any(t is not Phantom and t is not torch.Tensor and not issubclass(t, torch.nn.Parameter) for t in types):
            return NotImplemented  # nested tensors: their own dispatch unwraps them first
        if func is aten._local_scalar_dense.default:
            return _read_value(args[0])
        if func is aten.logsumexp.default:
            return _logsumexp_cuda(*args, **(kwargs or {}))
        if func in _INDEXING and any(isinstance(i, torch.Tensor) and i.dtype == torch.bool and not isinstance(i, Phantom)
                                     for i in args[1]):
            args = (args[0], _bool_to_long(args[1]), *args[2:])  # a real boolean mask: its positions are known
        mine = {}

        def down(x):
            if isinstance(x, Phantom):
                mine[id(x.elem)] = x
                return x.elem
            if isinstance(x, torch.Tensor) and x.device.type == "cpu":
                return x.to("meta")
            if isinstance(x, torch.device) and x.type == "cpu":
                return torch.device("meta")
            return x

        margs, mkwargs = _map(down, args), _map(down, kwargs or {})
        key = _meta_key(func, margs, mkwargs)
        hit = _META_CACHE.get(key) if key is not None else None
        if hit is not None:
            leaves, spec = hit
            out = tree_unflatten([torch.empty_strided(x[0], x[1], dtype=x[2], device="meta") if isinstance(x, tuple) else x for x in leaves],
                                 spec)
        else:
            out = func(*margs, **mkwargs)
            if key is not None:
                leaves, spec = tree_flatten(out)
                _META_CACHE[key] = ([(t.shape, t.stride(), t.dtype) if isinstance(t, torch.Tensor) else t
                                     for t in leaves], spec)
        if func._schema.is_mutable and args and isinstance(args[0], torch.Tensor):
            return args[0]
        return _map(lambda x: mine.get(id(x)) or Phantom(x) if isinstance(x, torch.Tensor) and x.is_meta else x, out)


VALUES_READ: list[str] = []  # where code read a value of a Phantom tensor (see _read_value)


def _read_value(t: torch.Tensor):
    """``.item()`` of a Phantom: a one-element tensor gives NaN / 0 / False and the reading line is
    recorded in :data:`VALUES_READ` (verl's forward_step logs ``loss.item()``); a larger one raises."""
    if t.numel() != 1:
        raise RuntimeError("a value of a Phantom tensor was read: there is no data")
    import traceback

    frame = next((f for f in reversed(traceback.extract_stack()[:-1])
                  if "/torch/" not in f.filename and f.filename != __file__), None)
    VALUES_READ.append(f"{Path(frame.filename).name}:{frame.lineno} {frame.line}" if frame else "?")
    return float("nan") if t.is_floating_point() else (False if t.dtype == torch.bool else 0)


def _map(fn, x):
    """tree_map for the argument structures of aten ops (tuples, lists, dicts), without pytree's cost."""
    kind = type(x)
    if kind is tuple or kind is list:
        return kind([_map(fn, y) if type(y) in _NESTS else fn(y) for y in x])
    if kind is dict:
        return {k: _map(fn, v) if type(v) in _NESTS else fn(v) for k, v in x.items()}
    return fn(x)


_NESTS = (tuple, list, dict)


def _leaves(x):
    if isinstance(x, (list, tuple)):
        for y in x:
            yield from _leaves(y)
    elif isinstance(x, dict):
        for y in x.values():
            yield from _leaves(y)
    else:
        yield x


_META_CACHE: dict = {}  # (op, inputs' shapes / strides / dtypes, other arguments) -> outputs' shapes


def _sig(x):
    if isinstance(x, torch.Tensor):
        return ("T", tuple(x.shape), x.stride(), x.storage_offset(), x.dtype)
    if isinstance(x, (list, tuple)):
        return tuple(_sig(y) for y in x)
    if isinstance(x, (int, float, bool, str, type(None), torch.dtype, torch.device, torch.layout, torch.memory_format)):
        return x
    raise TypeError


def _meta_key(func, args, kwargs):
    """A cache key for ops whose outputs are new tensors (no views, no in-place, no random numbers:
    the meta kernels of torch's Python references are slow, and the per-token loop calls the same op
    on the same shapes tens of thousands of times); None for the others."""
    schema = func._schema
    if schema.is_mutable or any(r.alias_info is not None for r in schema.returns) or torch.Tag.nondeterministic_seeded in func.tags:
        return None
    try:
        return func, _sig(args), tuple(sorted((k, _sig(v)) for k, v in kwargs.items()))
    except TypeError:
        return None


_ACTIVE: list = []  # the PeakBytes tallies active now (innermost last)


def _note(t):
    if _ACTIVE:
        _ACTIVE[-1].note(t)
    return t


def _logsumexp_cuda(self, dim, keepdim=False):
    """``logsumexp`` as torch computes it on CUDA (ReduceOps.cpp ``logsumexp_out_impl``: a full-size
    ``(self - maxes).exp_()`` temporary); the meta kernel would hide that temporary from the tally, so
    its steps run here, each output noted."""
    maxes = _note(torch.amax(self, dim, True))
    maxes_squeezed = maxes if keepdim else maxes.squeeze(dim)
    maxes_squeezed.masked_fill_(_note(_note(maxes_squeezed.abs()) == float("inf")), 0)
    tmp = _note(self - maxes)
    tmp.exp_()
    result = _note(torch.sum(tmp, dim, keepdim=keepdim))
    del tmp
    result.log_().add_(maxes_squeezed)
    return result


_INDEXING = (aten.index.Tensor, aten.index_put.default, aten.index_put_.default, aten._index_put_impl_.default)


def _bool_to_long(indices):
    """Boolean index tensors as the long indices of their True positions (what indexing does with them)."""
    out = []
    for i in indices:
        if isinstance(i, torch.Tensor) and i.dtype == torch.bool and not isinstance(i, Phantom):
            out.extend(i.nonzero(as_tuple=True))
        else:
            out.append(i)
    return out


def phantom(*shape, dtype=torch.bfloat16) -> Phantom:
    return Phantom(torch.empty(*shape, dtype=dtype, device="meta"))


def as_phantom(t: torch.Tensor) -> Phantom:
    return t if isinstance(t, Phantom) else Phantom(t.detach().to("meta"))


# ------------------------------------------------------------------------------ the byte counter
class PeakBytes(suite.TensorBytes):
    """The GPU suite's byte counter, keyed by storage identity instead of data pointer (tensors
    without data all point at 0), seeing through :class:`Phantom` and nested tensors. Also counts the
    ops it sees, remembers in which phase (:attr:`phase`, set by the caller) the peak was reached and
    which ops had allocated the bytes alive at the peak (:attr:`peak_by_op`)."""

    def __init__(self):
        super().__init__()
        from torch.utils._python_dispatch import TorchDispatchMode

        tracker = self

        class Mode(TorchDispatchMode):  # the suite's mode, telling the counter which op it was
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                tracker.op = func.__name__
                out = func(*args, **(kwargs or {}))
                tracker.op = func.__name__
                tracker.note(out)
                return out

        self.mode, self.op = Mode(), ""
        self.ops, self.phase, self.peak_phase, self.largest_real = 0, "", "", 0
        self.by_op: dict[str, int] = {}
        self.peak_by_op: dict[str, int] = {}
        self._op_of: dict[int, str] = {}

    def __enter__(self):
        _ACTIVE.append(self)
        return super().__enter__()

    def __exit__(self, *exc):
        _ACTIVE.remove(self)
        return super().__exit__(*exc)

    def exclude(self, tensors) -> None:
        """Storages that exist before (the weights): views of them (``t()`` of a weight in every
        linear) are not new bytes."""
        for storage in self.storages(list(tensors)):
            self._seen[storage._cdata] = None

    def storages(self, out):
        for t in _leaves(out):
            if not isinstance(t, torch.Tensor):
                continue
            if t.is_nested:
                yield from self.storages([t._values, t._offsets, getattr(t, "_lengths", None)])
                continue
            if isinstance(t, Phantom):
                yield t.elem.untyped_storage()
                continue
            if type(t) is torch.Tensor or isinstance(t, torch.nn.Parameter):
                storage = t.untyped_storage()
                self.largest_real = max(self.largest_real, storage.nbytes())
                if storage.nbytes() > REAL_LIMIT:
                    raise RuntimeError(f"a real {tuple(t.shape)} {t.dtype} tensor of {storage.nbytes() / GIB:.1f} GiB "
                                       "was allocated: something escaped the Phantom tensors")
                yield storage

    def note(self, out) -> None:
        self.ops += 1
        for storage in self.storages(out):
            n, key = storage.nbytes(), storage._cdata
            if not n or key in self._seen:
                continue
            self.live += n
            self.by_op[self.op] = self.by_op.get(self.op, 0) + n
            self._op_of[key] = self.op
            if self.live > self.peak:
                self.peak, self.peak_phase = self.live, self.phase
                self.peak_by_op = {k: v for k, v in self.by_op.items() if v >= 2**20}
            self._seen[key] = weakref.finalize(storage, self._free, key, n)

    def _free(self, key, n) -> None:
        op = self._op_of.pop(key, None)
        if op is not None:
            self.by_op[op] -= n
        super()._free(key, n)


# ------------------------------------------------------------------------------ CUDA autocast on a CPU
# torch's CUDA autocast op lists (aten/src/ATen/autocast_mode.cpp), the ops of this path and their
# relatives; autocast_check verifies them against the CUDA kernels compiled into this torch
CUDA_FP32 = ("pow.Tensor_Scalar", "pow.Tensor_Tensor", "pow.Scalar", "rsqrt", "exp", "expm1", "log", "log1p", "log2",
             "log10", "reciprocal", "logsumexp", "layer_norm", "native_layer_norm", "group_norm", "softplus", "acos",
             "asin", "cosh", "erfinv", "sinh", "tan", "cosine_similarity", "nll_loss", "mse_loss", "l1_loss", "kl_div",
             "binary_cross_entropy_with_logits", "cdist", "dist", "renorm")
CUDA_FP32_SET_OPT_DTYPE = ("softmax.int", "log_softmax.int", "sum", "sum.dim_IntList", "prod", "prod.dim_int",
                           "cumsum", "cumprod")
CUDA_LOWER = ("linear", "matmul", "mm", "bmm", "addmm", "baddbmm", "addbmm", "mv", "addmv", "einsum", "conv1d",
              "conv2d", "prelu", "scaled_dot_product_attention")
CUDA_PROMOTE = ("cat", "stack", "index_put", "addcmul", "addcdiv", "scatter_add", "dot", "atan2", "cross")


def _eligible(x) -> bool:
    return isinstance(x, torch.Tensor) and x.is_floating_point() and x.dtype != torch.float64


@contextlib.contextmanager
def cuda_autocast_policy(dtype=torch.bfloat16):
    """While active, CPU autocast applies CUDA autocast's policy to the ops of :data:`CUDA_FP32` (cast
    floating inputs to float32), :data:`CUDA_FP32_SET_OPT_DTYPE` (float32 result unless a dtype is
    given), :data:`CUDA_LOWER` (cast to ``dtype``) and :data:`CUDA_PROMOTE` (cast to the widest)."""
    lib = torch.library.Library("aten", "IMPL")
    keys = torch._C.DispatchKeySet(torch._C.DispatchKey.AutocastCPU)

    def cast(to):
        return lambda x: x.to(to) if _eligible(x) and x.dtype != to else x

    def kernel(op, rule):
        schema = op._schema
        dtype_pos = next((i for i, a in enumerate(schema.arguments) if a.name == "dtype" and not a.kwarg_only), None)

        def run(*args, **kwargs):
            with torch._C._ExcludeDispatchKeyGuard(keys):
                if rule == "fp32":
                    args, kwargs = _map(cast(torch.float32), (args, kwargs))
                elif rule == "lower":
                    args, kwargs = _map(cast(dtype), (args, kwargs))
                elif rule == "promote":
                    floats = [x.dtype for x in _leaves((args, kwargs)) if _eligible(x)]
                    if floats:
                        widest = floats[0]
                        for d in floats[1:]:
                            widest = torch.promote_types(widest, d)
                        args, kwargs = _map(cast(widest), (args, kwargs))
                elif rule == "fp32_set_opt_dtype" and _eligible(args[0]):
                    if dtype_pos is not None and len(args) > dtype_pos:
                        if args[dtype_pos] is None:
                            args = (*args[:dtype_pos], torch.float32, *args[dtype_pos + 1:])
                    elif kwargs.get("dtype") is None:
                        kwargs = {**kwargs, "dtype": torch.float32}
                return op(*args, **kwargs)
        return run

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "overriding a previously registered kernel" (CPU autocast's own)
        for names, rule in ((CUDA_FP32, "fp32"), (CUDA_FP32_SET_OPT_DTYPE, "fp32_set_opt_dtype"),
                            (CUDA_LOWER, "lower"), (CUDA_PROMOTE, "promote")):
            for name in names:
                base, _, overload = name.partition(".")
                op = getattr(getattr(aten, base), overload or "default")
                lib.impl(name, kernel(op, rule), "AutocastCPU")
    try:
        yield
    finally:
        lib._destroy()


# ------------------------------------------------------------------------------ attention kernels
def _aligned(t: torch.Tensor, alignment: int) -> bool:
    return all(s % alignment == 0 for s in t.stride()[:-1])


def cuda_sdpa(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False):
    """``scaled_dot_product_attention`` as torch runs it on an A100/H100 for arctl's dense layout (bf16,
    head dim 128, a boolean [B, 1, L, L] tree mask, K/V already repeated by transformers because a mask
    is given): flash attention takes no mask, so the memory-efficient kernel: the boolean mask becomes
    an additive mask of the query's dtype (``convert_boolean_attn_mask``), its rows padded to a
    multiple of 16 if needed (``preprocess_mask``), expanded over heads, then
    ``_scaled_dot_product_efficient_attention`` (its autograd formula saves q, k, v, the mask, the
    output and the float32 logsumexp)."""
    if attn_mask is None or attn_mask.dtype != torch.bool or enable_gqa or dropout_p or is_causal:
        raise NotImplementedError("cuda_sdpa models the tree-mask call only (boolean mask, no GQA, no dropout)")
    mask = as_phantom(attn_mask)
    bias = torch.where(mask.logical_not(), float("-inf"), torch.scalar_tensor(0.0, dtype=query.dtype))
    if not _aligned(bias, 16):
        last = bias.shape[-1]
        bias = torch.nn.functional.pad(bias, (0, 16 - last % 16))[..., :last]
    bias = bias.expand(query.shape[0], query.shape[1], query.shape[2], key.shape[2])
    lse = torch.is_grad_enabled() and any(t.requires_grad for t in (query, key, value))
    return aten._scaled_dot_product_efficient_attention(query, key, value, bias, lse, 0.0, False, scale=scale)[0]


class FlexKernel(torch.autograd.Function):
    """The compiled FlexAttention kernel's allocations (torch/_inductor/kernel/flex/flex_attention.py):
    forward the output (query dtype) and float32 logsumexp and max-scores [B, H, L]; saved q, k, v,
    output, logsumexp; backward float32 delta [B, H, L], dQ, dK, dV."""

    @staticmethod
    def forward(ctx, q, k, v):
        b, h, n, _ = q.shape
        out = q.new_empty(b, h, n, v.shape[-1])
        lse = q.new_empty(b, h, n, dtype=torch.float32)
        q.new_empty(b, h, n, dtype=torch.float32)  # max scores: allocated by the kernel, not returned
        ctx.save_for_backward(q, k, v, out, lse)
        return out, lse

    @staticmethod
    def backward(ctx, grad_out, grad_lse):
        q, k, v, out, lse = ctx.saved_tensors
        q.new_empty(lse.shape, dtype=torch.float32)  # delta = sum(out * grad_out, -1)
        return torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)


def flex_kernel(query, key, value, training=False, **kwargs):
    """Stands in for transformers' ``compile_friendly_flex_attention`` (the mask is not looked at)."""
    out, lse = FlexKernel.apply(query, key, value)
    wants_lse = kwargs.get("return_lse") or kwargs.get("return_aux") is not None
    return (out, SimpleNamespace(lse=lse) if "return_aux" in kwargs else lse) if wants_lse else out


@contextlib.contextmanager
def gpu_kernels():
    """The attention stand-ins in place of torch's SDPA and transformers' compiled flex attention."""
    import transformers.integrations.flex_attention as fa

    saved = torch.nn.functional.scaled_dot_product_attention, fa.compile_friendly_flex_attention
    torch.nn.functional.scaled_dot_product_attention, fa.compile_friendly_flex_attention = cuda_sdpa, flex_kernel
    try:
        yield
    finally:
        torch.nn.functional.scaled_dot_product_attention, fa.compile_friendly_flex_attention = saved


# ------------------------------------------------------------------------------ the model
def qwen2_config(spec: dict, attn: str):
    from transformers import Qwen2Config

    return Qwen2Config(**spec, max_position_embeddings=32768, tie_word_embeddings=False, attn_implementation=attn,
                       use_cache=False)


def build_model(spec: dict, attn: str, fused: bool):
    """Qwen2ForCausalLM with bf16 Phantom weights (the compute dtype under FSDP mixed precision), real
    rotary buffers, verl's monkey patch as its FSDP engine applies it (transformer_impl.py
    ``_build_module``: ``apply_monkey_patch(use_remove_padding=False, use_fused_kernels=..., torch
    backend)``, on a private subclass so that the patched forward stays there), gradient
    checkpointing as verl enables it (``use_reentrant=False``)."""
    from transformers import Qwen2ForCausalLM
    from verl.models.transformers.monkey_patch import apply_monkey_patch

    cfg = qwen2_config(spec, attn)
    with torch.device("meta"):
        model = Qwen2ForCausalLM(cfg)
    model.__class__ = type("Qwen2ForCausalLMUnderTest", (Qwen2ForCausalLM,), {})
    for module in model.modules():
        for name, p in list(module._parameters.items()):
            if p is not None:
                module._parameters[name] = torch.nn.Parameter(Phantom(p.detach().to(torch.bfloat16)))
    model.model.rotary_emb = type(model.model.rotary_emb)(config=cfg)  # real buffers: positions are real
    with contextlib.redirect_stdout(open(os.devnull, "w")):
        apply_monkey_patch(model=model, use_remove_padding=False, ulysses_sp_size=1, use_fused_kernels=fused,
                           fused_kernels_backend="torch")
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    root = {"model.embed_tokens.weight", "model.norm.weight", "lm_head.weight"}
    for name, p in model.named_parameters():
        if name not in root:  # FSDP reduce-scatters a layer's gradient and frees it during backward
            p.register_post_accumulate_grad_hook(lambda param: setattr(param, "grad", None))
    return model


def parameter_counts(spec: dict) -> dict:
    h, layers, v, inter = spec["hidden_size"], spec["num_hidden_layers"], spec["vocab_size"], spec["intermediate_size"]
    kv = h // spec["num_attention_heads"] * spec["num_key_value_heads"]
    layer = (h * h + h) + 2 * (h * kv + kv) + h * h + 3 * h * inter + 2 * h
    root = 2 * v * h + h
    return {"total": layers * layer + root, "layer": layer, "root": root}


def static_state(spec: dict, world: int = WORLD) -> dict:
    """Bytes per GPU besides the tally, from parameter counts (read, not measured): FSDP1 full
    sharding over ``world`` ranks with bf16 mixed precision (verl's defaults: transformer_impl.py
    ``_build_fsdp_module``, param bf16, reduce fp32): fp32 master weights 4 B, fp32 gradients 4 B
    (allocated from the first update on, kept until the next zero_grad, so also during the next
    old-log-prob pass), AdamW's two fp32 moments 8 B, all per parameter / world; the root unit
    (embeddings, final norm, lm_head: FSDP1 keeps the root unsharded from its forward to its
    backward) and two decoder layers (the one computing, the one prefetched) unsharded in bf16; in
    the update one layer's unsharded bf16 gradient and its fp32 copy for the reduce-scatter."""
    n = parameter_counts(spec)
    shard = n["total"] / world
    common = {"fp32 weights (shard)": 4 * shard, "fp32 gradients (shard)": 4 * shard, "AdamW moments (shard)": 8 * shard,
              "root unit unsharded (bf16)": 2 * n["root"], "2 decoder layers unsharded (bf16)": 2 * 2 * n["layer"]}
    update = {**common, "1 layer's gradient unsharded (bf16 + fp32)": 6 * n["layer"]}
    return {"old-log-prob": common, "update": update}


# ------------------------------------------------------------------------------ verl's engine and micro-batches
def tree_rows(thinking: list[int]) -> list:
    return [suite.make_tree(TREE, MODEL["vocab_size"], think=t, seed=i) for i, t in enumerate(thinking)]


def micro_batch(trees, *, entropy: bool, fused: bool, temperature: float = 1.0):
    """Rows as verl's v1 trainer hands them to the actor (jagged, no padding) with arctl's tree
    encoding, plus the non-tensor keys the worker adds (``infer_batch`` / ``train_mini_batch``)."""
    from tensordict import TensorDict
    from verl.utils import tensordict_utils as tu

    cols = {"input_ids": [t.input_ids for t in trees], "position_ids": [t.position_ids for t in trees],
            "tree_cut": [t.cut for t in trees], "tree_branch_start": [t.branch_start for t in trees]}
    mb = TensorDict({k: suite.nested(v) for k, v in cols.items()}, batch_size=len(trees))
    tu.assign_non_tensor(mb, use_remove_padding=False, use_fused_kernels=fused, calculate_entropy=entropy,
                         temperature=temperature, pad_token_id=0)
    return mb


def engine_for(model, knobs: dict):
    """verl's ``FSDPEngineWithLMHead`` without ``__init__`` (no process group, no FSDP wrapping): the
    attributes its forward_step, prepare_model_inputs (arctl-patched) and prepare_model_outputs read."""
    import verl.workers.engine.fsdp.transformer_impl as ti

    from arctl.backends.verl.tree_forward import patch_fsdp_engine

    patch_fsdp_engine(ti)  # what arctl's plugin does in every worker (idempotent)
    engine = object.__new__(ti.FSDPEngineWithLMHead)
    engine.module = model
    engine.pad_to_length = False
    engine.use_ulysses_sp = False
    engine._autocast_dtype = torch.bfloat16
    engine.engine_config = SimpleNamespace(entropy_checkpointing=knobs.get("entropy_checkpointing", False),
                                           entropy_from_logits_with_chunking=knobs.get("entropy_chunking", False),
                                           entropy_from_logits_chunk_size=2048)
    engine.get_data_parallel_group = lambda: None
    return engine


def verl_partition(lengths: list[int], budget: int) -> dict:
    """verl's own ``rearrange_micro_batches`` (seqlen_balancing.py) on rows of these lengths: rows per
    micro-batch and padded tokens (rows x longest row, the padded path's [B, L] shape), or its error."""
    from tensordict import TensorDict
    from verl.utils.seqlen_balancing import rearrange_micro_batches

    data = TensorDict({"input_ids": suite.nested([torch.zeros(n, dtype=torch.long) for n in lengths])},
                      batch_size=len(lengths))
    try:
        batches, _ = rearrange_micro_batches(data, max_token_len=budget)
    except (AssertionError, ValueError) as err:
        return {"error": f"{type(err).__name__}: {err}"}
    shapes = []
    for mb in batches:
        rows = mb["input_ids"].offsets().diff().tolist()
        shapes.append({"rows": len(rows), "longest": max(rows), "tokens": sum(rows), "padded": len(rows) * max(rows),
                       "lengths": rows})
    worst = max(shapes, key=lambda s: (s["padded"], s["tokens"]))
    return {"micro_batches": len(shapes), "max_rows": max(s["rows"] for s in shapes),
            "max_padded_tokens": worst["padded"], "worst": worst}


# ------------------------------------------------------------------------------ one measurement
_MODELS: dict = {}


def model_for(layout: str, fused: bool):
    key = (layout, fused)
    if key not in _MODELS:  # no data in them: keeping all four costs nothing
        _MODELS[key] = build_model(MODEL, suite_attn(layout), fused)
    return _MODELS[key]


def suite_attn(layout: str) -> str:
    from arctl.backends.verl.overrides import ATTN_IMPLEMENTATION

    return ATTN_IMPLEMENTATION[layout]  # flex -> flex_attention, dense -> sdpa (what arctl's overrides set)


@contextlib.contextmanager
def phases(tally: PeakBytes, model):
    """Name the phase the peak falls in: model forward, entropy_from_logits, logprobs_from_logits."""
    import verl.utils.torch_functional as vf
    import verl.workers.engine.fsdp.transformer_impl as ti

    def named(name, fn):
        def run(*args, **kwargs):
            before, tally.phase = tally.phase, name
            try:
                return fn(*args, **kwargs)
            finally:
                tally.phase = before
        return run

    saved = vf.entropy_from_logits, ti.logprobs_from_logits
    vf.entropy_from_logits = named("entropy_from_logits", vf.entropy_from_logits)
    ti.logprobs_from_logits = named("logprobs_from_logits", ti.logprobs_from_logits)
    hooks = [model.register_forward_pre_hook(lambda *a: setattr(tally, "phase", "model forward")),
             model.register_forward_hook(lambda *a: setattr(tally, "phase", "after the model"))]
    try:
        yield
    finally:
        vf.entropy_from_logits, ti.logprobs_from_logits = saved
        for h in hooks:
            h.remove()


def measure(pass_: str, layout: str, thinking: list[int], knobs: dict) -> dict:
    """Peak bytes of verl's ``forward_step`` on one micro-batch: ``old-log-prob`` (eval mode, no grad,
    entropy computed: trainer_base.py ``_compute_old_log_prob`` sets calculate_entropy) or ``update``
    (train mode, forward_step + loss.backward() as forward_backward_batch runs them; entropy off:
    arctl sets entropy_coeff 0 and calculate_entropy is false)."""
    # verl picks its platform at first use: arctl's cpu platform here (the CUDA one asks for a device)
    os.environ.setdefault("VERL_PLATFORM", "cpu")
    fused = bool(knobs.get("fused_kernels"))
    model = model_for(layout, fused)
    trees = tree_rows(thinking)
    entropy = pass_ == "old-log-prob"
    mb = micro_batch(trees, entropy=entropy, fused=fused, temperature=knobs.get("temperature", 1.0))
    engine = engine_for(model, knobs)
    n_valid = sum(t.length for t in trees)
    adv = torch.randn(n_valid)

    def loss_fn(model_output, data, dp_group=None):
        return (model_output["log_probs"].values() * adv).sum() / n_valid, {}

    t0 = time.perf_counter()
    with warnings.catch_warnings(), gpu_kernels(), cuda_autocast_policy():
        warnings.simplefilter("ignore")
        with PeakBytes() as tally, phases(tally, model):
            tally.exclude(model.parameters())  # FSDP's weights are in static_state
            if pass_ == "old-log-prob":
                model.eval()
                with torch.no_grad():
                    engine.forward_step(mb, loss_function=None, forward_only=True)
            else:
                model.train()
                loss, _ = engine.forward_step(mb, loss_function=loss_fn, forward_only=False)
                tally.phase = "backward"
                loss.backward()
                del loss
            tally.phase = "end"
        model.zero_grad(set_to_none=True)
    longest = max(t.length for t in trees)
    return {"pass": pass_, "layout": layout, "knobs": knobs, "rows": len(trees), "row_lengths": [t.length for t in trees],
            "tokens": n_valid, "padded_tokens": len(trees) * longest, "peak_gib": tally.peak / GIB,
            "peak_phase": tally.peak_phase, "ops": tally.ops,
            "at_peak_gib": {k: round(v / GIB, 3) for k, v in sorted(tally.peak_by_op.items(), key=lambda kv: -kv[1])}, "largest_real_gib": tally.largest_real / GIB,
            "logits_gib": len(trees) * longest * MODEL["vocab_size"] * 2 / GIB, "seconds": time.perf_counter() - t0}


# ------------------------------------------------------------------------------ the autocast check
@dataclasses.dataclass(frozen=True)
class _TensorSig:
    shape: tuple
    dtype: torch.dtype


def _record_calls(run) -> dict:
    """The distinct torch-level calls ``run`` makes (a TorchFunctionMode sees the outermost ones:
    ``F.linear``, ``F.softmax``, ``Tensor.to``, ...): signature -> (function, arguments with tensors
    as (shape, dtype), dtypes of the tensors it returned)."""
    from torch.overrides import TorchFunctionMode

    calls: dict = {}

    def sig(x):
        return _TensorSig(tuple(x.shape), x.dtype) if isinstance(x, torch.Tensor) else x

    class Record(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            autocast = torch.is_autocast_enabled("cpu")  # off inside transformers' rotary embedding
            try:
                key = (func, autocast, _map(sig, args),
                       tuple(sorted((k, _map(sig, v)) for k, v in (kwargs or {}).items())))
                hash(key)
            except TypeError:
                return out
            if key not in calls:
                calls[key] = (func, autocast, _map(sig, args), _map(sig, kwargs or {}),
                              [str(t.dtype) for t in _leaves(out) if isinstance(t, torch.Tensor)])
            return out

    with Record():
        run()
    return calls


def autocast_check(spec: dict | None = None, length: int = 64, emulate: bool = True) -> dict:
    """Is :func:`cuda_autocast_policy` CUDA's autocast? A Qwen2 with untied embeddings and the paper's
    vocabulary and width (2 layers), its forward without grad, verl's ``entropy_from_logits`` and
    ``logprobs_from_logits`` on its logits and ``FusedLinearForPPO`` on its hidden states, run on
    Phantom tensors under CPU autocast with the emulated policy; every distinct torch call of that run
    (function and argument shapes / dtypes) is replayed on FakeTensors of a fake CUDA device under
    torch's own CUDA autocast kernels (compiled into every torch build), and the dtypes of the
    results compared (each under the autocast state it was called in: transformers turns autocast off
    for the rotary embedding). Calls that cannot run on a fake CUDA device are counted, not
    compared. ``emulate=False`` runs plain CPU autocast instead: it must differ (the check can fail)."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from verl.utils.experimental.torch_functional import FusedLinearForPPO
    from verl.utils.torch_functional import entropy_from_logits, logprobs_from_logits

    spec = spec or dict(MODEL, num_hidden_layers=2)
    b = 2
    ids = torch.randint(3, spec["vocab_size"], (b, length))
    mask = torch.ones(b, 1, length, length, dtype=torch.bool).tril()
    model = build_model(spec, "sdpa", fused=False)

    def run():
        with torch.no_grad(), torch.autocast(device_type="cpu", dtype=torch.bfloat16):
            out = model(input_ids=ids, attention_mask=mask, output_hidden_states=True)
            logits, hidden = out.logits, out.hidden_states[-1]
            entropy_from_logits(logits)
            logprobs_from_logits(logits.flatten(0, 1), ids.flatten())
            FusedLinearForPPO(chunk_size=32).forward(hidden, model.lm_head.weight, ids)

    with warnings.catch_warnings(), gpu_kernels(), cuda_autocast_policy() if emulate else contextlib.nullcontext():
        warnings.simplefilter("ignore")
        calls = _record_calls(run)
    fake = FakeTensorMode(allow_non_fake_inputs=True)
    saved = torch.get_autocast_dtype("cuda")
    compared, skipped, differ, fp32 = 0, 0, [], 0
    torch.set_autocast_dtype("cuda", torch.bfloat16)  # torch.autocast("cuda") refuses without a device; the switches do not
    try:
        with fake, warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for func, autocast, args, kwargs, ours in calls.values():
                def build(x):
                    return torch.empty(x.shape, dtype=x.dtype, device="cuda") if isinstance(x, _TensorSig) else x
                try:
                    torch.set_autocast_enabled("cuda", autocast)
                    out = func(*_map(build, args), **_map(build, kwargs))
                except Exception as err:
                    if os.environ.get("MM_DEBUG"):
                        print("SKIP", getattr(func, "__qualname__", func), repr(err)[:150])
                    skipped += 1
                    continue
                theirs = [str(t.dtype) for t in _leaves(out) if isinstance(t, torch.Tensor)]
                compared += 1
                fp32 += "torch.float32" in theirs
                if theirs != ours:
                    differ.append({"call": getattr(func, "__qualname__", str(func)), "cuda": theirs, "emulated": ours})
    finally:
        torch.set_autocast_enabled("cuda", False)
        torch.set_autocast_dtype("cuda", saved)
    return {"equal": not differ and compared > 0, "calls": len(calls), "compared": compared,
            "not_replayable": skipped, "compared_with_float32_results": fp32, "differences": differ[:10]}


# ------------------------------------------------------------------------------ the plan and the report
KNOBS = {  # verl's knobs for the actor's log-probs (names as in verl's config; ``fused_kernels`` = model.use_fused_kernels)
    "default": {},
    "entropy_checkpointing": {"entropy_checkpointing": True},
    "entropy_from_logits_with_chunking": {"entropy_chunking": True},
    "use_fused_kernels": {"fused_kernels": True},
    "rollout temperature 0.6": {"temperature": 0.6},  # not a memory knob: what a temperature other than 1 costs
}
OVERRIDE = {
    "default": [],
    "entropy_checkpointing": ["actor_rollout_ref.actor.entropy_checkpointing=true"],
    "entropy_from_logits_with_chunking": ["actor_rollout_ref.actor.entropy_from_logits_with_chunking=true"],
    "use_fused_kernels": ["actor_rollout_ref.model.use_fused_kernels=true",
                          "actor_rollout_ref.model.fused_kernel_options.impl_backend=torch"],
    "rollout temperature 0.6": ["actor_rollout_ref.rollout.temperature=0.6"],
}


MIN_ROW = TREE["prompt"] + 1 + 16 * TREE["summary"]  # a tree whose thinking ended after one token: 2,177


def mixed_lengths(n: int = 64, seed: int = 0) -> list[int]:
    """Tree lengths of a plausible batch: thinking uniform in 1,000-8,000 tokens (as part c of the
    suite), 4 cuts x 4 summaries x 128 tokens, prompt 128: rows of 3,176 to 10,176 tokens."""
    g = torch.Generator().manual_seed(seed)
    return [TREE["prompt"] + int(t) + 16 * TREE["summary"] for t in torch.randint(1000, 8001, (n,), generator=g)]


def thinking_of(lengths: list[int]) -> list[int]:
    return [n - TREE["prompt"] - 16 * TREE["summary"] for n in lengths]


def plan(budgets, layouts, partitions: dict, quick: bool) -> list[tuple]:
    """(pass, layout, knob, thinking per row, budget, what) of every measurement:

    * ``full rows``: rows of 10,176 (the paper's longest tree), floor(T / 10,176) per budget T, both
      passes, verl's default (budgets up to :data:`DEFAULT_PATH_MAX`) and ``use_fused_kernels``; in the
      first layout every budget, in the others the default at 32,768 and the fused kernels at every
      budget (the layouts differ in attention only);
    * the two entropy knobs and a rollout temperature of 0.6, old-log-prob pass (the update computes
      no entropy), at 32,768 (the entropy knobs) and the smallest budget (the temperature);
    * ``mixed worst``: the micro-batch with the most padded tokens that verl's own partitioning
      makes of a mixed batch (:func:`mixed_lengths`), first layout, both passes and knobs;
    * ``bound``: one 10,176 row plus rows of 2,177 (thinking of one token) filling the budget, the
      most padded tokens a budget allows; ``use_fused_kernels`` only (verl's default path is over
      the cards already at its mixed-worst micro-batch).
    """
    out = []
    full_budgets = [b for b in budgets if b >= ROW]
    default_budgets = [b for b in full_budgets if b <= DEFAULT_PATH_MAX]

    def knobs_at(budget, first):
        if budget not in default_budgets or (not first and budget != default_budgets[-1]):
            return ("use_fused_kernels",)
        return ("default", "use_fused_kernels")

    for i, layout in enumerate(layouts):
        for budget in full_budgets:
            for knob in knobs_at(budget, i == 0):
                for pass_ in ("old-log-prob", "update"):
                    out.append((pass_, layout, knob, [TREE["think"]] * (budget // ROW), budget, "full rows"))
    if quick:
        return out
    top = default_budgets[-1]
    for knob, budget in (("entropy_checkpointing", top), ("entropy_from_logits_with_chunking", top),
                         ("rollout temperature 0.6", default_budgets[0])):
        out.append(("old-log-prob", layouts[0], knob, [TREE["think"]] * (budget // ROW), budget, "full rows"))
    for budget in full_budgets:
        worst = partitions[str(budget)]["mixed"].get("worst")
        if worst and worst["padded"] > (budget // ROW) * ROW:
            for knob in knobs_at(budget, True):
                for pass_ in ("old-log-prob", "update"):
                    out.append((pass_, layouts[0], knob, thinking_of(worst["lengths"]), budget, "mixed worst"))
        bound = [ROW] + [MIN_ROW] * ((budget - ROW) // MIN_ROW)
        if len(bound) > 1:
            for pass_ in ("old-log-prob", "update"):
                out.append((pass_, layouts[0], "use_fused_kernels", thinking_of(bound), budget, "bound"))
    return out


def fits(total_gib: float) -> dict:
    return {card: total_gib <= limit for card, limit in FITS_GIB.items()}


def recommend(rows: list[dict], layout: str) -> dict:
    """Per card | pass | knob (``default``, ``use_fused_kernels``), in ``layout``: the largest budget
    whose ``full rows`` and ``mixed worst`` micro-batches fit, every smaller measured budget fitting
    too (0: none). ``bound`` rows are not required (they are the worst case, reported beside)."""
    ok: dict = {}
    for r in rows:
        if r.get("error") or r["what"] == "bound" or r["layout"] != layout or r["knob"] not in ("default",
                                                                                                "use_fused_kernels"):
            continue
        for card, fit in r["fits"].items():
            by_budget = ok.setdefault((card, r["pass"], r["knob"]), {})
            by_budget[r["budget"]] = by_budget.get(r["budget"], True) and fit
    best = {}
    for key, by_budget in ok.items():
        good, largest = True, 0
        for budget in sorted(by_budget):
            good = good and by_budget[budget]
            largest = budget if good else largest
        best[" | ".join(key)] = largest
    return best


def layout_differences(rows: list[dict], layouts: list[str]) -> list[dict]:
    """Tally peak of each later layout minus the first's on the same measurement."""
    first = {(r["pass"], r["knob"], r["budget"], r["what"]): r["peak_gib"] for r in rows
             if not r.get("error") and r["layout"] == layouts[0]}
    return [{"layout": r["layout"], "pass": r["pass"], "knob": r["knob"], "budget": r["budget"],
             "minus_" + layouts[0] + "_gib": r["peak_gib"] - first[(r["pass"], r["knob"], r["budget"], r["what"])]}
            for r in rows if not r.get("error") and r["layout"] != layouts[0]
            and (r["pass"], r["knob"], r["budget"], r["what"]) in first]


def table(rows: list[dict]) -> str:
    head = ("| pass | layout | knob | budget | micro-batch | rows x L (padded tokens) | peak GiB (tally) | "
            "+ static GiB | total GiB | 80 GB | 40 GB | peak in | ops |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in rows:
        if r.get("error"):
            lines.append(f"| {r['pass']} | {r['layout']} | {r['knob']} | {r['budget']:,} | {r['what']} | error: "
                         f"{r['error'][:80]} | | | | | | | |")
            continue
        shape = f"{r['rows']} x {max(r['row_lengths']):,} ({r['padded_tokens']:,})"
        yes = lambda ok: "fits" if ok else "**no**"  # noqa: E731
        lines.append(f"| {r['pass']} | {r['layout']} | {r['knob']} | {r['budget']:,} | {r['what']} | {shape} | "
                     f"{r['peak_gib']:.1f} | {r['static_gib']:.1f} | {r['total_gib']:.1f} | {yes(r['fits']['80 GB'])} | "
                     f"{yes(r['fits']['40 GB'])} | {r['peak_phase']} | {r['ops']:,} |")
    return "\n".join(lines)


def layout_list(text: str) -> list[str]:
    """``--layouts``: comma-separated names of :data:`LAYOUTS` (a typo used to print an error on every row
    and exit 0)."""
    layouts = [x for x in text.split(",") if x]
    wrong = [x for x in layouts if x not in LAYOUTS]
    if wrong or not layouts:
        raise argparse.ArgumentTypeError(f"{text!r}: give comma-separated layouts of {', '.join(LAYOUTS)}")
    return layouts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", type=Path, help="write the results here (also after every measurement)")
    parser.add_argument("--budgets", type=int_list, default=",".join(map(str, BUDGETS)),
                        help="tokens per micro-batch, comma-separated")
    parser.add_argument("--layouts", type=layout_list, default=",".join(LAYOUTS),
                        help=f"arctl tree layouts (verl.tree_attention: {', '.join(LAYOUTS)}), first: all rows")
    parser.add_argument("--quick", action="store_true", help="32,768 only, full rows, no autocast check: a smoke run")
    args = parser.parse_args(argv)
    budgets = sorted(args.budgets)
    if args.quick and not any(b <= DEFAULT_PATH_MAX for b in budgets):
        parser.error(f"--quick measures the largest budget up to {DEFAULT_PATH_MAX:,}: --budgets has none")
    torch.set_num_threads(1)
    os.environ.setdefault("VERL_PLATFORM", "cpu")
    if args.quick:
        budgets = [max(b for b in budgets if b <= DEFAULT_PATH_MAX)]
    layouts = args.layouts
    t_start = time.perf_counter()
    import transformers
    import verl

    static = static_state(MODEL)
    result: dict = {"estimate": "made on a CPU by running verl's code on tensors without data; not a GPU observation",
                    "model": {**MODEL, "tie_word_embeddings": False, "parameters": parameter_counts(MODEL)["total"]},
                    "row": ROW, "world": WORLD, "fits_gib": FITS_GIB,
                    "versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                                 "verl": verl.__version__},
                    "static_state_gib": {p: {k: v / GIB for k, v in d.items()} for p, d in static.items()}}
    static_total = {p: sum(d.values()) for p, d in static.items()}

    # what a token budget puts in one micro-batch: verl's own partitioning (seqlen_balancing.py)
    result["partition"] = {str(b): {"full_rows": verl_partition([ROW] * 64, b), "mixed": verl_partition(mixed_lengths(), b)}
                           for b in budgets}
    for b in budgets:
        p = result["partition"][str(b)]
        print(f"budget {b:>6,}: rows of 10,176 -> " + (p["full_rows"].get("error", "")[:100] or
              f"{p['full_rows']['max_rows']} per micro-batch") + "; mixed 3,176-10,176 -> " +
              (p["mixed"].get("error", "")[:60] or f"up to {p['mixed']['max_rows']} rows, "
               f"{p['mixed']['max_padded_tokens']:,} padded tokens"), flush=True)

    if not args.quick:
        check = autocast_check()
        result["autocast_check"] = check
        print(f"CUDA autocast emulation vs torch's CUDA autocast kernels: {check['compared']} distinct calls compared "
              f"({check['compared_with_float32_results']} with float32 results, {check['not_replayable']} not replayable "
              f"on a fake CUDA device), equal: {check['equal']}", flush=True)

    rows = []
    for pass_, layout, knob, thinking, budget, what in plan(budgets, layouts, result["partition"], args.quick):
        try:
            r = measure(pass_, layout, thinking, KNOBS[knob])
        except Exception as err:  # a failure of verl's code path is a result too
            r = {"pass": pass_, "layout": layout, "error": f"{type(err).__name__}: {err}"}
        r.update(knob=knob, budget=budget, what=what, overrides=OVERRIDE[knob])
        if not r.get("error"):
            r["static_gib"] = static_total[pass_] / GIB
            r["total_gib"] = r["peak_gib"] + r["static_gib"]
            r["fits"] = fits(r["total_gib"])
            print(f"{pass_:>12} {layout:>5} {knob:<33} {budget:>6,} {what:<11} {r['rows']:>2} x {max(r['row_lengths']):>6,}"
                  f" peak {r['peak_gib']:6.2f} + {r['static_gib']:.2f} = {r['total_gib']:6.2f} GiB "
                  f"(in {r['peak_phase']}; {r['ops']:,} ops, {r['seconds']:.0f} s)", flush=True)
        else:
            print(f"{pass_:>12} {layout:>5} {knob:<33} {budget:>6,} {what}: {r['error'][:200]}", flush=True)
        rows.append(r)
        if args.json:
            args.json.write_text(json.dumps({**result, "rows": rows}, indent=1, default=str))
    result["rows"] = rows
    result["largest_budget_that_fits"] = recommend(rows, layouts[0])
    result["layout_differences"] = layout_differences(rows, layouts)
    result["values_read"] = sorted(set(VALUES_READ))
    result["seconds"] = time.perf_counter() - t_start
    print()
    print(table(rows))
    print()
    print(f"Largest budget whose full-row and mixed-worst micro-batches fit ({layouts[0]}; 0: none), card | pass | knob:")
    for key, budget in result["largest_budget_that_fits"].items():
        print(f"  {key}: {budget:,}")
    for d in result["layout_differences"]:
        print(f"  {d['layout']} - {layouts[0]}: {d['pass']}, {d['knob']}, {d['budget']:,}: "
              f"{d['minus_' + layouts[0] + '_gib']:+.2f} GiB")
    print(f"\nstatic state per GPU (FSDP1 over {WORLD}, from parameter counts): "
          + ", ".join(f"{p} {v / GIB:.2f} GiB" for p, v in static_total.items()))
    print(f"values read from tensors without data: {result['values_read'] or 'none'}")
    print(f"{result['seconds']:.0f} s. Every number is an estimate made on a CPU, none a GPU observation.")
    if args.json:
        args.json.write_text(json.dumps(result, indent=1, default=str))
    failed = [r for r in rows if r.get("error")]
    if failed:  # a row that could not be measured is no estimate: the call must not read as a success
        print(f"{len(failed)} of {len(rows)} measurements failed (their errors are above)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
