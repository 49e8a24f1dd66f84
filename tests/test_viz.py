"""nexus_jax.viz and the env viewers: episodes recorded in one scan, figures, animations, the HTML replay.

Small episodes: nexus-v0 with 3 seats and 8 steps (the learner plays a fixed transcript: a
signal it never honours, a vault, a proposal; a grid failure every step), crisis-v0 cut to one
hour (6 steps) with random valid actions. Each is collected once per module. The page test
opens the HTML in Debian's headless Chromium (apt `chromium`) through Playwright's Python
package and moves the slider as a person would; it is skipped only where Chromium is absent.
"""
from __future__ import annotations

import json
import re
import shutil

import imageio.v2 as imageio
import jax
import numpy as np
import pytest
from matplotlib.figure import Figure

import nexus_jax
from nexus_jax import viz
from nexus_jax.envs.crisis import viewer as crisis_viewer
from nexus_jax.envs.nexus import viewer as nexus_viewer
from nexus_jax.protocol import parse

MOVES = ["SIGNAL 1 10E 1C", "VAULT 10C", "PROPOSE 2 5E 5C"] + ["WAIT"] * 5  # seat 0's 8 moves
STEPS = len(MOVES)


@pytest.fixture(scope="module")
def nexus_env():
    return nexus_jax.make("nexus-v0", info_mode="full", num_agents=3, max_steps=STEPS, p_grid_failure=1.0,
                          p_solar_flare=0.0)


@pytest.fixture(scope="module")
def transcript(nexus_env):
    params = nexus_env.default_params
    return np.asarray([[int(nexus_env.encode(parse(m, params=params).action))] for m in MOVES], np.int32)


@pytest.fixture(scope="module")
def nexus_episode(nexus_env, transcript):
    (episode,) = viz.collect(nexus_env, viz.transcript_policy(transcript), jax.random.PRNGKey(7))
    return episode


@pytest.fixture(scope="module")
def crisis_env():
    return nexus_jax.make("crisis-v0", curriculum_level=3, episode_hours=1.0)


@pytest.fixture(scope="module")
def crisis_episodes(crisis_env):
    return viz.collect(crisis_env, viz.random_policy, jax.random.PRNGKey(1), num_episodes=2, num_steps=9)


# ---- collect ----------------------------------------------------------------------------------------

def test_collect_keeps_every_state_of_the_episode_through_its_end(nexus_episode, transcript):
    ep = nexus_episode
    assert len(ep) == STEPS and ep.done
    steps = np.asarray(ep.states.step)
    np.testing.assert_array_equal(steps, np.arange(STEPS + 1))  # the last state is the episode's, not a reset
    np.testing.assert_array_equal(ep.actions, transcript)  # the transcript's moves, in order
    assert ep.rewards.shape == (STEPS, 1) and np.isfinite(ep.rewards).all()
    assert ep.step_info(0) is None and ep.step_info(1)["flows"]["shock_loss"].shape == (3, 2)
    assert float(np.asarray(ep.state(STEPS).vault)[0, 1]) == pytest.approx(10.0)  # VAULT 10C
    with pytest.raises(IndexError, match="0..8"):
        ep.state(STEPS + 1)


def test_collect_cuts_each_episode_where_it_ended(crisis_episodes):
    for ep in crisis_episodes:  # 9 steps asked, the episode is 6 (one hour of 10-minute steps)
        assert len(ep) == 6 and ep.done
        np.testing.assert_array_equal(np.asarray(ep.states.step), np.arange(7))
    assert not np.array_equal(crisis_episodes[0].actions, crisis_episodes[1].actions)  # two episodes' own draws


def test_collect_and_policies_refuse_bad_input(nexus_env):
    with pytest.raises(ValueError, match="num_episodes"):
        viz.collect(nexus_env, viz.random_policy, jax.random.PRNGKey(0), num_episodes=0)
    with pytest.raises(ValueError, match=r"\(T, A\)"):
        viz.transcript_policy(np.zeros(3, np.int32))
    with pytest.raises(TypeError, match="flat"):
        viz.random_policy(jax.random.PRNGKey(0), None, None, {"type": np.ones((1, 1, 8), bool)})


# ---- frames and figures -------------------------------------------------------------------------------

