"""Recurrent policies (`memory: gru`): the GRU core every network can put between its encoder and its heads.

The core follows JaxMARL's `ScannedRNN`: a GRU scanned over a leading time axis whose carry is
reset to zeros at each step flagged in `resets` (the previous step ended an episode) before the
step's input goes in. A network with `memory` > 0 runs its encoder (the MLP trunk, the entity
encoder's context) on every step at once, the core over time, and its heads on the core's output,
so action masks are applied after the core, exactly as without it. Acting, the rollout carries the
memory and zeros it where an episode ends (`nexus_jax.rollout.Recurrent`), which is the memory the
replay from a stored initial memory recomputes; PPO, GRPO and BC replay whole env sequences.

`policy_act` is the one way a trainer, evaluator or tool turns a policy into the rollout's act function.
"""
from __future__ import annotations

from typing import Callable

import flax.linen as nn
import jax
import jax.numpy as jnp

from nexus_jax.rollout import Recurrent


def memory_size(cfg) -> int:
    """The GRU width a config asks for (0: feedforward)."""
    return int(cfg.memory_size) if getattr(cfg, "memory", "none") == "gru" else 0


def _orthogonal_gates(gates: int, init: Callable):
    """A (H, gates * H) kernel: one orthogonal (H, H) block per gate (`init` is train.networks.orthogonal())."""
    def make(key, shape, dtype=jnp.float32):
        h = shape[0]
        return jnp.concatenate([init(k, (h, h), dtype) for k in jax.random.split(key, gates)], -1)
    return make


def _gru_cell(c, g, reset, w, b):
    """One GRU step (flax's `GRUCell`: r, z, n gates, n's recurrent term scaled by r) from the carry reset where
    `reset` -> (carry, what its gradient needs)."""
    h = w.shape[0]
    c = jnp.where(reset[..., None], jnp.zeros_like(c), c)
    gh = c @ w + b
    r = jax.nn.sigmoid(g[..., :h] + gh[..., :h])
    z = jax.nn.sigmoid(g[..., h:2 * h] + gh[..., h:2 * h])
    n = jnp.tanh(g[..., 2 * h:] + r * gh[..., 2 * h:])
    return (1.0 - z) * n + z * c, (c, r, z, n, gh[..., 2 * h:])


@jax.custom_vjp
def gru_scan(carry, gx, resets, w, b):
    """The GRU over time: carry (..., H), input projections gx (T, ..., 3H), resets (T, ...), recurrent kernel
    w (H, 3H) and bias b (3H,) -> (carry after step T-1, outputs (T, ..., H)).

    Its gradient is written out (`jax.custom_vjp`): the backward scan does one matmul per step and the
    recurrent kernel's gradient is one matmul over all steps after it, where autodiff's backward scan adds
    a per-step outer product to it (1.7x the time of this one for T=100, 16 envs, H=128 on a 2-core CPU)."""
    return _gru_forward(carry, gx, resets, w, b)[0]


def _gru_forward(carry, gx, resets, w, b):
    """`gru_scan`'s forward pass -> (its outputs, the residuals its backward pass reads)."""
    def step(c, x):
        c, saved = _gru_cell(c, *x, w, b)
        return c, (c, saved)

    carry, (ys, saved) = jax.lax.scan(step, carry, (gx, resets))
    return (carry, ys), (saved, resets, w)


def _gru_backward(residuals, cotangents):
    """`gru_scan`'s backward pass: the cotangents of (carry, gx, resets: none, w, b), the steps in reverse."""
    (c_in, r, z, n, gh_n), resets, w = residuals
    d_carry, d_ys = cotangents

    def step(dc, x):
        dy, c, r, z, n, gh_n, reset = x
        dc = dc + dy
        dn = dc * (1.0 - z) * (1.0 - n * n)
        dz = dc * (c - n) * z * (1.0 - z)
        dr = dn * gh_n * r * (1.0 - r)
        d_gh = jnp.concatenate([dr, dz, dn * r], -1)
        dc = dc * z + d_gh @ w.T
        return jnp.where(reset[..., None], jnp.zeros_like(dc), dc), (jnp.concatenate([dr, dz, dn], -1), d_gh)

    d_c0, (d_gx, d_gh) = jax.lax.scan(step, d_carry, (d_ys, c_in, r, z, n, gh_n, resets), reverse=True)
    d_w = jnp.einsum("...i,...j->ij", c_in, d_gh)
    d_b = d_gh.reshape(-1, d_gh.shape[-1]).sum(0)
    return d_c0, d_gx, None, d_w, d_b


