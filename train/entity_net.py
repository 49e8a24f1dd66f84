"""A permutation-equivariant actor-critic over the entity view: one set of parameters for any N and seat order.

Encoder (DeepSets with event-to-seat messages): every ledger event row is embedded and
added to the seat rows of its actor and its target (a one-hot matmul over row indices);
each seat row is embedded with its messages and the observer's own embedding; a context
vector pools the seat rows (masked mean and max) and the event rows (masked mean). Nothing
depends on how many rows there are or in what order, so the weights transfer across N.

Actor (autoregressive, like `networks.FactoredActor`): type from the context; the target
is a *pointer* over seat rows (an additive-attention score per row, masked by the env's
target mask gathered at each row's seat); resource, amount_1 and amount_2 see the context,
the type and the chosen row's embedding. Types without a target (WAIT, WORK, VAULT,
UNVAULT) put target 0, as the env's factored masks require, and add nothing to the log-prob.
Relabelling the seats permutes the target logits and leaves every other logit unchanged.

Obs leaves carry leading (B, A) axes (batch, learner seats); actions are the env's
structured rows (type, target, amount_1, amount_2, resource) with absolute targets.

With `memory` > 0 the context vector goes through a GRU core (train/memory.py) before the heads
(the seat rows the pointer reads are the step's own): the memory is one vector per seat whatever N.
The critic is then a value head on the core's output (one torso, as JaxMARL's ippo_rnn).
"""
from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from nexus_jax.envs.nexus import NUM_ACTION_TYPES, NUM_RESOURCES, observe_one
from nexus_jax.envs.nexus import ActionType as T
from train.memory import GRUCore, Recurrence, apply_core, memory_size, with_time
from train.networks import FIELDS, _row, masked_categorical, orthogonal

TARGETED = np.zeros(NUM_ACTION_TYPES, bool)
TARGETED[[T.PROPOSE, T.ACCEPT, T.REJECT, T.SIGNAL]] = True  # types whose target field is a seat


def _dense(size: int, name: str, scale: float = np.sqrt(2)):
    return nn.Dense(size, kernel_init=orthogonal(scale), name=name)


def _masked_mean(x, mask):
    """Mean of rows x (..., R, D) where mask (..., R); zeros when no row is set."""
    m = mask[..., None].astype(x.dtype)
    return (x * m).sum(-2) / jnp.maximum(m.sum(-2), 1.0)


def _masked_max(x, mask):
    return jnp.where(mask[..., None], x, -1e9).max(-2) * mask.any(-1, keepdims=True)


class EntityEncoder(nn.Module):
    """EntityObs -> (context (..., d), seat row embeddings (..., R, d))."""

    hidden: int = 64

    @nn.compact
    def __call__(self, obs):
        d, act = self.hidden, nn.tanh
        me = act(_dense(d, "own_1")(act(_dense(d, "own_0")(obs.own))))
        ev = act(_dense(d, "event_0")(obs.events)) * obs.event_mask[..., None]
        rows = obs.seats.shape[-2]
        to_rows = lambda idx: jax.nn.one_hot(idx, rows, dtype=ev.dtype)  # noqa: E731  -1 -> a zero row
        msg = (jnp.einsum("...kr,...kd->...rd", to_rows(obs.event_actor), _dense(d, "msg_actor")(ev))
               + jnp.einsum("...kr,...kd->...rd", to_rows(obs.event_target), _dense(d, "msg_target")(ev)))
        h = act(_dense(d, "seat_0")(obs.seats))
        me_rows = jnp.broadcast_to(me[..., None, :], h.shape)
        h = act(_dense(d, "seat_1")(jnp.concatenate([h, msg, me_rows], -1))) * obs.seat_mask[..., None]
        pooled = [me, _masked_mean(h, obs.seat_mask), _masked_max(h, obs.seat_mask), _masked_mean(ev, obs.event_mask)]
        ctx = act(_dense(d, "context")(jnp.concatenate(pooled, -1)))
        return ctx, h


