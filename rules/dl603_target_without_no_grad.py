from __future__ import annotations

from typing import Set

import libcst as cst

from detachlint.analysis.names import dotted
from detachlint.analysis.vocabulary import DETACHING_METHODS, NO_GRAPH_METHODS
from detachlint.rule import Invalid, Replace, Rule
from detachlint.analysis.priors import NOT_NETWORK_NAME, TARGET_NETWORK_NAME



def _callee(call: cst.Call) -> str:
    func = call.func
    if isinstance(func, cst.Attribute) and func.attr.value == "forward":
        func = func.value
    return dotted(func) or ""


class TargetWithoutNoGrad(Rule):
    """A target network's output used in a loss without `no_grad` or `detach()`.

    ## What it does
    Flags a call to a target network (`target_net`, `critic_target`,
    `teacher`, `model_ema`, `momentum_encoder`, ..., or, whatever its name,
    a network that takes another network's weights every few steps,
    `q_next.load_state_dict(q_eval.state_dict())`, and that no optimizer
    steps) made with autograd on, whose output reaches a `backward()`
    without `.detach()`, when nothing in the file freezes that network's
    parameters.

    ## Why is this bad?
    A target is a constant by design: the TD target of DQN and DDPG, the
    teacher's soft labels, the momentum encoder's keys. Computed with
    autograd on, the loss's backward runs on into the target network:
    gradients pile up in its parameters (and reach its optimizer if it has
    one), and the whole target forward keeps its activations for the
    backward. For a target that shares modules with the online network the
    gradient itself changes (the full gradient of the TD error instead of
    the semi-gradient the method is built on).

    ## Example
    ```python
    import torch
    import torch.nn.functional as F

    def dqn_step(q_net, target_net, s, a, r, s2, done, optimizer, gamma=0.99):
        q = q_net(s).gather(1, a.unsqueeze(1)).squeeze(1)
        target = r + gamma * (1 - done) * target_net(s2).max(1).values
        F.smooth_l1_loss(q, target).backward()
        optimizer.step()
    ```

    Use instead:
    ```python
    import torch
    import torch.nn.functional as F

    def dqn_step(q_net, target_net, s, a, r, s2, done, optimizer, gamma=0.99):
        q = q_net(s).gather(1, a.unsqueeze(1)).squeeze(1)
        with torch.no_grad():
            target = r + gamma * (1 - done) * target_net(s2).max(1).values
        F.smooth_l1_loss(q, target).backward()
        optimizer.step()
    ```

    ## Not flagged
    - The call under `torch.no_grad()`/`inference_mode()`, or its result
      detached before the loss.
    - A target network whose parameters the file freezes
      (`target_net.requires_grad_(False)`, `p.requires_grad = False` over
      its parameters).
    - A target that never reaches a `backward()` in the same function (a
      loss returned to the caller: the rule looks where backward is called).
    - An output whose graph is cut on the way to the loss: detached further
      down (`target_q = r + (gamma * target_q).detach()`), or used only
      through `argmax`, `.item()` or `.numpy()` (picking actions).
    - A function or class of the same file (`compute_target(...)`): not a
      network.
    - A target whose value the author tried to cut with a discarded
      `next_q.detach()` statement: DL206 reports that line, where the fix goes.
    - A copy that trains: weights copied once in `__init__`
      (`ref.load_state_dict(model.state_dict())`), or a network some
      optimizer of the file steps.

    ## Fix safety
    The fix appends `.detach()` to the target network's call. It is unsafe:
    it changes which parameters receive gradients, which is the point, but
    a target network that is meant to train (rare, and then misnamed) would
    stop training.

    ## Verification
    The probe runs the step, takes the target network's output on the
    finding's line and reads the `.grad` of the network's parameters just
    before and after the backward the finding names: confirmed when that
    output's graph reaches them and the backward puts gradients into them;
    refuted when the output carries no graph back to them, or the backward
    leaves their `.grad` as it was. A learning step that waits for its
    replay buffer to hold a batch gets one first: synthesized transitions
    stored through the buffer's own method, which the evidence names (with
    them, unchanged gradients rule nothing out).

    ## References
    - Mnih et al., "Human-level control through deep reinforcement learning"
      (2015): the target network's values are held fixed in the loss.
    """

    code = "DL603"
    name = "target-without-no-grad"
    fix_title = "Detach the target network's output"
    message = "`{call}` runs with autograd on and reaches `{backward}` (line {line}) undetached: backward runs through `{network}` and its parameters collect gradients; compute the target under `torch.no_grad()`"
    harm = "waste"
    default_enabled = True

    valid = [
        # The same synced copy, its bootstrapped value computed under no_grad.
        """
        import torch
        from torch import nn
        import torch.nn.functional as F

        nets = {"a": nn.Linear(4, 2), "b": nn.Linear(4, 2)}
        nets["b"].load_state_dict(nets["a"].state_dict())
        opt = torch.optim.Adam(nets["a"].parameters(), lr=1e-3)
        for s, r, s2 in [(torch.randn(8, 4), torch.randn(8, 1), torch.randn(8, 4))]:
            q = nets["a"](s).max(1, keepdim=True)[0]
            with torch.no_grad():
                y = r + 0.9 * nets["b"](s2).max(1, keepdim=True)[0]
            loss = F.mse_loss(q, y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        """,
        # A worker synced from a shared model, whose gradients it computes to copy over.
        """
        import torch
        from torch import nn

        shared = nn.Linear(4, 1)
        worker = nn.Linear(4, 1)
        opt = torch.optim.SGD(shared.parameters(), lr=0.1)
        for x in [torch.randn(8, 4)]:
            worker.load_state_dict(shared.state_dict())
            loss = worker(x).pow(2).mean()
            loss.backward()
            for wp, sp in zip(worker.parameters(), shared.parameters()):
                sp._grad = wp.grad
            opt.step()
        """,
        # Under no_grad.
        """
        import torch
        import torch.nn.functional as F

        def dqn_step(q_net, target_net, batch, optimizer, gamma=0.99):
            s, a, r, s2, done = batch
            q = q_net(s).gather(1, a.unsqueeze(1)).squeeze(1)
            with torch.no_grad():
                target = r + gamma * (1 - done) * target_net(s2).max(1).values
            loss = F.smooth_l1_loss(q, target)
            loss.backward()
            optimizer.step()
        """,
        # Detached.
        """
        import torch.nn.functional as F

        def distill_step(student, teacher, x, optimizer, T=2.0):
            soft = F.softmax(teacher(x).detach() / T, dim=-1)
            loss = F.kl_div(F.log_softmax(student(x) / T, dim=-1), soft, reduction="batchmean")
            loss.backward()
            optimizer.step()
        """,
        # A frozen teacher.
        """
        import torch.nn.functional as F

        def build(teacher):
            teacher.requires_grad_(False)
            return teacher

        def distill_step(student, teacher, x, optimizer):
            loss = F.mse_loss(student(x), teacher(x))
            loss.backward()
            optimizer.step()
        """,
        # Frozen through its parameters.
        """
        import torch
        import torch.nn.functional as F

        class MoCo(torch.nn.Module):
            def __init__(self, encoder_q, encoder_k):
                super().__init__()
                self.encoder_q = encoder_q
                self.momentum_encoder = encoder_k
                for p in self.momentum_encoder.parameters():
                    p.requires_grad = False

            def step(self, x_q, x_k, optimizer):
                q = F.normalize(self.encoder_q(x_q), dim=1)
                k = F.normalize(self.momentum_encoder(x_k), dim=1)
                loss = -(q * k).sum(1).mean()
                loss.backward()
                optimizer.step()
        """,
        # Detached further down, before the loss.
        """
        import torch.nn.functional as F

        def train(self, state, action, next_state, reward, not_done):
            target_q = self.critic_target(next_state, self.actor_target(next_state))
            target_q = reward + (not_done * self.discount * target_q).detach()
            loss = F.mse_loss(self.critic(state, action), target_q)
            self.critic_optimizer.zero_grad()
            loss.backward()
            self.critic_optimizer.step()
        """,
        # A function of the file that computes targets, not a network.
        """
        import torch
        import torch.nn.functional as F

        def compute_target(v_final, rewards, masks, gamma=0.98):
            returns, g = [], v_final
            for r, m in zip(rewards[::-1], masks[::-1]):
                g = r + gamma * g * m
                returns.append(g)
            return torch.tensor(returns[::-1]).float()

        def update(model, states, rewards, masks, v_final, optimizer):
            td_target = compute_target(v_final, rewards, masks)
            loss = F.smooth_l1_loss(model(states), td_target)
            loss.backward()
            optimizer.step()
        """,
        # The teacher only picks actions: argmax and numpy keep no graph.
        """
        import torch
        import torch.nn.functional as F

        def collect_then_train(teacher_model, q_network, envs, obs, batch, optimizer):
            q_values = teacher_model(torch.Tensor(obs))
            actions = torch.argmax(q_values, dim=1).cpu().numpy()
            next_obs, rewards, dones, infos = envs.step(actions)
            loss = F.mse_loss(q_network(batch.observations), batch.returns)
            loss.backward()
            optimizer.step()
            return next_obs
        """,
        # The cut was meant but discarded: DL206's finding, at the line of the fix.
        """
        import torch
        import torch.nn.functional as F

        def dqn_update(qnet, qnet_target, optimizer, state, action, reward, next_state, done, gamma=0.98):
            q = qnet(state)[torch.arange(len(action)), action]
            next_q = qnet_target(next_state).max(1)[0]
            next_q.detach()
            target = reward + (1 - done) * gamma * next_q
            loss = F.mse_loss(q, target)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        """,
        # A network that takes copied weights but is trained by its own optimizer.
        """
        import torch
        from torch import nn

        class Finetuner:
            def __init__(self, pretrained: nn.Module, model: nn.Module):
                self.model = model
                self.model.load_state_dict(pretrained.state_dict())
                self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.01)

            def sync_from(self, other: nn.Module):
                self.model.load_state_dict(other.state_dict())

            def step(self, x, y):
                loss = nn.functional.mse_loss(self.model(x), y)
                self.optimizer.zero_grad()
                loss.backward()
                self.optimizer.step()
        """,
    ]

    invalid = [
        # Two networks in a dict, one synced from the other by copy: no name says "target".
        Invalid(
            """
            import torch
            from torch import nn
            import torch.nn.functional as F

            nets = {"a": nn.Linear(4, 2), "b": nn.Linear(4, 2)}
            nets["b"].load_state_dict(nets["a"].state_dict())
            opt = torch.optim.Adam(nets["a"].parameters(), lr=1e-3)
            for s, r, s2 in [(torch.randn(8, 4), torch.randn(8, 1), torch.randn(8, 4))]:
                q = nets["a"](s).max(1, keepdim=True)[0]
                y = r + 0.9 * nets["b"](s2).max(1, keepdim=True)[0]
                loss = F.mse_loss(q, y)
                opt.zero_grad()
                loss.backward()
                opt.step()
            """,
            line=10,
        ),
        # A target network by what the file does with it: synced, never stepped.
        Invalid(
            """
            import torch
            from torch import nn

            class DQNAgent:
                def __init__(self, q_eval: nn.Module, q_next: nn.Module, gamma=0.99):
                    self.q_eval, self.q_next, self.gamma = q_eval, q_next, gamma
                    self.optimizer = torch.optim.RMSprop(self.q_eval.parameters(), lr=1e-3)

                def replace_target_network(self):
                    self.q_next.load_state_dict(self.q_eval.state_dict())

                def learn(self, states, actions, rewards, states_):
                    q_pred = self.q_eval(states).gather(1, actions.unsqueeze(1)).squeeze(1)
                    q_target = rewards + self.gamma * self.q_next(states_).max(dim=1)[0]
                    loss = nn.functional.mse_loss(q_pred, q_target)
                    self.optimizer.zero_grad()
                    loss.backward()
                    self.optimizer.step()
            """,
            line=14,
            message="backward runs through `self.q_next`",
        ),
        Invalid(
            """
            import torch
            import torch.nn.functional as F

            def dqn_step(q_net, target_net, batch, optimizer, gamma=0.99):
                s, a, r, s2, done = batch
                q = q_net(s).gather(1, a.unsqueeze(1)).squeeze(1)
                target = r + gamma * (1 - done) * target_net(s2).max(1).values
                loss = F.smooth_l1_loss(q, target)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
            """,
            line=7,
            column=39,
            message="backward runs through `target_net`",
            fixed="""
            import torch
            import torch.nn.functional as F

            def dqn_step(q_net, target_net, batch, optimizer, gamma=0.99):
                s, a, r, s2, done = batch
                q = q_net(s).gather(1, a.unsqueeze(1)).squeeze(1)
                target = r + gamma * (1 - done) * target_net(s2).detach().max(1).values
                loss = F.smooth_l1_loss(q, target)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
            """,
        ),
        Invalid(
            """
            import torch.nn.functional as F

            class DDPG:
                def update(self, s, a, r, s2, done, gamma=0.99):
                    target_q = r + gamma * (1 - done) * self.critic_target(s2, self.actor_target(s2))
                    critic_loss = F.mse_loss(self.critic(s, a), target_q)
                    self.critic_optimizer.zero_grad()
                    critic_loss.backward()
                    self.critic_optimizer.step()
            """,
            line=5,
        ),
        Invalid(
            """
            import torch.nn.functional as F

            def distill_step(student, teacher, x, optimizer, T=4.0):
                soft_targets = F.softmax(teacher(x) / T, dim=-1)
                loss = F.kl_div(F.log_softmax(student(x) / T, dim=-1), soft_targets, reduction="batchmean")
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
            """,
            line=4,
        ),
    ]

    def visit_Call(self, node: cst.Call) -> None:
        network = _callee(node)
        last = network.rsplit(".", 1)[-1]
        facts = self.facts
        named = TARGET_NETWORK_NAME.fullmatch(last) and not NOT_NETWORK_NAME.fullmatch(last)
        if not named and network not in facts.optimizers.synced_copies():
            return
        if self.facts.names.qualified(node.func) is not None:
            return  # an imported function, not a network
        if isinstance(node.func, cst.Name) and facts.values.defines(node.func.value):
            return  # `compute_target(...)`: a function or class of the file
        parent = facts.index.parent(node)
        if isinstance(parent, cst.Attribute) and parent.attr.value in DETACHING_METHODS:
            return
        if facts.grad_mode.is_disabled(node) or network in self._frozen_networks():
            return
        if any(facts.index.is_inside(node, inner) for inner in self._detached_calls()):
            return
        if isinstance(parent, cst.Attribute) and parent.attr.value in NO_GRAPH_METHODS:
            return  # `target(s2).argmax(1)`: only indices, without a graph, leave the call
        backward = next(iter(facts.values.backwards_from(node)), None)
        if backward is None or self._detach_discarded(node):
            return
        self.report(
            node,
            fix=Replace(node, cst.Call(cst.Attribute(node, cst.Name("detach"))), unsafe=True),
            call=facts.module.code_for_node(node),
            backward=facts.module.code_for_node(backward),
            line=str(facts.line_of(backward)),
            network=network,
        )

    def finish(self) -> None:
        """The interpreter's view, whatever the networks are called: a module
        the program only syncs by copy, run with autograd on into a backward
        while an optimizer steps the other parameters."""
        facts = self.facts
        reported = {facts.line_of(r.node) for r in self.reports}
        for call, backward in facts.interpreter.copies_backpropagated():
            if not isinstance(call, cst.Call) or facts.line_of(call) in reported or facts.grad_mode.is_disabled(call):
                continue
            if self._detach_discarded(call):
                continue  # DL206 reports the discarded `detach()`, where the fix goes
            reported.add(facts.line_of(call))
            self.report(
                call,
                fix=Replace(call, cst.Call(cst.Attribute(call, cst.Name("detach"))), unsafe=True),
                call=facts.module.code_for_node(call),
                backward=facts.module.code_for_node(backward),
                line=str(facts.line_of(backward)),
                network=facts.module.code_for_node(call.func),
            )

    def _detach_discarded(self, node: cst.Call) -> bool:
        """`next_q.detach()` as a statement, on a value computed from the
        target: the author meant the cut and wrote it without effect; DL206
        reports that line, where the fix goes."""
        facts = self.facts
        scope = facts.values.scope(node)
        flowing = scope.flows_from(node)
        for statement in facts.index.descendants(facts.index.scope_of(node), cst.Expr):
            call = statement.value
            if not (isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute) and call.func.attr.value == "detach"):
                continue
            target = call.func.value
            if isinstance(target, cst.Name) and facts.index.before(node, statement):
                entry = scope.assignment_before(target.value, target)
                if entry is not None and entry[1] in flowing:
                    return True
        return False

    def _detached_calls(self):
        """`.detach()` calls: a target inside `(...).detach()` is detached."""
        return [
            call.func.value
            for call in self.facts.index.nodes(cst.Call)
            if isinstance(call.func, cst.Attribute) and call.func.attr.value == "detach"
        ]

    def _frozen_networks(self) -> Set[str]:
        """Networks the file freezes: `net.requires_grad_(False)`, or
        `p.requires_grad = False` for `p` in `net.parameters()`."""
        cached = getattr(self, "_frozen", None)
        if cached is not None:
            return cached
        frozen: Set[str] = set()
        index = self.facts.index
        for call in index.nodes(cst.Call):
            func = call.func
            if isinstance(func, cst.Attribute) and func.attr.value == "requires_grad_" and call.args:
                value = call.args[0].value
                if isinstance(value, cst.Name) and value.value == "False":
                    owner = dotted(func.value)
                    if owner:
                        frozen.add(owner)
        for loop in index.nodes(cst.For):
            iterable = loop.iter
            if isinstance(iterable, cst.Call) and isinstance(iterable.func, cst.Attribute) and iterable.func.attr.value in ("parameters", "named_parameters"):
                owner = dotted(iterable.func.value)
                for assign in index.descendants(loop.body, cst.Assign):
                    target = assign.targets[0].target
                    if isinstance(target, cst.Attribute) and target.attr.value == "requires_grad" and owner:
                        frozen.add(owner)
        self._frozen = frozen
        return frozen
