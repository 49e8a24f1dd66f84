"""Flax actor-critic: factored autoregressive or flat masked action heads, IPPO or MAPPO critics.

With `memory` > 0 (`memory: gru`) every actor and critic puts a GRU core (train/memory.py) between
its trunk and its heads and takes inputs with a leading time axis, a memory and reset flags; an actor
with `value_head` also gives the value from its core's output (actor and critic share that torso).

The factored policy samples type -> target -> resource -> amount_1 -> amount_2; each head
after `type` sees one-hots of the choices made before it and is masked by the env's
per-head mask for those choices (`env.factored_action_masks`). A masked logit is set to a
large negative number, so its probability is exactly 0 in float32: it is never sampled.
Actions come out in the env's structured layout (type, target, amount_1, amount_2, resource).
"""
from __future__ import annotations

from typing import Sequence

import distrax
import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from nexus_jax.base import SlotLayout
from nexus_jax.envs.crisis import SLOT_RULES
from train.memory import GRUCore, Recurrence, apply_core, memory_size, with_time

MASKED_LOGIT = -1e9
FIELDS = ("type", "target", "amount_1", "amount_2", "resource")  # env layout of a structured action


def orthogonal(scale: float = 1.0):
    """flax's `nn.initializers.orthogonal(scale)`, the same values, but one QR at a time under `vmap`.

    Under `vmap` (over seeds or learning rates) flax's initializer makes one batched QR per layer, and
    jaxlib's batched LAPACK kernels (0.10) split the batch over XLA:CPU's thread pool and block a pool
    thread until the parts are done: when as many such QRs run at once as the pool has threads (XLA:CPU's
    concurrency-optimized scheduler runs independent layers' QRs together), each waits for work no free
    thread is left to take, and the program hangs before its first update (docs/performance.md). Here
    each example's matrix is drawn in turn (`sequential_vmap`): the program has no batched LAPACK call.
    """
    base = nn.initializers.orthogonal(scale)

    def init(key, shape, dtype=jnp.float32):
        return jax.custom_batching.sequential_vmap(lambda k: base(k, shape, dtype))(key)

    return init


def masked_categorical(logits: jnp.ndarray, mask: jnp.ndarray) -> distrax.Categorical:
    """A categorical that puts exactly zero probability on masked entries."""
    return distrax.Categorical(logits=jnp.where(mask, logits, MASKED_LOGIT))


def _row(table: jnp.ndarray, idx: jnp.ndarray) -> jnp.ndarray:
    """table (..., K, *rest), idx (...,) -> table[..., idx, *rest] (a per-sample row pick)."""
    i = idx.reshape(idx.shape + (1,) * (table.ndim - idx.ndim))
    return jnp.take_along_axis(table, i, axis=idx.ndim).squeeze(idx.ndim)


def _mlp(x, hidden: int, layers: int, act, name: str):
    for i in range(layers):
        x = act(nn.Dense(hidden, kernel_init=orthogonal(np.sqrt(2)), name=f"{name}_{i}")(x))
    return x


def _activation(name: str):
    return {"tanh": nn.tanh, "relu": nn.relu}[name]


