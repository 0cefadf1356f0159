from __future__ import annotations

from typing import Optional

import libcst as cst

from detachlint.analysis.gradient_paths import copied_module
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
    facts, expr: cst.BaseExpression, depth: int, cuts: Optional[dict] = None, ignore_grad_mode: bool = False,
    bound: Optional[dict] = None,
) -> set:
    """The `self.m` modules whose output `expr` is computed from, with its
    graph: `self.encoder(x)`, names bound to it, helpers returning it.
    Modules met behind a cut (a binding under `no_grad`, a `.detach()`, a
    `copy.deepcopy` of the module) go into `cuts`, each with the node that
    cut it. `bound`: a helper's parameters, to the caller's arguments."""
    if depth > 9:
        return set()
    found = set()
    if isinstance(expr, cst.Name):
        nodes = [expr]
    else:
        nodes = [expr, *facts.index.descendants(expr, cst.Call), *facts.index.descendants(expr, cst.Name)]
    # Arguments a function of the file cuts before returning
    # (`env.get_logprobs(self.policy(x), ...)` detaching its first parameter).
    cut_args = []
    for node in nodes:
        if isinstance(node, cst.Call):
            copied = copied_module(facts.names, node)
            if copied is not None:
                # A deep copy's parameters are new leaves: its outputs train the copy.
                cut_args.append(copied)
                if isinstance(copied, cst.Name) and bound and copied.value in bound:
                    copied = bound[copied.value]
                name = dotted(copied)
                if cuts is not None and name and name.startswith("self.") and name.count(".") == 1:
                    cuts.setdefault(name, node)
            for arg, cut_node in _cut_arguments(facts, node):
                cut_args.append(arg)
                if cuts is not None:
                    for module in _module_origins(facts, arg, depth + 1, None, ignore_grad_mode):
                        cuts.setdefault(module, cut_node)
    for node in nodes:
        if any(node is arg or facts.index.is_inside(node, arg) for arg in cut_args):
            continue
        if isinstance(node, cst.Call):
            if facts.grad_mode.is_disabled(node) and not ignore_grad_mode:
                continue
            name = dotted(node.func)
            if name and name.startswith("self.") and name.count(".") == 1:
                helpers = facts.intent.helpers_called(node)
                if not helpers:
                    found.add(name)
                for helper in helpers:
                    arguments = _arguments_of(helper, node)
                    for returned in facts.index.descendants(helper.body, cst.Return):
                        if returned.value is not None:
                            found |= _module_origins(facts, returned.value, depth + 1, cuts, ignore_grad_mode, arguments)
        elif isinstance(node, cst.Name) and node.value != "self":
            reaching = facts.values.scope(node).reaching(node)
            if not reaching and bound and node.value in bound:
                found |= _module_origins(facts, bound[node.value], depth + 1, cuts, ignore_grad_mode)
            for binding, value in reaching:
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
                found |= _module_origins(facts, value, depth + 1, cuts, bound=bound)
    return found


def _arguments_of(helper: cst.FunctionDef, call: cst.Call) -> dict:
    """The helper's parameters, each to the argument `call` passes."""
    params = [p.name.value for p in helper.params.params]
    if params and params[0] in ("self", "cls") and isinstance(call.func, cst.Attribute):
        params = params[1:]
    found = {}
    for position, arg in enumerate(call.args):
        if arg.star:
            break
        name = arg.keyword.value if arg.keyword is not None else (params[position] if position < len(params) else None)
        if name is not None:
            found[name] = arg.value
    return found


def _cut_arguments(facts, call: cst.Call):
    """(argument, the cut) for each argument of `call` bound to a parameter
    that the one function of the file it runs always cuts."""
    functions = facts.intent.helpers_called(call) or facts.intent.methods_called(call)
    if len(functions) != 1:
        return []
    function = functions[0]
    cut = facts.gradient_paths.cut_parameters(function)
    if not cut:
        return []
    params = [p.name.value for p in function.params.params]
    if params and params[0] in ("self", "cls") and isinstance(call.func, cst.Attribute):
        params = params[1:]
    found = []
    for position, arg in enumerate(call.args):
        if arg.star:
            return []
        name = arg.keyword.value if arg.keyword is not None else (params[position] if position < len(params) else None)
        if name in cut:
            found.append((arg.value, cut[name]))
    return found


