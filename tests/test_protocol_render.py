"""render(): the prompt text shows what the agent sees (built from hand-set states, no jit)."""
import jax
import numpy as np
import pytest

from nexus_jax.envs.nexus import core
from nexus_jax.envs.nexus.observation import observe
from nexus_jax.envs.nexus.constants import ErrorCode, EventKind, Outcome, Shock
from nexus_jax.envs.nexus.params import NexusParams
from nexus_jax.protocol import parse, render
from nexus_jax.protocol.render import ERROR_MESSAGES, OUTCOME_MESSAGES, render_event


def numpy_state(params):
    """A reset-like NexusState with NumPy leaves, built without compiling anything (render reads any arrays)."""
    shapes = jax.eval_shape(lambda k: core.reset(k, params)[1], jax.random.PRNGKey(0))
    st = jax.tree.map(lambda x: np.zeros(x.shape, x.dtype), shapes)
    arch = np.asarray(params.archetypes)
    return st.replace(
        available=np.asarray(params.endowment, np.float32)[arch],
        collateral=np.full(params.num_agents, 20.0, np.float32),
        archetype=arch,
        trust=np.full((params.num_agents,) * 2, 0.5, np.float32),
        ledger=st.ledger.replace(target=st.ledger.target - 1),
    )


@pytest.fixture(scope="module")
def base():
    params = NexusParams.create()
    return params, numpy_state(params)


def _set(arr, idx, value):
    out = np.array(arr)
    out[idx] = value
    return out


def test_initial_prompt_sections(base):
    params, state = base
    text = render(state, 0, params)
    for needle in ["you are agent 0 (LEARNER)", "step 0 of 100", "Shock: none active", "Your resources:",
                   "collateral 20", "BULLY", "ALTRUIST", "TIT_FOR_TAT", "Proposals to you: none",
                   "Your proposals: none", "Open signals: none", "Public ledger: empty",
                   "PROPOSE <agent>", "Amount levels: 0, 1, 2, 5, 10, 20, 40"]:
        assert needle in text, needle
    assert "INVALID" not in text  # step 0: no last action yet
    assert "PROPOSE <agent>" not in render(state, 0, params, include_help=False)
    assert render(state, "agent_2", params).startswith("=== Protocol: Nexus | you are agent 2 (ALTRUIST)")
    with pytest.raises(ValueError):
        render(state, 4, params)


def test_own_resources_and_trust_both_ways(base):
    params, state = base
    trust = _set(_set(state.trust, (0, 3), 0.9), (3, 0), 0.1)
    st = state.replace(available=_set(state.available, 0, np.array([12.0, 34.0])),
                       escrow=_set(state.escrow, (0, 0), 5.0), vault=_set(state.vault, (0, 1), 7.0),
                       collateral=_set(state.collateral, 0, 17.5), tax_immunity=_set(state.tax_immunity, 0, 3),
                       trust=trust)
    text = render(st, 0, params)
    assert "available  E 12  C 34" in text
    assert "in escrow  E 5  C 0" in text
    assert "vault      E 0  C 7" in text
    assert "collateral 17.50   tax immunity 3 step(s)   utility min(E, C liquid) = 17" in text
    row3 = next(ln for ln in text.splitlines() if ln.strip().startswith("3 "))
    assert row3.split()[-2:] == ["0.90", "0.10"]  # my trust in 3, 3's trust in me


