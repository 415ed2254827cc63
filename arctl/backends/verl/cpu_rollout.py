"""A token-in/token-out rollout server on a CPU, behind verl's own replica and adapter interfaces.

verl 0.9.1's trainer reaches generation only through a *rollout replica* (``vllm``, ``sglang``,
``trtllm``: GPU servers); its ``hf``/``naive`` rollouts are legacy synchronous classes the v1
trainer cannot call. ``rollout.name=arctl_cpu`` (``verl.device=cpu``) plugs in three pieces, so
that the agent loop, the router, the weight sync and the trainer are verl's own:

- :class:`CPURolloutServer` (a Ray actor, one per replica): a Hugging Face causal LM on the CPU with
  an async ``generate(prompt_ids, sampling_params, request_id) -> TokenOutput`` (temperature, top-p,
  top-k, ``max_tokens`` clamped like verl's vLLM server, ``stop_token_ids`` kept in the output like
  vLLM, EOS unless ``ignore_eos``, log-probs of the sampled tokens) and a *prefix cache*: the KV of
  recent requests (prompt and generated tokens) is kept and a request that shares a prefix with one
  reuses it (``extra_fields["num_cached_tokens"]``, as vLLM reports it), so a tree's summary requests
  do not recompute the thinking. Requests run one at a time (a lock), the event loop stays free.
- :class:`CPUReplica` (``RolloutReplica``): launches the server actor named
  ``arctl_cpu_server_{replica}_0`` beside the replica's workers; sleep/wake/abort/resume reach it.
- :class:`ServerAdapter` (``BaseRollout``, in each actor worker): ``update_weights`` sends the
  trainer's full state dict to its replica's server (rank 0 of the replica), which loads it and
  drops its prefix cache: verl's "naive" (colocated, synchronous) weight sync.

Registered by arctl's plugin under the rollout name :data:`ROLLOUT` (verl's replica registry, and
its private ``_ROLLOUT_REGISTRY`` for the adapter: the second of the two patches, docs/verl-backend.md).
"""

from __future__ import annotations

import asyncio
import copy
import logging
import os
import threading
from collections import OrderedDict
from typing import Any

from arctl.backends.verl.settings import CPU_ROLLOUT

logger = logging.getLogger(__name__)

ROLLOUT = CPU_ROLLOUT  # the name the verl settings accept (verl.rollout_name)
SERVER_NAME = "arctl_cpu_server_{replica}_0"
PREFIX_CACHE_ENTRIES = 64


def server_name(replica_rank: int) -> str:
    return SERVER_NAME.format(replica=replica_rank)


# ----------------------------------------------------------------------------------- sampling
def sample_next(logits, temperature: float, top_p: float, top_k: int, generator):
    """The next token id from the last position's ``logits`` [V] (greedy at temperature 0), and
    its log-probability under the model's (unprocessed) distribution, as vLLM reports it."""
    import torch

    raw = torch.log_softmax(logits.float(), dim=-1)
    if temperature is None or temperature <= 0:
        token = int(torch.argmax(logits))
        return token, float(raw[token])
    scores = logits.float() / float(temperature)
    if top_k is not None and 0 < int(top_k) < scores.numel():
        kth = torch.topk(scores, int(top_k)).values[-1]
        scores = scores.masked_fill(scores < kth, float("-inf"))
    if top_p is not None and 0 < float(top_p) < 1:
        sorted_scores, order = torch.sort(scores, descending=True)
        probs = torch.softmax(sorted_scores, dim=-1)
        drop = probs.cumsum(-1) - probs > float(top_p)  # keep the smallest set whose mass reaches top_p
        sorted_scores = sorted_scores.masked_fill(drop, float("-inf"))
        scores = torch.full_like(scores, float("-inf")).scatter(0, order, sorted_scores)
    probs = torch.softmax(scores, dim=-1)
    token = int(torch.multinomial(probs, 1, generator=generator))
    return token, float(raw[token])