class DetachFreezesUpstream(Rule):
    """A cut (`detach()`, `.data`, `no_grad`) leaves layers meant to train without gradients.

    ## What it does
    Flags a `.detach()` or a `.data` read in an `nn.Module`'s `forward` (or a
    method `forward` calls) whose result feeds what `forward` returns, when it
    cuts *every* path from some trainable submodules or parameters declared
    in `__init__` to the outputs (`x @ self.weight.data` is such a cut). The
    message names those members and the line of the cut. Paths are followed
    through the class's own helper methods (`adj = self.build_adjacency(x)`
    then `adj.detach()`), through the `forward` of members built from classes
    of the same file, element by element of the tuples they return (a
    quantizer returning `x + (codes - x).detach(), codes` whose raw `codes`
    the model drops), and through `if self.training:`, which runs on every
    training step. A straight-through estimator whose codebook has no other
    way out is such a cut.

    Also flags, in an agent's or trainer's update method, a module's output
    handed with its graph cut (`obs.detach()`, or computed under
    `torch.no_grad()`) to a method that backpropagates and steps that
    module's optimizer (`self.encoder_opt = Adam(self.encoder.parameters())`):
    the optimizer steps parameters that never get a gradient. Likewise where
    a function backpropagates a loss and then steps a module's optimizer
    while the module's output reaches every loss it backpropagates only
    through a cut: a name bound to its detached output or computed under
    `no_grad`, or a function of the file that always cuts the argument it
    is handed (`logits = logits.clone().detach()` in an environment's
    `log_probs`), or a `copy.deepcopy` of the module whose outputs train only
    the copy (MAML adapting a deep copy, then stepping the meta-optimizer),
    followed through the helpers that return the loss. A cut under an
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
    - Gradients handed from a copy to the original by hand (`p.grad =
      q.grad`, as first-order MAML and A3C workers do).
    - A module that reaches the return value of another method of the class
      (one that `forward` does not itself call, or that the file also calls
      on an instance).
    - A codebook kept as a buffer or updated by the class itself (an EMA or
      k-means update, `self.embed.weight.data.copy_(...)`), and a quantizer
      whose raw codes still reach a codebook loss.

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
        # Straight-through quantizer whose codebook is a buffer moved by an EMA update.
        """
        import torch
        from torch import nn

        class EMAQuantizer(nn.Module):
            def __init__(self, n_codes, dim, decay=0.99):
                super().__init__()
                self.decay = decay
                self.register_buffer("codebook", torch.randn(n_codes, dim))

            def forward(self, x):
                ids = torch.cdist(x, self.codebook).argmin(-1)
                quantized = self.codebook[ids]
                if self.training:
                    with torch.no_grad():
                        self.codebook[ids] = self.decay * self.codebook[ids] + (1 - self.decay) * x
                return x + (quantized - x).detach(), ids
        """,
        # Straight-through quantizer that also returns the raw codes for the codebook loss.
        """
        import torch
        from torch import nn

        class Quantizer(nn.Module):
            def __init__(self, n_codes, dim):
                super().__init__()
                self.codebook = nn.Embedding(n_codes, dim)

            def forward(self, x):
                ids = torch.cdist(x, self.codebook.weight).argmin(-1)
                codes = self.codebook(ids)
                return x + (codes - x).detach(), codes

        class VQAutoEncoder(nn.Module):
            def __init__(self):
                super().__init__()
                self.encoder = nn.Linear(16, 4)
                self.quantizer = Quantizer(8, 4)
                self.decoder = nn.Linear(4, 16)

            def forward(self, x):
                z = self.encoder(x)
                z_q, codes = self.quantizer(z)
                codebook_loss = ((codes - z.detach()) ** 2).mean()
                return self.decoder(z_q), codebook_loss
        """,
        # The detached helper output is a target; its layers reach the output through `forward`'s other path.
        """
        import torch
        from torch import nn

        class GraphNet(nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = nn.Linear(16, 8)
                self.gc = nn.Linear(16, 16)

            def adjacency(self, x):
                h = self.proj(x)
                return torch.softmax(h @ h.t(), dim=1)

            def forward(self, x):
                adj = self.adjacency(x)
                target = adj.detach()
                return self.gc(adj @ x), target
        """,
        # The helper detaches only to build a mask; the logits it returns keep their graph.
        """
        import torch
        from torch import nn

        class Env:
            def log_probs(self, logits, actions):
                invalid = logits.detach() < -1e6
                logits = logits.masked_fill(invalid, -1e9)
                return torch.log_softmax(logits, -1).gather(1, actions[:, None]).squeeze(1)

        class Agent:
            def __init__(self, env):
                self.env = env
                self.policy = nn.Linear(8, 4)
                self.opt = torch.optim.Adam(self.policy.parameters())

            def train_step(self, states, actions, returns):
                log_p = self.env.log_probs(self.policy(states), actions)
                loss = -(log_p * returns).mean()
                self.opt.zero_grad()
                loss.backward()
                self.opt.step()
        """,
        # First-order MAML: the copy's gradients are handed back to the meta-model by hand.
        """
        import copy
        import torch
        from torch import nn

        class FOMAML:
            def __init__(self, model):
                self.model = model
                self.loss_fn = nn.MSELoss()
                self.meta_opt = torch.optim.SGD(self.model.parameters(), lr=1e-3)

            def adapt(self, x, y):
                fast = copy.deepcopy(self.model)
                inner = torch.optim.SGD(fast.parameters(), lr=0.01)
                inner.zero_grad()
                self.loss_fn(fast(x), y).backward()
                inner.step()
                return fast

            def step(self, support_x, support_y, query_x, query_y):
                fast = self.adapt(support_x, support_y)
                fast.zero_grad()
                self.loss_fn(fast(query_x), query_y).backward()
                for p, q in zip(self.model.parameters(), fast.parameters()):
                    p.grad = q.grad.clone()
                self.meta_opt.step()
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
        # A helper method builds the adjacency; `forward` detaches what it returns.
        Invalid(
            """
            import torch
            from torch import nn

            class AdaptiveGCN(nn.Module):
                def __init__(self, dim):
                    super().__init__()
                    self.w_theta = nn.Linear(dim, 8, bias=False)
                    self.w_phi = nn.Linear(dim, 8, bias=False)
                    self.gc = nn.Linear(dim, dim)

                def build_adjacency(self, x):
                    return torch.softmax(self.w_theta(x) @ self.w_phi(x).t(), dim=1)

                def forward(self, x):
                    adj = self.build_adjacency(x)
                    adj = adj.detach()
                    return self.gc(adj @ x)

                def param_groups(self, lr):
                    return [{"params": self.w_theta.parameters(), "lr": lr}, {"params": self.gc.parameters()}]
            """,
            line=16,
            message="`w_theta` and `w_phi` never get gradients",
        ),
        # Straight-through estimator: the codebook's only way out is through the detach.
        Invalid(
            """
            import torch
            from torch import nn

            class Quantizer(nn.Module):
                def __init__(self, n_codes, dim):
                    super().__init__()
                    self.embedding = nn.Embedding(n_codes, dim)
                    self.embedding.weight.data.uniform_(-1 / n_codes, 1 / n_codes)

                def forward(self, x):
                    ids = torch.cdist(x, self.embedding.weight).argmin(dim=-1)
                    codes = self.embedding(ids)
                    if self.training:
                        codes = x + (codes - x).detach()
                    return codes, ids
            """,
            line=14,
            message="`embedding` never gets gradients",
        ),
        # The quantizer returns its raw codes too, but the model keeps only the straight-through output.
        Invalid(
            """
            import torch
            from torch import nn
            import torch.nn.functional as F

            class Quantizer(nn.Module):
                def __init__(self, n_codes, dim):
                    super().__init__()
                    self.codebook = nn.Embedding(n_codes, dim)

                def forward(self, x):
                    ids = torch.argmin(torch.cdist(x, self.codebook.weight), dim=-1)
                    codes = self.codebook(ids)
                    return x + (codes - x).detach(), codes, ids

            class LatentActionModel(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.encoder = nn.Linear(16, 4)
                    self.vq = Quantizer(8, 4)
                    self.decoder = nn.Linear(4, 16)

                def forward(self, x):
                    z = self.encoder(x)
                    z_q, _, ids = self.vq(z)
                    codebook_loss = F.mse_loss(z_q, z.detach())
                    return self.decoder(z_q), codebook_loss
            """,
            line=13,
            message="`vq` never gets gradients",
        ),        # A function of the file cuts the policy output it is handed, before the loss.
        Invalid(
            """
            import torch
            from torch import nn

            class Env:
                def log_probs(self, logits, actions):
                    logits = logits.clone().detach()
                    return torch.log_softmax(logits, -1).gather(1, actions[:, None]).squeeze(1)

            class Agent:
                def __init__(self, env):
                    self.env = env
                    self.policy = nn.Linear(8, 4)
                    self.log_z = nn.Parameter(torch.zeros(1))
                    self.opt = torch.optim.Adam(list(self.policy.parameters()) + [self.log_z])

                def tb_loss(self, states, actions, log_reward):
                    log_pf = self.env.log_probs(self.policy(states), actions)
                    return (self.log_z + log_pf - log_reward).pow(2).mean()

                def train_step(self, states, actions, log_reward):
                    loss = self.tb_loss(states, actions, log_reward)
                    self.opt.zero_grad()
                    loss.backward()
                    self.opt.step()
            """,
            line=6,
            message="`self.policy` never gets gradients: `logits.clone().detach()` on line 6",
        ),        # MAML whose inner loop adapts a deep copy: the meta-loss reaches only the copy.
        Invalid(
            """
            import copy
            import torch
            from torch import nn

            class MetaLearner:
                def __init__(self, model):
                    self.model = model
                    self.loss_fn = nn.MSELoss()
                    self.meta_opt = torch.optim.Adam(self.model.parameters(), lr=1e-3)

                def adapt(self, model, x, y):
                    fast = copy.deepcopy(model)
                    grads = torch.autograd.grad(self.loss_fn(fast(x), y), fast.parameters(), create_graph=True)
                    for p, g in zip(fast.parameters(), grads):
                        p.data -= 0.01 * g
                    return fast

                def meta_update(self, meta_loss):
                    self.meta_opt.zero_grad()
                    meta_loss.backward()
                    self.meta_opt.step()

                def step(self, support_x, support_y, query_x, query_y):
                    fast = self.adapt(self.model, support_x, support_y)
                    meta_loss = self.loss_fn(fast(query_x), query_y)
                    self.meta_update(meta_loss)
            """,
            line=12,
            message="`self.model` never gets gradients: `copy.deepcopy(model)` on line 12",
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
        if facts.values.backward_target(node) is not None:
            self._check_backward(node)
            return
        paths = facts.gradient_paths
        caller = facts.index.enclosing(node, cst.FunctionDef)
        for helper in facts.intent.helpers_called(node):
            if not facts.intent.computes_gradients(helper) or paths.moves_gradients_by_hand(helper):
                continue
            if caller is not None and paths.moves_gradients_by_hand(caller):
                return
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

    def _check_backward(self, node: cst.Call) -> None:
        """`loss.backward()` then `opt.step()` over a module whose output
        reaches `loss` only through a cut: in this function, or in a function
        of the file that cuts the argument it is handed."""
        facts = self.facts
        function = facts.index.enclosing(node, cst.FunctionDef)
        if function is None or facts.gradient_paths.moves_gradients_by_hand(function):
            return
        steps = [(step, modules) for step, modules in facts.optimizers.steps_in(function) if facts.index.before(node, step)]
        stepped = {m for _, modules in steps for m in modules if m.startswith("self.")}
        if not stepped:
            return
        cuts: dict = {}
        kept = set()
        for call in facts.index.descendants(function.body, cst.Call):
            target = facts.values.backward_target(call)
            if target is not None:  # every loss this function backpropagates
                kept |= _module_origins(facts, target, 0, cuts if call is node else None)
        starved: dict = {}
        for module, cut_node in cuts.items():
            if module in stepped and module not in kept and facts.index.enclosing(cut_node, cst.If) is None:
                starved.setdefault(cut_node, []).append(module)
        for cut_node, modules in starved.items():
            names, verb, their = _names(sorted(modules))
            optimizers = sorted({dotted(step.func.value) or "" for step, owned in steps if set(owned) & set(modules)})  # type: ignore[attr-defined]
            if isinstance(cut_node, cst.With):
                cut_text = f"`with {facts.module.code_for_node(cut_node.items[0].item)}:`"
            else:
                cut_text = f"`{facts.module.code_for_node(cut_node)}`"
            reason = (
                f"{cut_text} on line {facts.line_of(cut_node)} keeps {their} output out of the loss "
                f"`{facts.module.code_for_node(node.func)}()` backpropagates, "
                f"yet `{'`, `'.join(optimizers)}` steps {their} parameters"
            )
            self.report(cut_node, members=names, verb=verb, reason=reason)

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