class FactoredActor(nn.Module):
    """Autoregressive heads over the MultiDiscrete view; `nvec` = (types, targets, levels, levels, resources).

    `type_prior` (one number per action type, or empty) is a fixed offset on the type head's logits:
    the fresh policy starts with those preferences and learning moves away from them as it pays.
    `memory` > 0: a GRU core of that size between the trunk and the heads (train/memory.py), and with
    `value_head` a value head on the core's output.
    """

    nvec: Sequence[int]
    hidden: int = 128
    layers: int = 2
    activation: str = "tanh"
    type_prior: Sequence[float] = ()
    memory: int = 0
    value_head: bool = False

    def setup(self):
        small = orthogonal(0.01)
        self.trunk = [nn.Dense(self.hidden, kernel_init=orthogonal(np.sqrt(2)))
                      for _ in range(self.layers)]
        self.core = GRUCore(self.memory, orthogonal()) if self.memory else None
        self.value_out = nn.Dense(1, kernel_init=orthogonal(1.0)) if self.value_head else None
        n_type, n_target, n_level, _, n_res = self.nvec
        self.type_head = nn.Dense(n_type, kernel_init=small)
        self.target_head = nn.Dense(n_target, kernel_init=small)
        self.resource_head = nn.Dense(n_res, kernel_init=small)
        self.amount_1_head = nn.Dense(n_level, kernel_init=small)
        self.amount_2_head = nn.Dense(n_level, kernel_init=small)

    def __call__(self, obs, masks, key=None, action=None, carry=None, resets=None):
        """Sample (key given) or score (action given) -> (action (..., 5), log_prob (...), entropy (...)).

        `masks` holds the env's per-head masks for one seat (leading dims like `obs`).
        The entropy is the sum of the heads' entropies along the sampled/scored path.
        With a core: inputs (T, ...), `carry` the memory before step 0, `resets` (T, ...); then -> (action,
        log_prob, entropy, memory after the last step, value or None), and with neither key nor action
        only (value, memory).
        """
        act = _activation(self.activation)
        h = obs
        for layer in self.trunk:
            h = act(layer(h))
        h, carry = apply_core(self.core, h, carry, resets)
        value = self.value_out(h)[..., 0] if self.value_out is not None else None
        if self.core is not None and key is None and action is None:
            return value, carry
        n_type, n_target, n_level, _, n_res = self.nvec
        keys = jax.random.split(key, 5) if key is not None else [None] * 5
        oh = jax.nn.one_hot

        def choose(dist, k, field):
            if action is not None:
                return action[..., FIELDS.index(field)]
            return dist.sample(seed=k).astype(jnp.int32)

        log_prob, entropy = 0.0, 0.0
        type_logits = self.type_head(h)
        if self.type_prior:
            type_logits = type_logits + jnp.asarray(self.type_prior, type_logits.dtype)
        d = masked_categorical(type_logits, masks["type"])
        t = choose(d, keys[0], "type")
        log_prob, entropy = log_prob + d.log_prob(t), entropy + d.entropy()
        ht = jnp.concatenate([h, oh(t, n_type)], -1)

        d = masked_categorical(self.target_head(ht), _row(masks["target"], t))
        j = choose(d, keys[1], "target")
        log_prob, entropy = log_prob + d.log_prob(j), entropy + d.entropy()

        d = masked_categorical(self.resource_head(ht), _row(masks["resource"], t))
        r = choose(d, keys[2], "resource")
        log_prob, entropy = log_prob + d.log_prob(r), entropy + d.entropy()
        htr = jnp.concatenate([ht, oh(r, n_res)], -1)

        d = masked_categorical(self.amount_1_head(htr), _row(_row(masks["amount_1"], t), r))
        a1 = choose(d, keys[3], "amount_1")
        log_prob, entropy = log_prob + d.log_prob(a1), entropy + d.entropy()

        d = masked_categorical(self.amount_2_head(jnp.concatenate([htr, oh(a1, n_level)], -1)),
                               _row(_row(masks["amount_2"], t), r))
        a2 = choose(d, keys[4], "amount_2")
        log_prob, entropy = log_prob + d.log_prob(a2), entropy + d.entropy()

        out = jnp.stack([t, j, a1, a2, r], -1).astype(jnp.int32)
        return (out, log_prob, entropy) if self.core is None else (out, log_prob, entropy, carry, value)


def _core(size: int):
    """The GRU core of a compact module (None when feedforward)."""
    return GRUCore(size, orthogonal(), name="core") if size else None


def _value(h, value_head: bool):
    """The shared torso's value head on the core's output (None without one)."""
    return nn.Dense(1, kernel_init=orthogonal(1.0), name="value")(h)[..., 0] if value_head else None