class PrefixCache:
    """The KV caches of recent prompts (LRU); :meth:`longest` finds the cached prompt sharing the
    longest prefix with a new one."""

    def __init__(self, entries: int = PREFIX_CACHE_ENTRIES):
        self.entries = entries
        self._items: OrderedDict[tuple[int, ...], Any] = OrderedDict()
        # its own lock: verl's sleep/clear calls come from the event loop while a request decodes in a thread
        # (from a review: a clear during longest()'s walk raised "OrderedDict mutated during iteration")
        self._lock = threading.Lock()

    def clear(self) -> None:
        with self._lock:
            self._items.clear()

    def put(self, tokens: list[int], cache) -> None:
        key, kept = tuple(tokens), copy.deepcopy(cache)
        with self._lock:
            self._items[key] = kept
            self._items.move_to_end(key)
            while len(self._items) > self.entries:
                self._items.popitem(last=False)

    def longest(self, tokens: list[int]) -> tuple[int, Any]:
        """(shared length, a copy of that entry's cache cropped to it), or (0, None). At most
        ``len(tokens) - 1`` tokens are reused: the last prompt token is run again for its logits."""
        best, best_key = 0, None
        with self._lock:
            for key in self._items:
                n = 0
                limit = min(len(key), len(tokens) - 1)
                while n < limit and key[n] == tokens[n]:
                    n += 1
                if n > best:
                    best, best_key = n, key
            if best_key is None:
                return 0, None
            self._items.move_to_end(best_key)
            cache = copy.deepcopy(self._items[best_key])
        cache.crop(best)
        return best, cache


