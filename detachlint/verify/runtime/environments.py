"""Reinforcement-learning environments a program makes with `gym.make(ID)`.

An RL program's environment is its data source, as a dataset is for
supervised code: when gym (or gymnasium) is not importable, the
environment is synthesized with the observation and action spaces its ID
really declares (`ENVIRONMENTS`, facts about well-known IDs), and its
observations, rewards and `done` flags are the program's input, as
synthesized batches are. An ID not in the table stays missing, with a
reason naming it.
"""

import dis
import math
import sys

import numpy as np

from detachlint.verify.runtime.standins import Missing


_MAX = float(np.finfo(np.float32).max)
_INF = float("inf")


def _box(low, high, dtype="float32"):
    return ("box", tuple(low), tuple(high), dtype)


def _discrete(n):
    return ("discrete", n)


_CARTPOLE = {
    "observation": _box([-4.8, -_MAX, -0.41887903, -_MAX], [4.8, _MAX, 0.41887903, _MAX]),
    "action": _discrete(2),
    # The thresholds its `step` ends an episode at, which programs read for reward shaping.
    "attributes": {"x_threshold": 2.4, "theta_threshold_radians": 12 * 2 * math.pi / 360},
}
_MOUNTAIN_CAR_OBSERVATION = _box([-1.2, -0.07], [0.6, 0.07])
_PENDULUM = {"observation": _box([-1.0, -1.0, -8.0], [1.0, 1.0, 8.0]), "action": _box([-2.0], [2.0])}
_LUNAR_LANDER_OBSERVATION = _box([-_INF] * 8, [_INF] * 8)


def _mujoco(observations, actions):
    return {"observation": _box([-_INF] * observations, [_INF] * observations, "float64"), "action": _box([-1.0] * actions, [1.0] * actions)}


# Facts: the spaces each well-known ID declares (classic control, Box2D, toy text, MuJoCo locomotion).
ENVIRONMENTS = {
    "CartPole-v0": _CARTPOLE,
    "CartPole-v1": _CARTPOLE,
    "MountainCar-v0": {"observation": _MOUNTAIN_CAR_OBSERVATION, "action": _discrete(3)},
    "MountainCarContinuous-v0": {"observation": _MOUNTAIN_CAR_OBSERVATION, "action": _box([-1.0], [1.0])},
    "Acrobot-v1": {
        "observation": _box([-1.0, -1.0, -1.0, -1.0, -4 * math.pi, -9 * math.pi], [1.0, 1.0, 1.0, 1.0, 4 * math.pi, 9 * math.pi]),
        "action": _discrete(3),
    },
    "Pendulum-v0": _PENDULUM,
    "Pendulum-v1": _PENDULUM,
    "LunarLander-v2": {"observation": _LUNAR_LANDER_OBSERVATION, "action": _discrete(4)},
    "LunarLanderContinuous-v2": {"observation": _LUNAR_LANDER_OBSERVATION, "action": _box([-1.0, -1.0], [1.0, 1.0])},
    "FrozenLake-v0": {"observation": _discrete(16), "action": _discrete(4)},
    "FrozenLake-v1": {"observation": _discrete(16), "action": _discrete(4)},
    "Taxi-v2": {"observation": _discrete(500), "action": _discrete(6)},
    "Taxi-v3": {"observation": _discrete(500), "action": _discrete(6)},
    "HalfCheetah-v2": _mujoco(17, 6),
    "HalfCheetah-v3": _mujoco(17, 6),
    "HalfCheetah-v4": _mujoco(17, 6),
    "Hopper-v2": _mujoco(11, 3),
    "Hopper-v3": _mujoco(11, 3),
    "Hopper-v4": _mujoco(11, 3),
    "Walker2d-v2": _mujoco(17, 6),
    "Walker2d-v3": _mujoco(17, 6),
    "Walker2d-v4": _mujoco(17, 6),
}

# Steps after which a synthesized episode ends (`done`), so code on both sides of `if done:` runs.
EPISODE_STEPS = 5


class Box:
    def __init__(self, low, high, dtype, generator):
        self.dtype = np.dtype(dtype)
        self.low, self.high = np.array(low, dtype=self.dtype), np.array(high, dtype=self.dtype)
        self.shape = self.low.shape
        self._generator = generator

    def sample(self):
        # Uniform where bounded; unbounded coordinates near zero.
        low, high = np.maximum(self.low, -1.0), np.minimum(self.high, 1.0)
        return self._generator.uniform(low, high).astype(self.dtype)

    def contains(self, value):
        value = np.asarray(value)
        return value.shape == self.shape and bool(np.all(value >= self.low) and np.all(value <= self.high))

    def seed(self, seed=None):
        self._generator = np.random.default_rng(seed)
        return [seed]

    def __repr__(self):
        return f"Box({', '.join(map(str, self.shape))},)"