def test_nexus_frame_reads_the_state(nexus_env, nexus_episode):
    ep, t = nexus_episode, STEPS
    state, info = ep.state(t), ep.step_info(t)
    f = nexus_viewer.frame(state, nexus_env.default_params, info)
    assert f["step"] == STEPS and len(f["seats"]) == 3
    np.testing.assert_allclose([s["vault"] for s in f["seats"]], np.asarray(state.vault), atol=0.006)
    np.testing.assert_allclose(f["trust"], np.asarray(state.trust), atol=0.006)
    np.testing.assert_allclose([s["shock_loss"] for s in f["seats"]], np.asarray(info["flows"]["shock_loss"]).sum(1),
                               atol=0.006)
    assert f["shock"]["kind"] == "GRID_FAILURE"
    count = int(state.ledger.count)
    assert [e["id"] for e in f["ledger"]] == list(range(count - 1, count - 1 - len(f["ledger"]), -1))
    assert any(e["kind"] == "BROKEN" and e["actor"] == 0 and e["target"] == 1 for e in f["ledger"])
    assert f["trust"][1][0] < 0.5  # seat 1 trusts the seat that broke its signal to it less
    with pytest.raises(ValueError, match="unbatched"):
        nexus_viewer.frame(ep.states, nexus_env.default_params)


def test_env_render_draws_graph_holdings_and_ledger(nexus_env, nexus_episode):
    ep = nexus_episode
    fig = nexus_env.render(ep.state(STEPS), info=ep.step_info(STEPS))
    assert isinstance(fig, Figure) and len(fig.axes) == 3
    graph, holdings, ledger = fig.axes
    assert len([p for p in graph.patches if type(p).__name__ == "FancyArrowPatch"]) == 3 * 2  # i -> j, i != j
    widths = [round(p.get_width(), 3) for p in holdings.patches]
    assert round(float(np.asarray(ep.state(STEPS).vault)[0, 1]), 3) in widths  # the learner's vault bar
    texts = [t.get_text() for t in ledger.texts]
    assert any("BROKE its signal to agent 1" in s for s in texts)
    assert "SHOCK GRID_FAILURE" in fig._suptitle.get_text()


def test_crisis_render_draws_tasks_cluster_and_negotiation(crisis_env, crisis_episodes):
    ep = crisis_episodes[0]
    fig = crisis_env.render(ep.state(len(ep)))
    timeline, cluster, talk = fig.axes
    labels = [t.get_text() for t in timeline.get_yticklabels()]
    assert "0 load_raw_batch_1" in labels and "2 validate_models" in labels
    assert any(t.get_text().startswith("cpu: ") for t in cluster.texts)
    messages = crisis_viewer.frame(ep.state(len(ep)), crisis_env.default_params)["messages"]
    assert [t.get_text() for t in talk.texts] == messages
    assert [m.split(":")[0] for m in messages[:3]] == ["agent 0 (data_loader)", "agent 1 (data_cleaner)",
                                                        "agent 2 (ml_trainer)"]


# ---- animate ----------------------------------------------------------------------------------------

def test_animate_writes_a_gif_and_an_mp4(tmp_path, nexus_env, nexus_episode):
    gif = viz.animate(nexus_env, nexus_episode, tmp_path / "ep.gif", every=4)
    frames = imageio.mimread(gif)
    assert len(frames) == 3  # states 0, 4, 8
    assert frames[0].shape[:2] == (640, 1120) and not np.array_equal(frames[0], frames[-1])
    stacked = jax.tree.map(lambda x: x[::4], nexus_episode.states)  # plain stacked states work too
    mp4 = viz.animate(nexus_env, stacked, tmp_path / "ep.mp4", fps=2)
    reader = imageio.get_reader(mp4)
    assert reader.count_frames() == 3
    reader.close()
    with pytest.raises(ValueError, match=r"\.gif"):
        viz.animate(nexus_env, nexus_episode, tmp_path / "ep.avi")


# ---- the HTML replay -----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def nexus_page(tmp_path_factory, nexus_env, nexus_episode):
    path = tmp_path_factory.mktemp("replay") / "nexus.html"
    viz.write_html(nexus_env, [nexus_episode], path, title="test </script> replay")
    return path


@pytest.fixture(scope="module")
def crisis_page(tmp_path_factory, crisis_env, crisis_episodes):
    path = tmp_path_factory.mktemp("replay") / "crisis.html"
    viz.write_html(crisis_env, crisis_episodes, path)
    return path


def _data(path):
    text = path.read_text()
    return json.loads(re.search(r'id="replay-data">(.*?)</script>', text, re.S).group(1))


def test_replay_data_holds_frames_actions_and_events(nexus_env, nexus_episode, nexus_page):
    data = _data(nexus_page)
    assert data["kind"] == "nexus" and data["title"] == "test </script> replay"
    (ep,) = data["episodes"]
    assert len(ep["frames"]) == STEPS + 1 and ep["seats"] == [0]
    for t, move in enumerate(MOVES, 1):
        (action,) = ep["frames"][t]["actions"]
        assert action["seat"] == 0 and action["text"] == move  # the text protocol's words for the recorded move
    for f in ep["frames"]:
        assert all(str(i) in ep["events"] for i in f["ledger"])
    assert any(e["kind"] == "BROKEN" for e in ep["events"].values())
    with pytest.raises(ValueError, match="no episodes"):
        viz.replay_data(nexus_env, [])
    with pytest.raises(TypeError, match="Episode"):
        viz.replay_data(nexus_env, [nexus_episode.states])


