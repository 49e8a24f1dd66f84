"""The capability surface (`nexus_jax.base.spec.EnvSpec`): what each env declares, that it is true of the env,
and that the consumers (text seats, play, adapters, trainers) act on the declaration, not on the env's type."""
import re
from pathlib import Path

import jax
import numpy as np
import pytest

import nexus_jax
from nexus_jax.base import EnvSpec, MultiAgentEnv
from nexus_jax.envs.crisis import RULES, avail_actions
from nexus_jax.envs.nexus import BASELINES, NPC_ARCHETYPES, Archetype, encode, seat_masks
from nexus_jax.play import default_others, edf_others, make_env, resolve_others, wait_others
from nexus_jax.protocol import render
from nexus_jax.protocol.seats import TEXT_SEATS, text_seat
from train.learner_env import LearnerEnv


@pytest.mark.parametrize("env_id", nexus_jax.registered_envs())
def test_every_env_declares_what_it_is(env_id):
    env = nexus_jax.make(env_id)
    spec = env.spec
    assert spec.action_formats[0] == env.action_format  # made with its default format
    assert spec.text_protocol in TEXT_SEATS
    assert spec.npc_seats == hasattr(env, "learner_seats")
    assert ("structured" in spec.action_formats) == hasattr(env, "factored_action_masks")
    assert spec.entity_obs == hasattr(env, "entity_obs")
    assert (spec.slot_layout is None) == env_id.startswith("nexus")
    if spec.slot_layout is not None:  # slot k's REQUEST and its features are where the layout says
        lay = spec.slot_layout
        assert lay.obs_offset + lay.slots * lay.features <= env.obs_dim
        assert lay.first_request + lay.slots * lay.actions_per_slot == env.num_actions


def _one_id_per_env_class() -> list[str]:
    first = {}
    for env_id in nexus_jax.registered_envs():
        first.setdefault(type(nexus_jax.make(env_id)), env_id)
    return sorted(first.values())


@pytest.mark.parametrize("env_id", _one_id_per_env_class())
def test_the_heuristics_rows_are_actions_of_the_format_the_spec_names(env_id):
    """`spec.heuristic_format`: an env made in it takes a heuristic's rows as its seats' actions (train.replay and
    the play loop make the env so)."""
    spec = nexus_jax.make(env_id).spec
    env = nexus_jax.make(env_id, **({"action_format": spec.heuristic_format}
                                    if spec.heuristic_format != spec.action_formats[0] else {}))
    state = jax.eval_shape(env.reset, jax.random.PRNGKey(0))[1]
    for name in sorted(spec.heuristics)[:1]:
        rows = jax.eval_shape(spec.heuristics[name], jax.random.PRNGKey(0), state, env.default_params)
        assert rows.shape[1:] == tuple(env.action_space(env.agents[0]).shape), name


def test_the_plainest_env_declares_nothing_and_bad_specs_fail():
    spec = MultiAgentEnv.spec
    assert spec == EnvSpec() and spec.action_formats == ("flat",) and not spec.npc_seats
    assert spec.heuristics == {} and spec.text_protocol is None and spec.slot_layout is None
    with pytest.raises(ValueError, match="action_formats"):
        EnvSpec(action_formats=("factored",))
    with pytest.raises(ValueError, match="reference_heuristic"):
        EnvSpec(reference_heuristic="edf")
    with pytest.raises(ValueError, match="heuristic_format"):
        EnvSpec(heuristic_format="structured")
    with pytest.raises(TypeError):
        nexus_jax.make("crisis-v0").spec.heuristics["mine"] = None  # read-only
    with pytest.raises(ValueError, match="edf_chain"):  # names what there is
        nexus_jax.make("crisis-v0").spec.heuristic("fcfs")


def test_text_seat_is_the_protocol_the_spec_names():
    class Plain(MultiAgentEnv):
        pass

    with pytest.raises(ValueError, match="no text protocol for Plain"):
        text_seat(Plain(None, ["agent_0"]))
    assert type(text_seat(nexus_jax.make("crisis-v0"))) is TEXT_SEATS["crisis"]
    assert text_seat(nexus_jax.make("nexus-v0")).action_format == "structured"


def test_the_nexus_text_seat_reads_compact_indices_through_its_seat_table():
    """A compact index names one action of its seat (relative targets), never REJECT or SIGNAL; read as a flat
    index it would be another action (the replay of a compact policy showed those before)."""
    env = nexus_jax.make("nexus-v0", action_format="compact", learner_seats=(2,))
    seat, k = text_seat(env), env.action_space(env.agents[0]).n
    rows = np.concatenate([seat.rows(np.array([i])) for i in range(k)])
    assert rows.shape == (k, 5) and len({tuple(r) for r in rows}) == k
    assert tuple(rows[0]) == (0, 0, 0, 0, 0)  # index 0: WAIT
    named = {int(t) for t in rows[:, 0]}
    assert not {"REJECT", "SIGNAL"} & {seat.format(r, 2).split()[0] for r in rows} and len(named) == 6
    assert all(int(r[1]) != 2 for r in rows if seat.format(r, 2).split()[0] in ("ACCEPT", "PROPOSE"))
    assert not all((rows == text_seat(nexus_jax.make("nexus-v0", learner_seats=(2,))).rows(np.arange(k))).ravel())