def busy_state(params, state):
    """Proposals both ways, a signal between others, a trade and a shock in the ledger, an error."""
    n = params.num_agents
    p = state.proposals
    p = p.replace(active=_set(_set(_set(np.zeros((n, n), bool), (1, 0), True), (0, 2), True), (3, 0), True),
                  give=_set(_set(_set(np.zeros((n, n)), (1, 0), 20.0), (0, 2), 10.0), (3, 0), 1.0),
                  want=_set(_set(_set(np.zeros((n, n)), (1, 0), 5.0), (0, 2), 2.0), (3, 0), 1.0),
                  resource=_set(np.zeros((n, n), np.int32), (0, 2), 1),
                  age=_set(_set(np.zeros((n, n), np.int32), (1, 0), 1), (3, 0), 3))
    s = state.signals
    s = s.replace(active=_set(s.active, (2, 1), True), give=_set(s.give, (2, 1), 5.0),
                  want=_set(s.want, (2, 1), 10.0), resource=_set(s.resource, (2, 1), 1), age=_set(s.age, (2, 1), 2))
    lg = state.ledger
    lg = lg.replace(step=_set(_set(lg.step, (0), 4), (1), 4), kind=_set(_set(lg.kind, (0), EventKind.TRADE), (1), EventKind.SHOCK),
                    actor=_set(_set(lg.actor, (0), 1), (1), -1), target=_set(lg.target, (0), 0),
                    amount_1=_set(_set(lg.amount_1, (0), 20.0), (1), 33.0), amount_2=_set(lg.amount_2, (0), 5.0),
                    resource=_set(lg.resource, (1), 1), head=np.int32(2), count=np.int32(2))
    st = state.replace(proposals=p, signals=s, ledger=lg, step=np.int32(5), shock_kind=np.int32(Shock.GRID_FAILURE),
                       shock_remaining=np.int32(1), last_error=_set(state.last_error, 0, ErrorCode.NO_PROPOSAL),
                       last_outcome=_set(state.last_outcome, (0, Outcome.MY_PROPOSAL_REJECTED), True))
    return st


def test_proposals_signals_shock_ledger_and_errors(base):
    params, state = base
    st = busy_state(params, state)
    text = render(st, 0, params, feedback="could not be read (UNKNOWN_COMMAND: ...)")
    assert "SHOCK ACTIVE: GRID_FAILURE (hits Compute), 1 step(s) left" in text
    assert "Your last reply: could not be read (UNKNOWN_COMMAND" in text
    assert f"INVALID (NO_PROPOSAL: {ERROR_MESSAGES[ErrorCode.NO_PROPOSAL]})" in text
    assert OUTCOME_MESSAGES[Outcome.MY_PROPOSAL_REJECTED] in text
    assert "from agent 1: they give 20E, you give 5C; can be accepted for 2 more step(s)" in text
    assert "from agent 3: they give 1E, you give 1C; too late to accept" in text
    assert "to agent 2: you give 10C for 2E; 3 more step(s) to be accepted" in text
    assert "agent 2 -> agent 1: at least 5C for at most 10E; 3 step(s) left to honour" in text
    ledger = text.split("Public ledger (newest first, last 2):")[1].splitlines()
    assert ledger[1].strip() == "step 4: shock GRID_FAILURE: 33C lost in total"
    assert ledger[2].strip() == "step 4: trade: agent 1 gave 20E to you for 5C"
    # what the prompt offers can be typed back: the suggested ACCEPT parses
    assert parse("ACCEPT 1").ok


@pytest.mark.parametrize("kind", [k for k in EventKind if k != EventKind.EMPTY])
def test_every_event_kind_renders(kind):
    line = render_event(3, kind, 0, 1, 10.0, 5.0, 0, me=0)
    assert line.startswith("step 3: ") and len(line) > 10
    assert "you" in line or kind in (EventKind.SHOCK,)


def test_render_from_observation_vector(base):
    """render(obs) decodes the env's observation layout; it matches render(state) but for what obs lacks."""
    params, state = base
    st = busy_state(params, state)
    st = st.replace(withdrawals=_set(st.withdrawals, (0, 1, 1), 5.0),
                    signals=st.signals.replace(active=_set(st.signals.active, (0, 3), True),
                                               give=_set(st.signals.give, (0, 3), 10.0),
                                               want=_set(st.signals.want, (0, 3), 5.0)))
    obs = np.asarray(jax.jit(observe)(st, params))
    for me in (0, 2):
        from_state = render(st, me, params).splitlines()
        from_obs = render(obs[me], None, params).splitlines()
        assert render(obs, me, params).splitlines() == from_obs
        # an observation holds only my own signals, and withdrawals without their arrival step
        drop = lambda lines: [ln for ln in lines if "withdrawals" not in ln  # noqa: E731
                              and not (ln.startswith("  agent ") and "->" in ln and "you" not in ln)]
        assert drop(from_obs) == drop(from_state)
    assert "withdrawals on the way: E 0  C 5" in render(obs[0], None, params)
    with pytest.raises(ValueError):
        render(obs[0], 1, params)  # the vector says whose it is
