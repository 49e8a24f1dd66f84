"""Animations of recorded states: one `env.render` figure per state, written as a GIF or an MP4 by imageio.

imageio is the `viz` extra (`pip install nexus-jax[viz]`; MP4 also needs its ffmpeg plugin,
`imageio-ffmpeg`, in the same extra); it is imported when an animation is written.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import jax
import numpy as np

from nexus_jax.viz.episode import Episode

FORMATS = (".gif", ".mp4")


def figure_pixels(fig) -> np.ndarray:
    """(H, W, 3) uint8 RGB of a matplotlib Figure."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    return np.asarray(canvas.buffer_rgba())[..., :3].copy()


def animate(env, states: Any, path, fps: float = 4.0, params: Any = None, every: int = 1,
            infos: Optional[Any] = None) -> Path:
    """Write one `env.render` frame per state to `path` (.gif or .mp4, by its suffix).

    `states`: an `Episode` (from `collect`; its step infos mark shocked seats) or a state pytree
    stacked over a leading time axis. `every`: draw every k-th state (the last one always).
    `infos` (optional, with stacked states): the info of the step before each state, leaves
    stacked like the states. Returns the path written.
    """
    path = Path(path)
    if path.suffix.lower() not in FORMATS:
        raise ValueError(f"animate: path must end in one of {FORMATS}, got {str(path)!r}")
    if every < 1 or fps <= 0:
        raise ValueError(f"animate: every must be >= 1 and fps > 0, got every={every}, fps={fps}")
    if isinstance(states, Episode):
        count = len(states) + 1
        state_at, info_at = states.state, states.step_info
    else:
        leaves = jax.tree.leaves(states)
        if not leaves or np.ndim(leaves[0]) == 0:
            raise ValueError("animate: states must be an Episode or a state pytree stacked over a leading time axis")
        count = int(np.shape(leaves[0])[0])
        state_at = lambda t: jax.tree.map(lambda x: x[t], states)  # noqa: E731
        info_at = (lambda t: None) if infos is None else (lambda t: jax.tree.map(lambda x: x[t], infos))  # noqa: E731
    picks = sorted(set(range(0, count, every)) | {count - 1})
    frames = []
    for t in picks:
        fig = env.render(state_at(t), params, info_at(t))
        frames.append(figure_pixels(fig))
    import imageio.v2 as imageio  # the viz extra

    if path.suffix.lower() == ".gif":
        imageio.mimwrite(path, frames, duration=1000.0 / fps, loop=0)
    else:
        imageio.mimwrite(path, frames, fps=fps, macro_block_size=1)
    return path