def test_nexus_heuristics_are_its_scripted_baselines():
    """The NPC archetypes and the other scripted baselines (`npc.scripted.BASELINES`: the vault hedge, the passive
    holders), each in every seat."""
    env = nexus_jax.make("nexus-selfplay-v0")
    assert sorted(env.spec.heuristics) == sorted(b.name for b in BASELINES)
    assert {Archetype(a).name.lower() for a in NPC_ARCHETYPES} <= set(env.spec.heuristics)
    p = env.default_params
    _, s = env.reset(jax.random.PRNGKey(0))
    rows = jax.jit(env.spec.heuristic("cheater"))(jax.random.PRNGKey(1), s, p)
    assert rows.shape == (4, 5) and rows.dtype == np.int32
    flat = np.asarray(encode(rows, p.num_agents, p.num_levels))
    assert np.asarray(seat_masks(s, p))[np.arange(4), flat].all()  # an NPC never plays an invalid action


def test_play_asks_the_env_what_plays_the_other_seats():
    crisis, nexus = make_env(env_id="crisis-v0"), nexus_jax.make("nexus-v0")
    assert default_others(crisis) == "edf" and default_others(nexus) == "npc"
    assert resolve_others("edf_chain", crisis) is not None and resolve_others("wait", nexus) is wait_others
    with pytest.raises(ValueError, match="others must be one of .*'random'.*'reciprocator'"):
        resolve_others("edf", nexus)
    _, s = crisis.reset(jax.random.PRNGKey(0))
    rows = edf_others(None, s, crisis)
    assert rows.shape == (3, 1)
    np.testing.assert_array_equal(rows[:, 0], RULES["edf"](s, avail_actions(s, crisis.default_params),
                                                           crisis.default_params))
    selfplay = make_env(seat=1, npcs=False)  # every seat external: a heuristic plays the other three
    _, s = selfplay.reset(jax.random.PRNGKey(0))
    assert resolve_others("cheater", selfplay)(jax.random.PRNGKey(1), s, selfplay).shape == (4, 5)


def test_make_env_builds_the_id_asked_for_in_the_text_format():
    env = make_env(seat=2, env_id="nexus-mixed-v0")
    assert env.num_agents == 1 and env.agents == ["agent_2"] and env.default_params.num_agents == 6
    assert env.action_format == "structured" and env.info_mode == "full"
    assert make_env(npcs=False).agents == [f"agent_{i}" for i in range(4)]
    crisis = make_env(seat=2, npcs=True, env_id="crisis-v0")  # no NPC seats: every seat the caller's
    assert crisis.agents == ["agent_0", "agent_1", "agent_2"] and crisis.action_format == "flat"


def test_learner_env_takes_the_structured_format_for_factored_heads():
    assert LearnerEnv.make("nexus-v0").env.action_format == "structured"
    assert LearnerEnv.make("nexus-v0", action_head="flat").env.action_format == "flat"
    assert LearnerEnv.make("nexus-v0", {"action_format": "structured"}).env.action_format == "structured"
    with pytest.raises(ValueError, match="no factored action view"):
        LearnerEnv.make("crisis-v0")
    assert LearnerEnv.make("crisis-v0", action_head="flat").slot_layout.deadline == 8


def test_adapters_render_the_env_text_protocol():
    pytest.importorskip("pettingzoo")
    from nexus_jax.adapters.pettingzoo import NexusParallelEnv

    crisis = NexusParallelEnv("crisis-v0", render_mode="ansi")
    crisis.reset(seed=0)
    text = crisis.render()
    assert text.count("Valid actions now") == 3 and "load_raw_batch_1" in text  # one prompt per seat
    nexus = NexusParallelEnv("nexus-v0", render_mode="ansi")
    nexus.reset(seed=0)
    assert nexus.render() == render(nexus.state_jax, 0, nexus.jax_env.default_params, include_help=False)


ENV_TYPE_BRANCH = re.compile(r"""isinstance\([^)]*(Crisis|Nexus)\w*Env|\bis_nexus\b|\bis_crisis\b|"""
                             r"""(env_id|\.id)\.startswith\(|env_id\s*==\s*["'](nexus|crisis)""")


def test_no_code_outside_the_env_packages_branches_on_an_envs_type_or_id():
    """Consumers ask `env.spec`; a branch on the class or the id string would miss the next env."""
    root = Path(__file__).resolve().parent.parent
    found = [f"{p.relative_to(root)}:{i + 1}: {line.strip()}"
             for folder in ("nexus_jax", "train", "experiments", "bench") for p in sorted((root / folder).rglob("*.py"))
             if "envs" not in p.relative_to(root).parts and not p.name.startswith("test_")
             for i, line in enumerate(p.read_text().splitlines()) if ENV_TYPE_BRANCH.search(line)]
    assert not found, "\n".join(found)