def _outputs(carry, a, log_prob, entropy, value):
    """A compact actor's outputs: (action, log_prob, entropy), and with a core the memory and value too."""
    return (a, log_prob, entropy) if carry is None else (a, log_prob, entropy, carry, value)


class FlatActor(nn.Module):
    """One masked categorical over the flat Discrete(n) enumeration (what JaxMARL baselines use)."""

    num_actions: int
    hidden: int = 128
    layers: int = 2
    activation: str = "tanh"
    memory: int = 0
    value_head: bool = False

    @nn.compact
    def __call__(self, obs, masks, key=None, action=None, carry=None, resets=None):
        h = _mlp(obs, self.hidden, self.layers, _activation(self.activation), "trunk")
        h, carry = apply_core(_core(self.memory), h, carry, resets)
        value = _value(h, self.value_head)
        if carry is not None and key is None and action is None:
            return value, carry
        logits = nn.Dense(self.num_actions, kernel_init=orthogonal(0.01))(h)
        d = masked_categorical(logits, masks)
        a = action if action is not None else d.sample(seed=key).astype(jnp.int32)
        return _outputs(carry, a, d.log_prob(a), d.entropy(), value)


def rule_choice(slots, masks, layout, rule: str = "edf", tight: float = 0.15):
    """One-hot (..., n) of a hand-written rule's flat action read from the slots' features (..., K, F): the
    env's slot rule `rule` (`nexus_jax.envs.crisis.SLOT_RULES`, the state rules' ranking read from the
    features): "edf" the least time to the deadline (`edf_actions`); "edf_chain" (`edf_chain`, needs
    dependency_features) with `tight` its slack threshold in feature units (1.2 h of an 8 h episode)."""
    pick = SLOT_RULES[rule](slots, masks, SlotLayout(*layout), tight)
    return jax.nn.one_hot(pick, masks.shape[-1], dtype=slots.dtype)