class EntityActor(nn.Module):
    """Factored heads over the entity encoding, the target a pointer over seat rows."""

    num_levels: int
    hidden: int = 64
    memory: int = 0  # > 0: a GRU core on the context, and a value head on its output

    @nn.compact
    def __call__(self, obs, masks, key=None, action=None, return_logits: bool = False, carry=None, resets=None):
        """Sample (key given) or score (action given) -> (action (..., 5), log_prob (...), entropy (...)).

        `return_logits` (static): also return the masked logits of each head along the path (a dict;
        "target" is over seat rows), which the permutation test compares. With a core (`memory`):
        inputs (T, ...), `carry` the memory before step 0, `resets` (T, ...); the memory after the last
        step and the value follow, and with neither key nor action only (value, memory).
        """
        ctx, h = EntityEncoder(self.hidden, name="encoder")(obs)
        ctx, carry = apply_core(GRUCore(self.memory, orthogonal(), name="core") if self.memory else None, ctx, carry,
                                resets)
        value = _dense(1, "value", 1.0)(ctx)[..., 0] if self.memory else None
        if self.memory and key is None and action is None:
            return value, carry
        small = lambda size, name: _dense(size, name, 0.01)  # noqa: E731
        oh = jax.nn.one_hot
        keys = jax.random.split(key, 5) if key is not None else [None] * 5

        def choose(dist, k, field):
            if action is not None:
                return action[..., FIELDS.index(field)]
            return dist.sample(seed=k).astype(jnp.int32)

        logits = {}

        def head(name, x, mask):
            d = masked_categorical(x, mask)
            logits[name] = d.logits
            return d

        d = head("type", small(NUM_ACTION_TYPES, "type")(ctx), masks["type"])
        t = choose(d, keys[0], "type")
        log_prob, entropy = d.log_prob(t), d.entropy()
        ct = jnp.concatenate([ctx, oh(t, NUM_ACTION_TYPES)], -1)

        # Pointer: the row's seat must be an allowed target of type t; padded rows never are.
        # An untargeted type's pointer is unused (target 0, nothing in the log-prob): it ranges over every row.
        targeted = jnp.asarray(TARGETED)[t]
        row_ok = jnp.take_along_axis(_row(masks["target"], t), jnp.maximum(obs.seat_id, 0), -1)
        row_ok = jnp.where(targeted[..., None], row_ok, True) & obs.seat_mask
        q = _dense(self.hidden, "pointer_query")(ct)[..., None, :]
        scores = small(1, "pointer")(nn.tanh(_dense(self.hidden, "pointer_key")(h) + q))[..., 0]
        d = head("target", scores, row_ok)
        if action is not None:
            row = jnp.argmax(obs.seat_id == action[..., FIELDS.index("target")][..., None], -1)
        else:
            row = d.sample(seed=keys[1]).astype(jnp.int32)
        log_prob = log_prob + jnp.where(targeted, d.log_prob(row), 0.0)
        entropy = entropy + jnp.where(targeted, d.entropy(), 0.0)
        pick = oh(row, h.shape[-2], dtype=h.dtype) * targeted[..., None]
        h_tgt = jnp.einsum("...r,...rd->...d", pick, h)
        j = jnp.where(targeted, jnp.take_along_axis(obs.seat_id, row[..., None], -1)[..., 0], 0)
        ctt = jnp.concatenate([ct, h_tgt], -1)

        d = head("resource", small(NUM_RESOURCES, "resource")(ctt), _row(masks["resource"], t))
        r = choose(d, keys[2], "resource")
        log_prob, entropy = log_prob + d.log_prob(r), entropy + d.entropy()
        cr = jnp.concatenate([ctt, oh(r, NUM_RESOURCES)], -1)
        level_mask = lambda name: _row(_row(masks[name], t), r)  # noqa: E731

        d = head("amount_1", small(self.num_levels, "amount_1")(cr), level_mask("amount_1"))
        a1 = choose(d, keys[3], "amount_1")
        log_prob, entropy = log_prob + d.log_prob(a1), entropy + d.entropy()

        d = head("amount_2", small(self.num_levels, "amount_2")(jnp.concatenate([cr, oh(a1, self.num_levels)], -1)),
                 level_mask("amount_2"))
        a2 = choose(d, keys[4], "amount_2")
        log_prob, entropy = log_prob + d.log_prob(a2), entropy + d.entropy()
        out = jnp.stack([t, j, a1, a2, r], -1).astype(jnp.int32)
        outs = (out, log_prob, entropy) + ((logits,) if return_logits else ())
        return outs if carry is None else outs + (carry, value)