# ----------------------------------------------------------------------------------- the server
class CPURolloutServer:
    """The CPU generation server of one replica (a Ray actor; see the module docstring)."""

    def __init__(self, config, model_config, replica_rank: int = 0):
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.config = config
        self.replica_rank = int(replica_rank)
        path = getattr(model_config, "local_path", None) or model_config.path
        torch.set_num_threads(max(1, int(os.environ.get("ARCTL_CPU_ROLLOUT_THREADS", "1"))))
        self.model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32, attn_implementation="sdpa").eval()
        tokenizer = AutoTokenizer.from_pretrained(path)
        by_tensor: dict[int, set[str]] = {}  # the names of each parameter (tied weights: several)
        for name, param in self.model.named_parameters(remove_duplicate=False):
            by_tensor.setdefault(id(param), set()).add(name)
        self._tied = {name: names - {name} for names in by_tensor.values() for name in names}
        from arctl.algo.verify import stop_eos_ids

        generation = self.model.generation_config
        self.eos_ids = set(stop_eos_ids(generation.eos_token_id if generation is not None else None,
                                        tokenizer.eos_token_id))  # as vLLM: both
        self.max_model_len = int(getattr(config, "max_model_len", None) or (config.prompt_length + config.response_length))
        self.global_steps = None
        self.prefix_cache = PrefixCache()
        self._lock = threading.Lock()
        self._seed = int(getattr(config, "seed", 0) or 0)
        self._aborting = False

    def ready(self) -> bool:
        return True

    # --- generation
    def _generate(self, prompt_ids: list[int], params: dict[str, Any], request_id: str):
        import torch
        from transformers import DynamicCache
        from verl.workers.rollout.replica import TokenOutput

        max_possible = self.max_model_len - len(prompt_ids)
        if max_possible < 1:
            raise ValueError(f"prompt length {len(prompt_ids)} leaves no room within max_model_len {self.max_model_len}")
        max_tokens = params.get("max_tokens", params.get("max_new_tokens"))
        if max_tokens is None:
            max_tokens = min(self.config.response_length,
                             self.config.prompt_length + self.config.response_length - len(prompt_ids))
        max_tokens = max(1, min(int(max_tokens), max_possible))
        stops = {int(t) for t in params.get("stop_token_ids") or []}
        if not params.get("ignore_eos", False):
            stops |= self.eos_ids
        seed = params.get("seed")
        if seed is None:  # a stream of its own per request, reproducible from the request id
            from arctl.backends.verl.agent_loop import request_seed

            seed = request_seed(self._seed, request_id)
        generator = torch.Generator().manual_seed(int(seed))
        temperature = float(params.get("temperature", 1.0))
        top_p = float(params.get("top_p", 1.0))
        top_k = int(params.get("top_k", -1))

        with self._lock, torch.no_grad():
            cached, cache = self.prefix_cache.longest(prompt_ids)
            cache = cache if cache is not None else DynamicCache()
            out = self.model(input_ids=torch.tensor([prompt_ids[cached:]]), past_key_values=cache, use_cache=True)
            tokens, logps, fed = [], [], 0  # fed: generated tokens the cache holds
            logits = out.logits[0, -1]
            cache = out.past_key_values
            stop_reason = "completed"  # decided here: a request that ended as an abort came was not aborted
            for _ in range(max_tokens):
                if self._aborting:
                    stop_reason = "aborted"
                    break
                token, logp = sample_next(logits, temperature, top_p, top_k, generator)
                tokens.append(token)
                logps.append(logp)
                if token in stops:
                    break
                out = self.model(input_ids=torch.tensor([[token]]), past_key_values=cache, use_cache=True)
                logits, cache = out.logits[0, -1], out.past_key_values
                fed += 1
            # the prompt's and the generated tokens' KV in one entry (a prompt-only one beside it would be a second
            # copy of the same prefix): the thinking's for the tree's summary requests (from a review: only prompts
            # were kept)
            self.prefix_cache.put(prompt_ids + tokens[:fed], cache)
        return TokenOutput(token_ids=tokens, log_probs=logps if params.get("logprobs") else None, stop_reason=stop_reason,
                           extra_fields={"global_steps": self.global_steps, "num_cached_tokens": cached})

    async def generate(self, prompt_ids, sampling_params: dict[str, Any], request_id: str, image_data=None,
                       video_data=None, audio_data=None, mm_processor_kwargs=None, priority: int = 0, **kwargs):
        if image_data or video_data or audio_data:
            raise ValueError("the CPU rollout server generates text only")
        prompt = [int(t) for t in prompt_ids]
        return await asyncio.to_thread(self._generate, prompt, dict(sampling_params), str(request_id))

    # --- weights
    def update_weights(self, state: dict, global_steps: int | None = None) -> int:
        """Load the trainer's weights (full tensors, Hugging Face names); returns how many."""
        with self._lock:
            names = set(self.model.state_dict())
            loaded, unexpected = set(state) & names, sorted(set(state) - names)
            if not loaded:
                raise ValueError(f"no weight matched the rollout model (unexpected: {unexpected[:5]})")
            # checked before anything is loaded: a tied weight arrives under one of its names; any other weight
            # left out would leave the rollout sampling with its old values while the trainer moved on (from a
            # review: load_state_dict(strict=False) took any subset)
            untouched = sorted(n for n in names - loaded if not loaded & self._tied.get(n, set()))
            if untouched or unexpected:
                raise ValueError(f"the trainer's weights do not match the rollout model: not sent {untouched[:5]}, "
                                 f"not the model's {unexpected[:5]}")
            self.model.load_state_dict(state, strict=False)  # strict=True would ask for a tied weight's second name
            self.prefix_cache.clear()  # the cached KV belongs to the old weights
            if global_steps is not None:
                self.global_steps = int(global_steps)
        return len(loaded)

    async def set_global_steps(self, global_steps: int):
        self.global_steps = int(global_steps)

    # --- lifecycle verl calls on every server (nothing to free on a CPU: the model stays loaded)
    async def wake_up(self, tags: list[str] | None = None):
        self._aborting = False

    async def sleep(self):
        self.prefix_cache.clear()

    async def clear_kv_cache(self):
        self.prefix_cache.clear()

    async def release_kv_cache(self):
        self.prefix_cache.clear()

    async def resume_kv_cache(self):
        pass

    async def abort_all_requests(self, reset_prefix_cache: bool = True, reject_request: bool = False) -> dict[str, Any]:
        self._aborting = True
        with self._lock:  # the request in progress has stopped
            pass
        if reset_prefix_cache:
            self.prefix_cache.clear()
        return {"aborted": 0}

    async def abort_request(self, request_id: str, reset_prefix_cache: bool = True) -> dict[str, Any]:
        return {"aborted": 0}

    async def resume_generation(self):
        self._aborting = False

    async def wait_for_requests_to_drain(self):
        with self._lock:
            pass

    async def start_profile(self, **kwargs):
        pass

    async def stop_profile(self):
        pass