class SlotActor(nn.Module):
    """A flat masked categorical whose REQUEST logits come from one scorer shared by every task slot.

    `layout` = (obs offset, slots K, features per slot F, first REQUEST action, actions per slot, then the
    indices of the deadline, slack, fits-now and idle-unlocks features) (`env.spec.slot_layout`, crisis-v0):
    the trunk reads the obs without the slots plus the mean and max of the slots' features (a
    summary that ignores their order); slot k's features obs[off + k F : off + (k + 1) F] and the
    trunk's output go through one small MLP shared by every slot, whose outputs are the logits of
    slot k's actions; WAIT and RELEASE get the trunk's logits. Permuting the slots permutes their logits and changes nothing else: the
    policy cannot prefer a slot for its position, only for what its features say (deadline,
    slack, demand), and that is learnt once for every slot.

    `edf_prior` b > 0 adds b to the logit of the action the earliest-deadline-first rule takes
    (`nexus_jax.envs.crisis.edf_actions`, read from the obs and masks by `rule_choice`: REQUEST
    with HOLD the valid slot with the least time to its deadline, lowest slot on ties; WAIT with
    HOLD when none is valid). A fixed offset, not a parameter: a fresh policy's
    argmax is EDF and it samples EDF's action with probability about e^b / (e^b + n_valid - 1),
    so training starts at EDF and the learnt logits move it only where the return says so.
    `edf_feature`: the scorer also reads whether its slot is EDF's pick, and the trunk reads
    the picked slot's features (so "EDF's task does not fit now, this one does" is an input).
    `prior_rule` "edf_chain" puts the offset and the feature on that rule's action instead
    (`rule_choice`; `prior_tight` its slack threshold in feature units).
    """

    num_actions: int
    layout: Sequence[int]
    hidden: int = 128
    layers: int = 2
    activation: str = "tanh"
    edf_prior: float = 0.0
    edf_feature: bool = False
    prior_rule: str = "edf"
    prior_tight: float = 0.15
    memory: int = 0
    value_head: bool = False

    @nn.compact
    def __call__(self, obs, masks, key=None, action=None, carry=None, resets=None):
        act = _activation(self.activation)
        off, K, F, first, per = (int(v) for v in self.layout[:5])
        slots = obs[..., off:off + K * F].reshape(obs.shape[:-1] + (K, F))
        rest = jnp.concatenate([obs[..., :off], obs[..., off + K * F:], slots.mean(-2), slots.max(-2)], -1)
        edf = (rule_choice(slots, masks, self.layout, self.prior_rule, self.prior_tight)
               if self.edf_prior or self.edf_feature else None)
        inputs = slots
        if self.edf_feature:  # which slot EDF takes, and that slot's features, as inputs
            is_edf = edf[..., first:first + K * per:per]  # (..., K)
            rest = jnp.concatenate([rest, jnp.einsum("...k,...kf->...f", is_edf, slots)], -1)
            inputs = jnp.concatenate([slots, is_edf[..., None]], -1)
        h = _mlp(rest, self.hidden, self.layers, act, "trunk")
        h, carry = apply_core(_core(self.memory), h, carry, resets)
        value = _value(h, self.value_head)
        if carry is not None and key is None and action is None:
            return value, carry
        logits = nn.Dense(self.num_actions, kernel_init=orthogonal(0.01))(h)
        z = jnp.concatenate([inputs, jnp.broadcast_to(h[..., None, :], slots.shape[:-1] + h.shape[-1:])], -1)
        z = _mlp(z, self.hidden, 1, act, "slot")
        score = nn.Dense(per, kernel_init=orthogonal(0.01), name="slot_out")(z)
        logits = logits.at[..., first:first + K * per].set(score.reshape(score.shape[:-2] + (K * per,)))
        if self.edf_prior:
            logits = logits + self.edf_prior * edf
        d = masked_categorical(logits, masks)
        a = action if action is not None else d.sample(seed=key).astype(jnp.int32)
        return _outputs(carry, a, d.log_prob(a), d.entropy(), value)


class Critic(nn.Module):
    """State-value network; its input is the seat's own obs (IPPO) or the global state (MAPPO).
    `memory` > 0: a GRU core between the trunk and the value head; then -> (value, memory)."""

    hidden: int = 128
    layers: int = 2
    activation: str = "tanh"
    memory: int = 0

    @nn.compact
    def __call__(self, x, carry=None, resets=None):
        h = _mlp(x, self.hidden, self.layers, _activation(self.activation), "trunk")
        h, carry = apply_core(_core(self.memory), h, carry, resets)
        value = nn.Dense(1, kernel_init=orthogonal(1.0))(h)[..., 0]
        return value if carry is None else (value, carry)