gru_scan.defvjp(_gru_forward, _gru_backward)


class GRUCore(nn.Module):
    """A GRU over a leading time axis: (carry (..., H), x (T, ..., F), resets (T, ...)) -> (carry, y (T, ..., H)).

    The input projections of all T steps are one matmul before the scan (`gru_scan`); each scan step does
    the recurrent matmul and the gates only. `resets[t]` sets the carry to zeros before step t.
    """

    size: int
    recurrent_init: Callable  # train.networks.orthogonal(): flax's values without a batched QR under vmap

    @nn.compact
    def __call__(self, carry, x, resets):
        h = self.size
        gx = nn.Dense(3 * h, name="input")(x)
        w = self.param("recurrent_kernel", _orthogonal_gates(3, self.recurrent_init), (h, 3 * h))
        b = self.param("recurrent_bias", nn.initializers.zeros, (3 * h,))
        return gru_scan(carry, gx, resets, w, b)


def apply_core(core: GRUCore | None, h, carry, resets):
    """`h` through `core` when the network has one -> (h, carry); (h, None) when it has none."""
    if core is None:
        return h, None
    carry, h = core(carry, h, resets)
    return h, carry


def first_steps(done):
    """Reset flags of a time-major sequence (T, E) from its `done` flags: step t starts an episode when step
    t - 1 ended one; step 0 starts from the stored memory (already zeros where an episode began)."""
    return jnp.concatenate([jnp.zeros_like(done[:1]), done[:-1]], 0)


def with_time(tree):
    """One step as a sequence of length 1 (a leading time axis)."""
    return jax.tree.map(lambda x: x[None], tree)


def without_time(tree):
    """A sequence of length 1 as one step."""
    return jax.tree.map(lambda x: x[0], tree)


def stateful(act: Callable) -> Callable:
    """A plain rollout act function in a `Recurrent`'s signature: the memory goes through unchanged."""
    def fn(key, obs, state, masks, memory):
        action, extra = act(key, obs, state, masks)
        return action, extra, memory
    return fn


def policy_act(policy, params, observe: Callable | None = None):
    """The rollout act function that samples `policy` with `params` (the action only, extra None): a plain
    act function for a feedforward policy, a `nexus_jax.rollout.Recurrent` (zeros at the start) for a
    recurrent one. `observe(obs, state) -> the policy's input` (default: the obs as given)."""
    see = observe or (lambda obs, state: obs)
    if not policy.memory_size:
        return lambda key, obs, state, masks: (policy.act(params, see(obs, state), masks, key)[0], None)

    def act(key, obs, state, masks, memory):
        action, _, _, memory = policy.act_step(params, see(obs, state), masks, key, memory)
        return action, None, memory

    return Recurrent(act, policy.initial_memory)


