"""See what agents do: record episodes on the device, draw them on the host.

- `collect(env, act, key, num_episodes)`: one jitted `rollout.run` that keeps every state of
  each episode (any act function: a trained policy, NPC heuristics, `random_policy`,
  `transcript_policy` of a text seat's moves) -> `Episode`s.
- `env.render(state)`: a matplotlib figure of one state (the env's `viewer.py`).
- `animate(env, episode_or_states, "run.gif")`: a GIF or MP4 of `env.render` frames (imageio, the
  `viz` extra).
- `write_html(env, episodes, "replay.html")`: an interactive replay in one self-contained file
  (time slider, play button; works offline).

How to make one, and what it shows: docs/replays.md.
"""
from nexus_jax.viz.animate import animate
from nexus_jax.viz.episode import Episode, collect, random_policy, transcript_policy
from nexus_jax.viz.html import acting_seats, replay_data, write_html

__all__ = ["Episode", "acting_seats", "animate", "collect", "random_policy", "replay_data", "transcript_policy",
           "write_html"]
