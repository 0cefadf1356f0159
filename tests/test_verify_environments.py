"""Reinforcement-learning code whose data source is an environment made by
`gym.make(ID)`: when gym is not installed, the verifier synthesizes the
environment with the spaces the ID declares (the program's input, as a
script's synthesized batches are), so the verdict still rests on the user's
code and the evidence names the environment. An ID whose spaces the
verifier does not know stays missing, with a reason naming it.
"""

from __future__ import annotations

import importlib.util
import sys

import numpy as np
import pytest

from conftest import line_of, verifications_by_line, verify_findings
from detachlint.verify.runtime.environments import SynthesizedEnv, make_environment
from detachlint.verify.runtime.standins import Missing

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("gym") is not None, reason="gym is installed: the program's own environment runs"
)

# A small DQN on a pole-balancing task: the replay buffer must fill past a
# batch before the training step (and its `loss.data[0]`, DL103) runs.
DQN_SCRIPT = '''
    import random
    from collections import deque

    import gym
    import numpy as np
    import torch
    from torch import nn

    task = "CartPole-v1"
    env = gym.make(task)


    class QNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = nn.Sequential(nn.Linear(env.observation_space.shape[0], 32), nn.Tanh(), nn.Linear(32, env.action_space.n))

        def forward(self, x):
            return self.body(x)


    qnet = QNet()
    optimizer = torch.optim.SGD(qnet.parameters(), lr=0.01)
    memory = deque(maxlen=500)
    batch = 8
    history = []

    observation = env.reset()
    for step in range(1000):
        if random.random() < 0.3:
            action = env.action_space.sample()
        else:
            action = int(qnet(torch.as_tensor(observation).float().unsqueeze(0)).argmax())
        following, reward, done, info = env.step(action)
        memory.append((observation, action, reward, following, done))
        observation = env.reset() if done else following
        if len(memory) > batch:
            sampled = random.sample(list(memory), batch)
            states = torch.as_tensor(np.stack([s[0] for s in sampled])).float()
            actions = torch.as_tensor([s[1] for s in sampled])
            rewards = torch.as_tensor([s[2] for s in sampled]).float()
            chosen = qnet(states).gather(1, actions.unsqueeze(1)).squeeze(1)
            loss = ((chosen - rewards) ** 2).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            history.append(loss.data[0])
    '''


def test_a_dqn_loop_runs_on_a_synthesized_environment(verifier, tmp_path):
    found = verify_findings(verifier, tmp_path, "dqn.py", DQN_SCRIPT, "DL103")
    verification = found[line_of(DQN_SCRIPT, "history.append(loss.data[0])")]
    assert verification.status == "confirmed", verification.evidence
    assert verification.basis == "user-code"
    assert "invalid index of a 0-dim tensor" in verification.evidence
    assert "the environment `CartPole-v1` synthesized with its observation Box(4,) and 2 actions" in verification.evidence


# An agent class whose sizes come from module-level values read off the
# environment (new step API: five values from `step`, two from `reset`).
AGENT_MODULE = '''
    import gymnasium as gym
    import torch
    from torch import nn
    from torch.autograd import Variable

    env = gym.make("MountainCar-v0", render_mode="rgb_array")
    STATES = env.observation_space.shape[0]
    ACTIONS = env.action_space.n


    class Agent:
        def __init__(self):
            self.net = nn.Linear(STATES, ACTIONS)
            self.buffer = torch.zeros(16, STATES)

        def learn(self):
            states = Variable(self.buffer[:4])
            return self.net(states).max(1)[0].sum()


    def rollout(agent):
        state, info = env.reset(seed=0)
        state, reward, terminated, truncated, info = env.step(env.action_space.sample())
        return agent.learn()
    '''


def test_a_module_level_environment_is_built_for_a_class_that_reads_it(verifier, tmp_path):
    found = verify_findings(verifier, tmp_path, "agent.py", AGENT_MODULE, "DL701")
    verification = found[line_of(AGENT_MODULE, "states = Variable(self.buffer[:4])")]
    assert verification.status == "confirmed", verification.evidence
    assert verification.basis == "user-code"
    assert "the environment `MountainCar-v0` synthesized with its observation Box(2,) and 3 actions" in verification.evidence


def test_an_environment_whose_spaces_are_unknown_stays_inconclusive_naming_it(verifier, tmp_path):
    source = AGENT_MODULE.replace('"MountainCar-v0", render_mode="rgb_array"', '"SomeRobotArm-v7"')
    found = verify_findings(verifier, tmp_path, "arm.py", source, "DL701")
    verification = found[line_of(source, "states = Variable(self.buffer[:4])")]
    assert verification.status == "inconclusive"
    assert "`SomeRobotArm-v7`" in verification.evidence and "does not know" in verification.evidence


