"""The interactive HTML replay: one self-contained file (inline CSS, JS, SVG and data) that works offline.

`write_html(env, episodes, path)` writes the episodes recorded by `collect` as a page with a
time slider, a play button and an episode selector. For nexus-v0 (and its variants): the trust
graph (seats as nodes sized by liquid wealth and coloured by archetype, arrows by trust, the
seats a shock took from ringed in red), holdings / escrow / vault bars per seat, the step's
actions and public events (proposals, trades, rejects, signals, honoured and broken signals,
force majeure, shocks), the public ledger, and each seat's vault and utility over the episode.
For crisis-v0: the tasks by seat on an hours axis against their deadlines (when each ran, when
it finished), the cluster's use against its capacity, the trust graph, and the step's actions,
requests, yields, outcomes and contracts. The frames are the env viewers' (`envs/*/viewer.py`),
the action text the text protocol's (`protocol.seats`).
"""
from __future__ import annotations

import html
import json
import re
from importlib import resources
from pathlib import Path
from typing import Any, Optional, Sequence

import numpy as np

from nexus_jax.protocol.seats import text_seat
from nexus_jax.viz.episode import Episode

PLACEHOLDER = re.compile(r"\{\{TITLE\}\}|\{\{DATA\}\}|/\*\{\{STYLE\}\}\*/|/\*\{\{SCRIPT\}\}\*/")


def acting_seats(env) -> list:
    """Seat indices of `env.agents` (the seats an episode's actions are for)."""
    return list(env.learner_seats) if env.spec.npc_seats else list(range(len(env.agents)))


def replay_data(env, episodes: Sequence[Episode], params: Any = None, title: Optional[str] = None,
                labels: Optional[Sequence[str]] = None) -> dict:
    """What the page shows, as JSON-ready data: per episode its frames (state 0..T), each with the actions,
    rewards and (nexus) ledger events of the step that led to it."""
    if not episodes:
        raise ValueError("replay_data: no episodes to show")
    if labels is not None and len(labels) != len(episodes):
        raise ValueError(f"replay_data: {len(labels)} labels for {len(episodes)} episodes")
    text, viewer = text_seat(env), env.spec.viewer
    if viewer is None:
        raise ValueError(f"replay_data: {type(env).__name__} declares no viewer (env.spec.viewer)")
    params = env.default_params if params is None else params
    seats = acting_seats(env)
    out = []
    for e, ep in enumerate(episodes):
        if not isinstance(ep, Episode):
            raise TypeError(f"replay_data: episode {e} is a {type(ep).__name__}, not an Episode (nexus_jax.viz.collect)")
        frames = [viewer.frame(ep.state(t), params, ep.step_info(t)) for t in range(len(ep) + 1)]
        for t in range(1, len(ep) + 1):
            rows = text.rows(ep.actions[t - 1])
            frames[t]["actions"] = [{"seat": s, "text": text.format(row, s)} for s, row in zip(seats, rows)]
            frames[t]["rewards"] = np.round(ep.rewards[t - 1].astype(np.float64), 3).tolist()
        events = {}
        for f in frames:  # each ledger event once; a frame lists its ring's event ids, newest first
            for ev in f.get("ledger", ()):
                events[ev["id"]] = {k: v for k, v in ev.items() if k != "id"}
            if "ledger" in f:
                f["ledger"] = [ev["id"] for ev in f["ledger"]]
        ret = ep.rewards.sum(0)
        label = labels[e] if labels is not None else (
            f"episode {e}: {len(ep)} steps, return " + ", ".join(f"{r:.1f}" for r in ret))
        out.append({"label": label, "seats": seats, "return": np.round(ret.astype(np.float64), 2).tolist(),
                    "frames": frames, "events": events})
    return {"kind": viewer.KIND, "title": title or viewer.TITLE, "palette": viewer.palette(), "episodes": out}


def page(data: dict) -> str:
    """The self-contained HTML page of `replay_data`'s data."""
    assets = resources.files("nexus_jax.viz") / "assets"
    try:
        payload = json.dumps(data, allow_nan=False, separators=(",", ":"))
    except ValueError as e:
        raise ValueError(f"replay data holds NaN or inf, which a page cannot show ({e})") from None
    payload = payload.replace("<", "\\u003c")  # no "</script>" can end the data block early
    fill = {"{{TITLE}}": html.escape(data["title"]), "{{DATA}}": payload,
            "/*{{STYLE}}*/": (assets / "replay.css").read_text(encoding="utf-8"),
            "/*{{SCRIPT}}*/": (assets / "replay.js").read_text(encoding="utf-8")}
    template = (assets / "replay.html").read_text(encoding="utf-8")
    return PLACEHOLDER.sub(lambda m: fill[m.group(0)], template)  # one pass: no inserted text is read again


def write_html(env, episodes: Sequence[Episode], path, params: Any = None, title: Optional[str] = None,
               labels: Optional[Sequence[str]] = None) -> Path:
    """Write the replay page of `episodes` (from `collect` on `env`, stepped with `params`) to `path`."""
    path = Path(path)
    path.write_text(page(replay_data(env, episodes, params, title, labels)), encoding="utf-8")
    return path
