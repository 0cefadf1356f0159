from __future__ import annotations

from typing import Optional

import libcst as cst

from detachlint.analysis.names import dotted
from detachlint.rule import Invalid, Rule


def _built_by(module: cst.Module, value: cst.BaseExpression) -> str:
    """`nn.Sequential` for `nn.Sequential(...)`: what built a member, briefly."""
    if isinstance(value, cst.Call):
        value = value.func
    text = module.code_for_node(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _names(members):
    quoted = [f"`{m}`" for m in members]
    if len(quoted) == 1:
        return quoted[0], "gets", "its"
    return ", ".join(quoted[:-1]) + " and " + quoted[-1], "get", "their"


def _modules_called(facts, function: cst.FunctionDef) -> set:
    """`self.m` for every `self.m(...)` the function runs with autograd on."""
    found = set()
    for call in facts.index.descendants(function.body, cst.Call):
        name = dotted(call.func)
        if name and name.startswith("self.") and name.count(".") == 1 and not facts.grad_mode.is_disabled(call):
            found.add(name)
    return found


def _module_origins(
    facts, expr: cst.BaseExpression, depth: int, cuts: Optional[dict] = None, ignore_grad_mode: bool = False
) -> set:
    """The `self.m` modules whose output `expr` is computed from, with its
    graph: `self.encoder(x)`, names bound to it, helpers returning it.
    Modules met behind a cut (a binding under `no_grad`, a `.detach()`) go
    into `cuts`, each with the node that cut it."""
    if depth > 6:
        return set()
    found = set()
    if isinstance(expr, cst.Name):
        nodes = [expr]
    else:
        nodes = [expr, *facts.index.descendants(expr, cst.Call), *facts.index.descendants(expr, cst.Name)]
    for node in nodes:
        if isinstance(node, cst.Call):
            if facts.grad_mode.is_disabled(node) and not ignore_grad_mode:
                continue
            name = dotted(node.func)
            if name and name.startswith("self.") and name.count(".") == 1:
                helpers = facts.intent.helpers_called(node)
                if not helpers:
                    found.add(name)
                for helper in helpers:
                    for returned in facts.index.descendants(helper.body, cst.Return):
                        if returned.value is not None:
                            found |= _module_origins(facts, returned.value, depth + 1, None, ignore_grad_mode)
        elif isinstance(node, cst.Name) and node.value != "self":
            for binding, value in facts.values.scope(node).reaching(node):
                if value is None:
                    continue
                if facts.grad_mode.is_disabled(binding):
                    if cuts is not None:
                        cut_by = facts.grad_mode.disabled_by(binding) or binding
                        for module in _module_origins(facts, value, depth + 1, None, ignore_grad_mode=True):
                            cuts.setdefault(module, cut_by)
                    continue
                if isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value == "detach":
                    if cuts is not None:
                        for module in _module_origins(facts, value.func.value, depth + 1):
                            cuts.setdefault(module, value)
                    continue
                found |= _module_origins(facts, value, depth + 1, cuts)
    return found


class DetachFreezesUpstream(Rule):
    """A cut (`detach()`, `.data`, `no_grad`) leaves layers meant to train without gradients.

    ## What it does
    Flags a `.detach()` or a `.data` read in an `nn.Module`'s `forward` (or a
    method `forward` calls) whose result feeds what `forward` returns, when it
    cuts *every* path from some trainable submodules or parameters declared
    in `__init__` to the outputs (`x @ self.weight.data` is such a cut). The
    message names those members and the line of the cut.

    Also flags, in an agent's or trainer's update method, a module's output
    handed with its graph cut (`obs.detach()`, or computed under
    `torch.no_grad()`) to a method that backpropagates and steps that
    module's optimizer (`self.encoder_opt = Adam(self.encoder.parameters())`):
    the optimizer steps parameters that never get a gradient. A cut under an
    `if` (a switch the author set) and a module that still reaches the loss
    through another argument are left alone.

    ## Why is this bad?
    The submodules upstream of the cut never receive a gradient: their
    `.grad` stays `None`, the optimizer skips them, and they keep their
    initial weights for the whole run, while nothing in the code says they
    are frozen. Training looks normal; the model is just worse.

    ## Example
    ```python
    from torch import nn

    class Classifier(nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = nn.Sequential(nn.Linear(32, 64), nn.ReLU())
            self.head = nn.Linear(64, 10)

        def forward(self, x):
            features = self.encoder(x).detach()
            return self.head(features)
    ```

    Use instead:
    ```python
    from torch import nn

    class Classifier(nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = nn.Sequential(nn.Linear(32, 64), nn.ReLU())
            self.head = nn.Linear(64, 10)

        def forward(self, x):
            features = self.encoder(x)
            return self.head(features)
    ```
    If the encoder is meant to stay fixed, say so where it is built:
    `self.encoder.requires_grad_(False)`.

    ## Not flagged
    - Upstream modules frozen explicitly: `requires_grad_(False)`,
      `p.requires_grad = False` over their parameters, a `freeze(...)` helper,
      and teacher, target, EMA or momentum copies.
    - Stop-gradient targets whose module still reaches an output another
      way, as in SimSiam and BYOL: `return p, z.detach()`.
    - A detached value that only feeds logging, metrics or buffers.
    - A detach under a condition (`if self.config.fix_emb:`): a freeze the
      author switches on.
    - Work under `torch.no_grad()` inside `forward`: that freeze is explicit.
    - A module that reaches the return value of another method of the class.

    ## Fix safety
    No automatic fix: whether the cut is a bug or a missing freeze is the
    author's call.

    ## Verification
    The probe builds the module with synthesized arguments, runs `forward`
    on synthesized inputs and backward from the outputs; confirmed when every
    `requires_grad=True` parameter of the named submodules has `grad None`.

    ## References
    - PyTorch docs, "Autograd mechanics": excluding subgraphs from backward.
    """

    code = "DL201"
    name = "detach-freezes-upstream"
    message = "{members} never {verb} gradients: {reason}"
    severity = "error"
    default_enabled = True

    valid = [
        # The critic's loss trains the encoder through `obs`; only the target side is cut.
        """
        import torch
        import torch.nn.functional as F

        class Agent:
            def __init__(self, encoder, critic):
                self.encoder = encoder
                self.critic = critic
                self.encoder_opt = torch.optim.Adam(self.encoder.parameters())
                self.critic_opt = torch.optim.Adam(self.critic.parameters())

            def update_critic(self, obs, next_obs, reward):
                target = reward + self.critic(next_obs).detach()
                loss = F.mse_loss(self.critic(obs), target)
                self.encoder_opt.zero_grad()
                self.critic_opt.zero_grad()
                loss.backward()
                self.critic_opt.step()
                self.encoder_opt.step()

            def update(self, obs, next_obs, reward):
                obs = self.encoder(obs)
                with torch.no_grad():
                    next_obs = self.encoder(next_obs)
                self.update_critic(obs, next_obs.detach(), reward)
                if not self.train_encoder:
                    obs = obs.detach()
                self.update_critic(obs, next_obs, reward)
        """,
        # A fixed embedding: its weight is a Parameter created with requires_grad=False.
        """
        import torch
        from torch import nn

        class FixedEmbedding(nn.Module):
            def __init__(self, c_in, d_model):
                super().__init__()
                w = torch.randn(c_in, d_model)
                self.emb = nn.Embedding(c_in, d_model)
                self.emb.weight = nn.Parameter(w, requires_grad=False)

            def forward(self, x):
                return self.emb(x).detach()
        """,
        # SimSiam: z is detached as a target, but also reaches the output through p.
        """
        from torch import nn

        class SimSiam(nn.Module):
            def __init__(self):
                super().__init__()
                self.encoder = nn.Linear(32, 16)
                self.predictor = nn.Linear(16, 16)

            def forward(self, x):
                z = self.encoder(x)
                p = self.predictor(z)
                return p, z.detach()
        """,
        # Frozen teacher.
        """
        import torch.nn as nn

        class Distiller(nn.Module):
            def __init__(self, teacher):
                super().__init__()
                self.backbone = nn.Linear(8, 8)
                self.student = nn.Linear(8, 4)
                for p in self.backbone.parameters():
                    p.requires_grad = False

            def forward(self, x):
                feats = self.backbone(x).detach()
                return self.student(feats)
        """,
        # Detached value only logged into a buffer.
        """
        from torch import nn

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.stem = nn.Conv2d(3, 8, 3)
                self.probe = nn.Linear(8, 2)

            def forward(self, x):
                h = self.stem(x)
                self.last_activation = h.detach()
                return h.mean()
        """,
        # EMA target network by name, updated under no_grad elsewhere.
        """
        from torch import nn

        class BYOL(nn.Module):
            def __init__(self):
                super().__init__()
                self.online = nn.Linear(8, 8)
                self.target_encoder = nn.Linear(8, 8)

            def forward(self, x):
                target = self.target_encoder(x).detach()
                return self.online(x), target
        """,
        # A freeze switched on by configuration.
        """
        from torch import nn

        class SNLIClassifier(nn.Module):
            def __init__(self, config):
                super().__init__()
                self.config = config
                self.embed = nn.Embedding(100, 16)
                self.out = nn.Linear(16, 3)

            def forward(self, tokens):
                embedded = self.embed(tokens)
                if self.config.fix_emb:
                    embedded = embedded.detach()
                return self.out(embedded.mean(1))
        """,
        # Frozen with requires_grad_(False).
        """
        from torch import nn

        class LinearProbe(nn.Module):
            def __init__(self):
                super().__init__()
                self.encoder = nn.Sequential(nn.Linear(32, 64), nn.ReLU())
                self.encoder.requires_grad_(False)
                self.head = nn.Linear(64, 10)

            def forward(self, x):
                return self.head(self.encoder(x).detach())
        """,
    ]

    invalid = [
        Invalid(
            """
            import torch
            import torch.nn.functional as F

            class Agent:
                def __init__(self, encoder, critic):
                    self.encoder = encoder
                    self.critic = critic
                    self.encoder_opt = torch.optim.Adam(self.encoder.parameters())
                    self.critic_opt = torch.optim.Adam(self.critic.parameters())

                def update_critic(self, obs, target):
                    loss = F.mse_loss(self.critic(obs), target)
                    self.encoder_opt.zero_grad()
                    self.critic_opt.zero_grad()
                    loss.backward()
                    self.critic_opt.step()
                    self.encoder_opt.step()

                def update(self, obs, target):
                    obs = self.encoder(obs)
                    self.update_critic(obs.detach(), target)
            """,
            line=21,
            message="`self.encoder` never gets gradients: `obs.detach()` on line 21 keeps its output out of the loss `self.update_critic(...)` backpropagates, yet it steps `self.encoder_opt` over its parameters",
        ),
        Invalid(
            """
            import torch
            from torch import nn

            class MyLinear(nn.Module):
                def __init__(self, n_in, n_out):
                    super().__init__()
                    self.weight = nn.Parameter(torch.randn(n_in, n_out))
                    self.bias = nn.Parameter(torch.zeros(n_out))

                def forward(self, x):
                    return torch.relu(x @ self.weight.data + self.bias)
            """,
            line=11,
            message="`weight` never gets gradients: the `.data` on line 11 cuts its value off",
        ),
        Invalid(
            """
            from torch import nn

            class Classifier(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.encoder = nn.Sequential(nn.Linear(32, 64), nn.ReLU())
                    self.head = nn.Linear(64, 10)

                def forward(self, x):
                    features = self.encoder(x).detach()
                    return self.head(features)
            """,
            line=10,
            message="`encoder` never gets gradients: the `.detach()` on line 10",
        ),
        Invalid(
            """
            import torch
            import torch.nn as nn

            class Seq2Seq(nn.Module):
                def __init__(self, vocab):
                    super().__init__()
                    self.embed = nn.Embedding(vocab, 32)
                    self.rnn = nn.GRU(32, 32, batch_first=True)
                    self.out = nn.Linear(32, vocab)

                def encode(self, tokens):
                    states, _ = self.rnn(self.embed(tokens))
                    return states.detach()

                def forward(self, tokens):
                    states = self.encode(tokens)
                    return self.out(torch.relu(states))
            """,
            line=13,
            message="`embed` and `rnn` never get gradients",
        ),
        Invalid(
            """
            from torch import nn

            class Critic(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.conv = nn.Conv2d(3, 16, 3)
                    self.fc = nn.Linear(16, 1)

                def forward(self, x):
                    h = self.conv(x).mean((2, 3))
                    h = h.detach()
                    return {"value": self.fc(h)}
            """,
            line=11,
            message="`conv`",
        ),
    ]

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        owner = self.facts.modules.class_of(node.body)
        if owner is None or owner.node is not node or "forward" not in owner.methods:
            return
        trainable = owner.trainable_members()
        for cut, members in self.facts.gradient_paths.cut_off_members(owner, "forward"):
            names, verb, their = _names(members)
            # The model's members as the file builds them, for reports that draw the model.
            details = {
                "model": owner.name,
                "members": [
                    {
                        "name": name,
                        "kind": member.kind,
                        "built_by": _built_by(self.facts.module, member.value),
                        "trainable": name in trainable,
                        "cut_off": name in members,
                    }
                    for name, member in owner.members.items()
                ],
            }
            kinds = {owner.members[name].kind for name in members}
            what = "value" if kinds == {"parameter"} else "output"
            text = ".data" if isinstance(cut, cst.Attribute) else ".detach()"
            reason = f"the `{text}` on line {self.facts.line_of(cut)} cuts {their} {what} off from everything `forward` returns"
            self.report(cut, details=details, members=names, verb=verb, reason=reason)

    def visit_Call(self, node: cst.Call) -> None:
        """`self.update_critic(obs.detach(), ...)`: a helper that steps the
        optimizer of a module, handed that module's output with its graph cut."""
        facts = self.facts
        for helper in facts.intent.helpers_called(node):
            if not facts.intent.computes_gradients(helper):
                continue
            stepped = set()
            for step, modules in facts.optimizers.steps_in(helper):
                stepped |= {m for m in modules if m.startswith("self.")}
            if not stepped:
                continue
            stepped -= _modules_called(facts, helper)  # the helper runs them itself, with their graph
            kept = set()
            cuts = []
            for arg in node.args:
                cut = self._cut_input(arg.value)
                if cut is None:
                    kept |= _module_origins(facts, arg.value, depth=0)
                else:
                    cuts.append(cut)
            for cut_node, origins in cuts:
                starved = sorted((origins & stepped) - kept)
                if not starved or facts.index.enclosing(cut_node, cst.If) is not None:
                    continue  # a cut under an `if` is a mode the author switches
                names, verb, their = _names(starved)
                optimizers = sorted({
                    dotted(step.func.value) for step, modules in facts.optimizers.steps_in(helper)  # type: ignore[attr-defined]
                    if set(modules) & set(starved)
                })
                if isinstance(cut_node, cst.With):
                    cut_text = f"`with {facts.module.code_for_node(cut_node.items[0].item)}:`"
                else:
                    cut_text = f"`{facts.module.code_for_node(cut_node)}`"
                reason = (
                    f"{cut_text} on line {facts.line_of(cut_node)} keeps {their} output out of the loss "
                    f"`{facts.module.code_for_node(node.func)}(...)` backpropagates, "
                    f"yet it steps `{'`, `'.join(o for o in optimizers if o)}` over {their} parameters"
                )
                self.report(cut_node, members=names, verb=verb, reason=reason)
                return

    def _cut_input(self, expr: cst.BaseExpression):
        """(where the cut is, the modules cut off) for an argument that
        carries a module's output with its graph cut: `obs.detach()`,
        `obs.data`, or a name computed under `no_grad`."""
        facts = self.facts
        if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value == "detach":
            return expr, _module_origins(facts, expr.func.value, depth=0)
        if isinstance(expr, cst.Attribute) and expr.attr.value == "data":
            return expr, _module_origins(facts, expr.value, depth=0)
        if isinstance(expr, cst.Name):
            cuts: dict = {}
            kept = _module_origins(facts, expr, depth=0, cuts=cuts)
            cut_off = {module: node for module, node in cuts.items() if module not in kept}
            if cut_off:
                node = next(iter(cut_off.values()))
                return node, {m for m, n in cut_off.items() if n is node}
        return None