def _step_both_ways(env):
    old = env.step(0)
    observation, reward, done, truncated, info = env.step(0)
    return old, observation


def test_the_synthesized_environment_has_the_declared_spaces_and_unpacks_as_the_code_does():
    env = SynthesizedEnv("CartPole-v0")
    assert env.observation_space.shape == (4,) and env.action_space.n == 2
    assert env.unwrapped is env and env.x_threshold == 2.4
    first = env.reset()
    assert isinstance(first, np.ndarray) and first.shape == (4,) and first.dtype == np.float32
    observation, info = env.reset()
    assert observation.shape == (4,) and info == {}
    old, new = _step_both_ways(env)
    assert len(old) == 4 and new.shape == (4,)
    assert env.action_space.sample() in (0, 1)
    # The file's own unpacking decides when it says so.
    assert len(SynthesizedEnv("Pendulum-v1", api="new").step(np.zeros(1))) == 5
    pendulum = SynthesizedEnv("Pendulum-v1", api="old")
    assert pendulum.action_space.shape == (1,) and float(pendulum.action_space.high[0]) == 2.0
    assert pendulum.reset().shape == (3,)


def test_make_environment_runs_the_real_call_when_the_module_imported():
    record, used = {}, {}
    made = make_environment(sys, lambda: "the real one", "CartPole-v1", "env", None, record, used)
    assert made == "the real one" and record == {}
    missing = Missing("gym", "could not be imported", used)
    assert isinstance(make_environment(missing, None, "CartPole-v1", "env", None, record, used), SynthesizedEnv)
    assert record == {"CartPole-v1": "observation Box(4,) and 2 actions"}
    unknown = make_environment(missing, None, "Nowhere-v0", "env", None, record, used)
    assert isinstance(unknown, Missing) and "Nowhere-v0" in vars(unknown)["_dl_reason"]


# A wrapper bound to a lambda: its calls in the file (through the agent's
# method, in the loop on the environment) decide what it wraps.
LAMBDA_SCRIPT = '''
    import gym
    import torch
    import torch.autograd as autograd
    from torch import nn

    ON_GPU = torch.cuda.is_available()
    Wrap = lambda *args, **kwargs: autograd.Variable(*args, **kwargs).cuda() if ON_GPU else autograd.Variable(*args, **kwargs)

    env = gym.make("Acrobot-v1")


    class Agent(nn.Module):
        def __init__(self):
            super().__init__()
            self.q = nn.Linear(env.observation_space.shape[0], env.action_space.n)

        def pick(self, observation):
            return int(self.q(Wrap(torch.as_tensor(observation).float().unsqueeze(0))).argmax())


    agent = Agent()
    observation = env.reset()
    for step in range(50):
        observation, reward, done, info = env.step(agent.pick(observation))
        if done:
            observation = env.reset()
    '''


def test_a_lambda_wrapper_is_judged_on_the_files_own_calls_of_it(verifier, tmp_path):
    found = verifications_by_line(verifier, tmp_path, "lambda.py", LAMBDA_SCRIPT, "DL701")
    by_status = {v.status: v for v in found[line_of(LAMBDA_SCRIPT, "Wrap = lambda")]}
    # The call on the CPU branch ran from `pick`: it wrapped an observation, which has no graph.
    done = by_status["confirmed"]
    assert done.basis == "user-code"
    # Three steps of the loop, one call each.
    assert f"the 3 calls of `Wrap` the run made (from line {line_of(LAMBDA_SCRIPT, 'return int(self.q(Wrap(')}) each wrapped" in done.evidence
    assert "so here the wrapper does nothing" in done.evidence
    assert "the environment `Acrobot-v1` synthesized with its observation Box(6,) and 3 actions" in done.evidence
    # The `.cuda()` branch never ran on the worker's CPU: nothing to judge it on.
    assert "without making this call" in by_status["inconclusive"].evidence


def test_a_lambda_wrapper_that_cuts_a_graph_in_the_files_call_is_confirmed(verifier, tmp_path):
    source = LAMBDA_SCRIPT.replace(
        "return int(self.q(Wrap(torch.as_tensor(observation).float().unsqueeze(0))).argmax())",
        "return int(Wrap(self.q(torch.as_tensor(observation).float().unsqueeze(0))).argmax())",
    )
    found = verifications_by_line(verifier, tmp_path, "cut.py", source, "DL701")
    confirmed = [v for v in found[line_of(source, "Wrap = lambda")] if v.status == "confirmed"]
    assert confirmed and "no gradient flows back through it" in confirmed[0].evidence
    assert "requires_grad=True (grad_fn=AddmmBackward0)" in confirmed[0].evidence