class ActorCritic(Recurrence):
    """Actor and critic over the learner axis: arrays are (B, A, ...) with A learner seats.

    `share_params`: one network for every seat, its input extended by a one-hot agent id;
    otherwise each seat has its own parameters (stacked on a leading A axis, applied with
    vmap). `critic="mappo"` feeds the critic the global state (all learner obs), "ippo"
    the seat's own obs. `memory` > 0: a GRU core of that size after the actor's trunk, and the
    IPPO critic is a value head on it (one torso, JaxMARL's ippo_rnn: the params have no "critic"),
    the MAPPO critic its own trunk and core (mappo_rnn); `train.memory.Recurrence`'s step and
    sequence methods act and score then (`act`, `evaluate` and `value` are the feedforward ones).
    """

    def __init__(self, num_learners: int, obs_dim: int, action_head: str = "factored", nvec=None,
                 num_actions: int | None = None, hidden: int = 128, layers: int = 2, activation: str = "tanh",
                 critic: str = "ippo", share_params: bool = True, slot_layout: Sequence[int] | None = None,
                 edf_prior: float = 0.0, edf_feature: bool = False, prior_rule: str = "edf", prior_tight: float = 0.15,
                 type_prior: Sequence[float] = (), memory: int = 0):
        """`slot_layout` (flat head only): score task slots with one shared network (`SlotActor`), whose
        logits get `edf_prior` on `prior_rule`'s action (earliest deadline first by default) and which reads
        that rule's pick if `edf_feature`. `type_prior` (factored head only): fixed offsets on the action types' logits."""
        self.num_learners, self.obs_dim = num_learners, obs_dim
        self.action_head, self.critic_kind, self.share = action_head, critic, share_params
        self.memory_size = int(memory)
        self.own_critic_core = bool(self.memory_size) and critic == "mappo"
        shared = bool(self.memory_size) and not self.own_critic_core  # the value head on the actor's core
        if action_head == "factored":
            self.actor = FactoredActor(tuple(nvec), hidden, layers, activation, tuple(float(v) for v in type_prior),
                                       self.memory_size, shared)
        elif slot_layout is not None:
            self.actor = SlotActor(int(num_actions), tuple(int(v) for v in slot_layout), hidden, layers, activation,
                                   float(edf_prior), bool(edf_feature), str(prior_rule), float(prior_tight),
                                   self.memory_size, shared)
        else:
            self.actor = FlatActor(int(num_actions), hidden, layers, activation, self.memory_size, shared)
        self.critic = None if shared else Critic(hidden, layers, activation, self.memory_size)

    @classmethod
    def from_config(cls, cfg, env) -> "ActorCritic":
        return cls(env.num_learners, env.obs_dim, cfg.action_head,
                   env.nvec if cfg.action_head == "factored" else None,
                   env.num_actions if cfg.action_head == "flat" else None,
                   cfg.hidden_size, cfg.num_layers, cfg.activation, cfg.critic, cfg.share_params,
                   env.slot_layout if cfg.network == "slot" else None, cfg.slot.prior, cfg.slot.feature,
                   cfg.slot.rule, cfg.slot.tight, cfg.type_prior, memory_size(cfg))

    # ---- inputs -------------------------------------------------------------------------
    def _with_id(self, x):
        """Append the one-hot learner id when parameters are shared (x is (B, A, F))."""
        if not self.share:
            return x
        ids = jnp.broadcast_to(jnp.eye(self.num_learners, dtype=x.dtype), x.shape[:-2] + (self.num_learners,) * 2)
        return jnp.concatenate([x, ids], -1)

    def critic_input(self, obs):
        if self.critic_kind == "mappo":
            flat = obs.reshape(obs.shape[:-2] + (-1,))
            obs = jnp.broadcast_to(flat[..., None, :], obs.shape[:-1] + flat.shape[-1:])
        return self._with_id(obs)

    # ---- params -------------------------------------------------------------------------
    def init(self, key, obs, masks):
        """obs (B, A, D), masks (B, A, ...) examples -> {"actor", "critic"} params."""
        ka, kc, ks = jax.random.split(key, 3)
        x, c = self._with_id(obs), self.critic_input(obs)
        if self.memory_size:  # the modules take sequences: one step, zero memory
            carry = jnp.zeros(obs.shape[:-1] + (self.memory_size,))
            resets = jnp.zeros((1,) + carry.shape[:-1], bool)
            return self._init_recurrent(ka, kc, ks, with_time(x), with_time(c), with_time(masks), carry, resets)
        if self.share:
            return {"actor": self.actor.init(ka, x, masks, ks), "critic": self.critic.init(kc, c)}
        kas, kcs = jax.random.split(ka, self.num_learners), jax.random.split(kc, self.num_learners)
        take = lambda t, i: jax.tree.map(lambda v: v[:, i], t)  # noqa: E731
        actor = jax.vmap(lambda k, i: self.actor.init(k, x[:, i], take(masks, i), ks), (0, 0))(kas, jnp.arange(self.num_learners))
        critic = jax.vmap(lambda k, i: self.critic.init(k, c[:, i]))(kcs, jnp.arange(self.num_learners))
        return {"actor": actor, "critic": critic}

    def _init_recurrent(self, ka, kc, ks, x, c, masks, carry, resets):
        """The params of the modules with a core (sequence inputs (1, B, A, ...)); "critic" only when it has its own."""
        out = {}
        if self.share:
            out["actor"] = self.actor.init(ka, x, masks, ks, None, carry, resets)
            if self.critic is not None:
                out["critic"] = self.critic.init(kc, c, carry, resets)
            return out
        take = lambda t, i: jax.tree.map(lambda v: v[:, :, i], t)  # noqa: E731
        seats = jnp.arange(self.num_learners)
        out["actor"] = jax.vmap(lambda k, i: self.actor.init(k, take(x, i), take(masks, i), ks, None, carry[:, i],
                                                             resets[:, :, i]))(jax.random.split(ka, len(seats)), seats)
        if self.critic is not None:
            out["critic"] = jax.vmap(lambda k, i: self.critic.init(k, take(c, i), carry[:, i], resets[:, :, i]))(
                jax.random.split(kc, len(seats)), seats)
        return out

    # ---- apply --------------------------------------------------------------------------
    def _actor(self, params, obs, masks, key, action, carry=None, resets=None):
        """The actor over (B, A, ...) inputs, or with `carry` (B, A, H) over sequences (T, B, A, ...) with
        `resets` (T, B, A): then -> (action, log_prob, entropy, memory after the last step, value or None),
        or (value, memory) with neither `key` nor `action`."""
        x = self._with_id(obs)
        extra = () if carry is None else (carry, resets)
        if self.share:
            return self.actor.apply(params["actor"], x, masks, key, action, *extra)
        keys = jax.random.split(key, self.num_learners) if key is not None else None
        if carry is not None:  # the seat axis is 2 in sequences, 1 in the memory
            fn = lambda p, xi, mi, ki, ai, ci, ri: self.actor.apply(p, xi, mi, ki, ai, ci, ri)  # noqa: E731
            out_axes = (2, 1) if key is None and action is None else (2, 2, 2, 1, 2)
            return jax.vmap(fn, (0, 2, 2, 0 if key is not None else None, 2 if action is not None else None, 1, 2),
                            out_axes)(params["actor"], x, masks, keys, action, carry, resets)
        fn = lambda p, xi, mi, ki, ai: self.actor.apply(p, xi, mi, ki, ai)  # noqa: E731
        return jax.vmap(fn, (0, 1, 1, 0 if key is not None else None, 1 if action is not None else None), 1)(
            params["actor"], x, masks, keys, action)

    def _critic(self, params, obs, carry, resets):
        """The critic over sequences (T, B, A, ...) from its memory (B, A, H) -> (values (T, B, A), memory)."""
        c = self.critic_input(obs)
        if self.share:
            return self.critic.apply(params["critic"], c, carry, resets)
        return jax.vmap(self.critic.apply, (0, 2, 1, 2), (2, 1))(params["critic"], c, carry, resets)

    def act(self, params, obs, masks, key):
        """Sample -> (action (B, A[, 5]), log_prob (B, A), entropy (B, A))."""
        self._feedforward("act")
        return self._actor(params, obs, masks, key, None)

    def evaluate(self, params, obs, masks, action):
        """Score given actions -> (log_prob (B, A), entropy (B, A))."""
        self._feedforward("evaluate")
        _, log_prob, entropy = self._actor(params, obs, masks, None, action)
        return log_prob, entropy

    def value(self, params, obs):
        """(B, A) state values from the learners' obs (B, A, D)."""
        self._feedforward("value")
        c = self.critic_input(obs)
        if self.share:
            return self.critic.apply(params["critic"], c)
        return jax.vmap(self.critic.apply, (0, 1), 1)(params["critic"], c)