def test_replay_page_is_self_contained(nexus_page, crisis_page):
    for path in (nexus_page, crisis_page):
        text = path.read_text()
        assert not re.search(r"<(script|link|img)[^>]+(src|href)=\"(?!data:)", text)  # nothing fetched
        assert "https://" not in text and "{{" not in text
        assert text.count("</script>") == 2  # the data block and the script; "</script>" in the data is escaped


# ---- the page, as a person sees it --------------------------------------------------------------------

CHROMIUM_FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync"]


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    chromium = shutil.which("chromium")
    if chromium is None:
        pytest.skip("Debian's chromium is not installed (apt-get install chromium)")
    from playwright.sync_api import sync_playwright  # the dev extra; no `playwright install`: the system's Chromium

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=chromium, headless=True, args=CHROMIUM_FLAGS)
        yield b
        b.close()


def _open(browser, path):
    page = browser.new_page(viewport={"width": 1280, "height": 1000})
    errors = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(path.as_uri())
    return page, errors


def _slide(page, t):
    page.evaluate("(t) => { const s = document.getElementById('step'); s.value = t; s.dispatchEvent(new Event('input')); }", t)


def _edges(page):
    return page.eval_on_selector_all("#trust-graph g.edge", "gs => gs.map(g => [+g.dataset.from, +g.dataset.to, "
                                     "+g.dataset.trust, g.querySelector('path').getAttribute('stroke-width')])")


def test_nexus_replay_page_moves_with_the_slider(browser, nexus_page, tmp_path):
    data = _data(nexus_page)["episodes"][0]
    page, errors = _open(browser, nexus_page)
    assert page.get_attribute("#step", "max") == str(STEPS)
    _slide(page, 0)
    start_edges, start_events = _edges(page), page.inner_text("#events")
    start_radius = page.get_attribute("#trust-graph g.node circle:last-of-type", "r")
    page.screenshot(path=str(tmp_path / "start.png"), full_page=True)
    _slide(page, STEPS)
    end_edges, end_events = _edges(page), page.inner_text("#events")
    assert len(end_edges) == 6 and end_edges != start_edges
    for i, j, trust, _ in end_edges:  # the graph draws the frame's trust matrix
        assert trust == pytest.approx(data["frames"][STEPS]["trust"][i][j], abs=1e-3)
    assert {(i, j): w for i, j, _, w in start_edges}[(1, 0)] != {(i, j): w for i, j, _, w in end_edges}[(1, 0)]
    assert page.get_attribute("#trust-graph g.node circle:last-of-type", "r") != start_radius  # wealth moved
    assert "START" in start_events and "ACTION" in end_events and end_events != start_events
    assert page.locator("#trust-graph .shock-ring").count() > 0  # a grid failure took from the seats
    _slide(page, 1)
    assert "SIGNAL 1 10E 1C" in page.inner_text("#events")
    assert page.locator("#holdings rect.vault").count() == 0
    _slide(page, 2)
    assert page.locator("#holdings rect.vault").count() == 1  # VAULT 10C: the learner's vault bar
    page.click("#play")
    page.wait_for_function("() => +document.getElementById('step').value > 2", timeout=10_000)
    page.screenshot(path=str(tmp_path / "end.png"), full_page=True)
    assert (tmp_path / "end.png").stat().st_size > 20_000
    assert errors == []
    page.close()


def test_crisis_replay_page_moves_with_the_slider(browser, crisis_page):
    page, errors = _open(browser, crisis_page)
    assert page.locator("#episode option").count() == 2
    _slide(page, 0)
    runs_start, cursor_start = page.locator("#timeline rect.run").count(), page.get_attribute("#timeline .cursor", "x1")
    events_start = page.inner_text("#events")
    _slide(page, 6)
    assert page.get_attribute("#timeline .cursor", "x1") != cursor_start
    assert page.inner_text("#events") != events_start and "ACTION" in page.inner_text("#events")
    runs_end = page.locator("#timeline rect.run").count()
    frames = _data(crisis_page)["episodes"][0]["frames"]
    ran = np.array([[after["progress_min"] > before["progress_min"] for before, after in
                     zip(frames[k - 1]["tasks"], frames[k]["tasks"])] for k in range(1, 7)])  # (steps, tasks)
    spells = int(ran[0].sum() + (ran[1:] & ~ran[:-1]).sum())
    assert spells > 0 and (runs_start, runs_end) == (0, spells)  # one bar per spell of steps a task made progress
    page.select_option("#episode", "1")
    assert page.get_attribute("#step", "value") == "0"
    assert errors == []
    page.close()