class Discrete:
    def __init__(self, n, generator):
        self.n = n
        self.shape = ()
        self.dtype = np.dtype("int64")
        self._generator = generator

    def sample(self):
        return int(self._generator.integers(self.n))

    def contains(self, value):
        try:
            return 0 <= int(value) < self.n
        except (TypeError, ValueError):
            return False

    def seed(self, seed=None):
        self._generator = np.random.default_rng(seed)
        return [seed]

    def __repr__(self):
        return f"Discrete({self.n})"


def unpacked_into(frame):
    """n when the call the frame is making is unpacked into n targets
    (`UNPACK_SEQUENCE n` right after it), else None."""
    try:
        following = (i for i in dis.get_instructions(frame.f_code) if i.offset > frame.f_lasti and i.opname != "CACHE")
        instruction = next(following, None)
    except Exception:
        return None
    return instruction.arg if instruction is not None and instruction.opname == "UNPACK_SEQUENCE" else None


def _space(fact, generator):
    if fact[0] == "discrete":
        return Discrete(fact[1], generator)
    return Box(fact[1], fact[2], fact[3], generator)


def describe(env_id):
    """`observation Box(4,) and 2 actions`: the spaces the evidence names."""
    fact = ENVIRONMENTS[env_id]
    observation, action = fact["observation"], fact["action"]
    seen = f"observation Box({len(observation[1])},)" if observation[0] == "box" else f"observation Discrete({observation[1]})"
    acted = f"{action[1]} actions" if action[0] == "discrete" else f"action Box({len(action[1])},)"
    return f"{seen} and {acted}"


class SynthesizedEnv:
    """An environment with the spaces its ID declares. `api` is how the
    program unpacks it: "old" (`obs = reset()`, `obs, reward, done, info =
    step(a)`), "new" (`obs, info = reset()`, five values from `step`), or
    None to read each call's own unpacking."""

    metadata = {"render_modes": []}
    reward_range = (-_INF, _INF)

    def __init__(self, env_id, api=None):
        fact = ENVIRONMENTS[env_id]
        self.spec_id = env_id
        self._api = api
        self._generator = np.random.default_rng(0)
        self.observation_space = _space(fact["observation"], self._generator)
        self.action_space = _space(fact["action"], self._generator)
        for name, value in fact.get("attributes", {}).items():
            setattr(self, name, value)
        self._steps = 0

    @property
    def unwrapped(self):
        return self

    @property
    def env(self):
        return self

    def _new_api(self, frame, new_count):
        if self._api is not None:
            return self._api == "new"
        return unpacked_into(frame) == new_count

    def seed(self, seed=None):
        self._generator = np.random.default_rng(seed)
        self.observation_space.seed(seed)
        self.action_space.seed(seed)
        return [seed]

    def reset(self, seed=None, options=None, **kwargs):
        if seed is not None:
            self.seed(seed)
        self._steps = 0
        observation = self.observation_space.sample()
        return (observation, {}) if self._new_api(sys._getframe(1), 2) else observation

    def step(self, action):
        self._steps += 1
        observation = self.observation_space.sample()
        reward = float(self._generator.uniform(-1.0, 1.0))
        done = self._steps >= EPISODE_STEPS
        if self._new_api(sys._getframe(1), 5):
            return observation, reward, done, False, {}
        return observation, reward, done, {}

    def render(self, *args, **kwargs):
        return None

    def close(self):
        return None

    def __repr__(self):
        return f"<synthesized environment {self.spec_id}>"


def make_environment(module, make, env_id, name, api, record, used):
    """What `name = gym.make(env_id)` binds: the real environment when the
    module imported (`make` runs the program's own call), else one
    synthesized from the ID's facts (recorded for the evidence), else a
    `Missing` whose reason names the ID."""
    if not isinstance(module, Missing):
        return make()
    if env_id not in ENVIRONMENTS:
        reason = f"is the environment `{env_id}`, whose observation and action spaces the verifier does not know (gym is not installed)"
        return Missing(name, reason, used)
    record[env_id] = describe(env_id)
    return SynthesizedEnv(env_id, api)