# ----------------------------------------------------------------------------------- verl classes
def _replica_class():
    import ray
    from verl.workers.rollout.replica import RolloutReplica

    class CPUReplica(RolloutReplica):
        """One CPU rollout server per replica (see the module docstring)."""

        def rollout_worker_use_gpu(self) -> bool:
            return False

        async def launch_servers(self):
            node_id = None
            if self.workers:
                node_id = await self.workers[0].__ray_call__.remote(lambda w: ray.get_runtime_context().get_node_id())
            options: dict[str, Any] = {"name": server_name(self.replica_rank), "max_concurrency": self.max_concurrency,
                                       "num_cpus": 0}
            if node_id is not None:
                options["scheduling_strategy"] = ray.util.scheduling_strategies.NodeAffinitySchedulingStrategy(
                    node_id=node_id, soft=False)
            server = ray.remote(CPURolloutServer).options(**options).remote(
                config=self.config, model_config=self.model_config, replica_rank=self.replica_rank)
            await server.ready.remote()
            self.servers = [server]
            self._server_handle = server
            self._server_address = f"arctl-cpu-replica-{self.replica_rank}"

    return CPUReplica


def load_replica_class():
    """verl's ``RolloutReplicaRegistry`` loader."""
    return _replica_class()


def _adapter_class():
    import ray
    from verl.workers.rollout.base import BaseRollout

    class ServerAdapter(BaseRollout):
        """In an actor worker: sends the trainer's weights to its replica's CPU server."""

        def __init__(self, config, model_config, device_mesh, replica_rank: int = -1):
            super().__init__(config, model_config, device_mesh)
            rank = int(os.environ.get("RANK", 0))
            world = (self.config.tensor_model_parallel_size * self.config.data_parallel_size
                     * self.config.pipeline_model_parallel_size)
            self.replica_rank = rank // world if replica_rank == -1 else replica_rank
            self.rollout_rank = rank % world
            self._server = None

        def _server_handle(self):
            if self._server is None:
                self._server = ray.get_actor(server_name(self.replica_rank))
            return self._server

        async def resume(self, tags: list[str]):
            pass

        async def release(self):
            pass

        async def update_weights(self, weights, wire_format: str = "named_tensors", global_steps: int | None = None,
                                 **kwargs):
            if wire_format != "named_tensors":
                raise ValueError(f"the CPU rollout takes full tensors, not {wire_format!r}")
            state = {name: tensor.detach().to("cpu").clone() for name, tensor in weights}  # every rank gathers
            if self.rollout_rank == 0:
                await self._server_handle().update_weights.remote(state, global_steps)

    return ServerAdapter


def __getattr__(name: str):
    # verl's classes are built on first use (importing this module imports neither verl nor ray)
    if name in ("ServerAdapter", "CPUReplica"):
        cls = _adapter_class() if name == "ServerAdapter" else _replica_class()
        cls.__module__ = __name__
        cls.__qualname__ = name
        globals()[name] = cls
        return cls
    raise AttributeError(name)


def register_replica(replica_module) -> None:
    """Register :data:`ROLLOUT` in verl's ``RolloutReplicaRegistry`` (``verl.workers.rollout.replica``)."""
    replica_module.RolloutReplicaRegistry.register(ROLLOUT, load_replica_class)


def register_adapter(base_module) -> None:
    """Register the adapter in verl's private ``_ROLLOUT_REGISTRY`` (``verl.workers.rollout.base``)."""
    base_module._ROLLOUT_REGISTRY[(ROLLOUT, "async")] = f"{__name__}.ServerAdapter"