class EntityCritic(nn.Module):
    """State value from the entity encoding's context."""

    hidden: int = 64

    @nn.compact
    def __call__(self, obs):
        ctx, _ = EntityEncoder(self.hidden, name="encoder")(obs)
        return _dense(1, "value", 1.0)(ctx)[..., 0]


class EntityActorCritic(Recurrence):
    """`ActorCritic`'s interface (init/act/evaluate/value, and `Recurrence`'s memory methods) over entity
    observations, one network for every seat.

    Parameters are always shared across learner seats and take no agent id (an id would tie
    them to N); the critic reads the seat's own entity view (IPPO). `seat_obs` gives the view
    an evaluator feeds it for any seat of any state.
    """

    action_head = "factored"
    share = True
    critic_kind = "ippo"

    def __init__(self, num_learners: int, num_levels: int, hidden: int = 64, memory: int = 0):
        self.num_learners, self.num_levels, self.hidden = num_learners, num_levels, hidden
        self.memory_size = int(memory)
        self.actor = EntityActor(num_levels, hidden, self.memory_size)
        self.critic = None if self.memory_size else EntityCritic(hidden)

    @classmethod
    def from_config(cls, cfg, env) -> "EntityActorCritic":
        return cls(env.num_learners, env.nvec[2], cfg.hidden_size, memory_size(cfg))

    @staticmethod
    def seat_obs(state, params, seat, pad_to: int | None = None):
        """The entity view of `seat` (traced ok) in `state`."""
        return observe_one(state, params, seat, pad_to)

    def init(self, key, obs, masks):
        ka, kc, ks = jax.random.split(key, 3)
        if self.memory_size:  # the modules take sequences: one step, zero memory
            carry = jnp.zeros(jax.tree.leaves(obs)[0].shape[:2] + (self.memory_size,))
            resets = jnp.zeros((1,) + carry.shape[:-1], bool)
            return {"actor": self.actor.init(ka, with_time(obs), with_time(masks), ks, None, False, carry, resets)}
        return {"actor": self.actor.init(ka, obs, masks, ks), "critic": self.critic.init(kc, obs)}

    def _actor(self, params, obs, masks, key, action, carry, resets):
        return self.actor.apply(params["actor"], obs, masks, key, action, False, carry, resets)

    def act(self, params, obs, masks, key):
        """Sample -> (action (B, A, 5), log_prob (B, A), entropy (B, A))."""
        self._feedforward("act")
        return self.actor.apply(params["actor"], obs, masks, key)

    def evaluate(self, params, obs, masks, action):
        self._feedforward("evaluate")
        _, log_prob, entropy = self.actor.apply(params["actor"], obs, masks, None, action)
        return log_prob, entropy

    def logits(self, params, obs, masks, action):
        """Masked per-head logits along `action` (dict; "target" over seat rows)."""
        self._feedforward("logits")
        return self.actor.apply(params["actor"], obs, masks, None, action, True)[3]

    def value(self, params, obs):
        self._feedforward("value")
        return self.critic.apply(params["critic"], obs)