class Recurrence:
    """The memory methods of an actor-critic (mixed into `networks.ActorCritic` and `entity_net.EntityActorCritic`).

    Two layouts, as JaxMARL's recurrent baselines: with an IPPO critic (`own_critic_core` False) actor and
    critic share one torso, the value a head on the actor's core (ippo_rnn); with a MAPPO critic the
    critic keeps its own trunk and core over the global state (mappo_rnn). A memory is a dict: "actor"
    (B, A, H), and "critic" (B, A, H) where the critic has its own core and the caller asked for it.

    The class provides `memory_size` (0: feedforward), `num_learners`, `own_critic_core` and the sequence
    forms over (T, B, A, ...) inputs with resets (T, B, A): `_actor(params, obs, masks, key, action, carry,
    resets)` -> (action, log_prob, entropy, carry, value or None), which gives only (value, carry) when
    neither `key` nor `action` is given, and `_critic(params, obs, carry, resets)` -> (value, carry).
    """

    memory_size: int = 0
    own_critic_core: bool = False

    def initial_memory(self, num_envs: int, critic: bool = False):
        """The memory at the start of an episode: zeros, the actor's and (`critic`, when it has its own core) the
        critic's, (num_envs, A, memory_size) each; None when feedforward."""
        if not self.memory_size:
            return None
        zeros = jnp.zeros((num_envs, self.num_learners, self.memory_size))
        return {"actor": zeros, **({"critic": zeros} if critic and self.own_critic_core else {})}

    def _feedforward(self, what: str):
        """Refuse a feedforward method on a policy with a memory (it would act without its history)."""
        if self.memory_size:
            raise TypeError(f"{type(self).__name__}.{what}: this policy has a memory (memory=gru): use its step or "
                            f"sequence methods (train/memory.py; policy_act makes the rollout's act function)")

    @staticmethod
    def _no_resets(carry):
        """No reset inside a single step: the rollout has zeroed the memory where an episode began."""
        return jnp.zeros((1,) + carry.shape[:-1], bool)

    @staticmethod
    def _resets(resets, carry):
        """(T, B) or (T, B, A) reset flags -> (T, B, A) (every learner seat of an env starts together)."""
        shape = (resets.shape[0],) + carry.shape[:-1]
        return jnp.broadcast_to(resets.reshape(resets.shape + (1,) * (len(shape) - resets.ndim)), shape)

    def _actor_step(self, params, obs, masks, key, action, memory):
        out = self._actor(params, with_time(obs), with_time(masks), key, with_time(action), memory["actor"],
                          self._no_resets(memory["actor"]))
        return without_time(out[:3]), out[3], None if out[4] is None else out[4][0]

    def act_step(self, params, obs, masks, key, memory):
        """Sample one step with `memory` -> (action, log_prob, entropy, memory after the step: the actor's
        entry advanced). A feedforward policy (memory None) returns `act`'s outputs and None."""
        if memory is None:
            return (*self.act(params, obs, masks, key), None)
        (action, log_prob, entropy), carry, _ = self._actor_step(params, obs, masks, key, None, memory)
        return action, log_prob, entropy, {**memory, "actor": carry}

    def evaluate_step(self, params, obs, masks, action, memory):
        """Score one step's actions with `memory` -> (log_prob, entropy, memory after the step)."""
        if memory is None:
            return (*self.evaluate(params, obs, masks, action), None)
        (_, log_prob, entropy), carry, _ = self._actor_step(params, obs, masks, None, action, memory)
        return log_prob, entropy, {**memory, "actor": carry}

    def step(self, params, obs, masks, key, memory):
        """What PPO's rollout asks: sample and value one step -> (action, log_prob, entropy, value, memory after
        the step); `memory` holds the critic's entry when it has its own core (`initial_memory(.., critic=True)`)."""
        if memory is None:
            action, log_prob, entropy = self.act(params, obs, masks, key)
            return action, log_prob, entropy, self.value(params, obs), None
        (action, log_prob, entropy), carry, value = self._actor_step(params, obs, masks, key, None, memory)
        memory = {**memory, "actor": carry}
        if self.own_critic_core:
            value, memory["critic"] = self._critic_step(params, obs, memory["critic"])
        return action, log_prob, entropy, value, memory

    def _critic_step(self, params, obs, carry):
        value, carry = self._critic(params, with_time(obs), carry, self._no_resets(carry))
        return value[0], carry

    def value_step(self, params, obs, masks, memory):
        """One step's values (B, A) from `memory` (the step is not taken: its memory is dropped). `masks`: the
        step's, for the layouts whose value head shares the actor's inputs."""
        if memory is None:
            return self.value(params, obs)
        if self.own_critic_core:
            return self._critic_step(params, obs, memory["critic"])[0]
        value, _ = self._actor(params, with_time(obs), with_time(masks), None, None, memory["actor"],
                               self._no_resets(memory["actor"]))
        return value[0]

    def evaluate_sequence(self, params, obs, masks, action, memory, resets, value: bool = False):
        """Score a time-major sequence (T, B, A, ...) replayed from `memory` at its first step, reset where
        `resets` (T, B) -> (log_prob, entropy) (T, B, A), and with `value` the values (T, B, A) third."""
        carry = memory["actor"]
        _, log_prob, entropy, _, v = self._actor(params, obs, masks, None, action, carry, self._resets(resets, carry))
        if not value:
            return log_prob, entropy
        if self.own_critic_core:
            c = memory["critic"]
            v = self._critic(params, obs, c, self._resets(resets, c))[0]
        return log_prob, entropy, v
