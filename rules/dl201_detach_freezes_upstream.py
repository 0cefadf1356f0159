from __future__ import annotations

import libcst as cst

from detachlint.analysis.gradient_paths import copied_module
from detachlint.analysis.loss_terms import LossTerms
from detachlint.analysis.module_origins import UNKNOWN, CutLog, inline_cut, module_origins
from detachlint.analysis.vocabulary import COPYING_CONSTRUCTORS, DETACHING_METHODS, TO_PYTHON_METHODS

GRAD_OFF_MANAGERS = frozenset({"torch.no_grad", "torch.inference_mode"})
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


def _cut_text(facts, cut_node: cst.CSTNode) -> str:
    if isinstance(cut_node, cst.With):
        return f"`with {facts.module.code_for_node(cut_node.items[0].item)}:`"
    if isinstance(cut_node, cst.FunctionDef):
        # Off for the whole function: by its decorator, or by where it is called.
        setter = facts.grad_mode.function_setter(cut_node)
        if setter is not None:
            return f"`{facts.module.code_for_node(setter[0])}` around `{cut_node.name.value}`"
        return f"`{cut_node.name.value}`, which every caller runs with autograd off,"
    return f"`{facts.module.code_for_node(cut_node)}`"


def _stop_gradient(facts, cut_node: cst.CSTNode, terms: list) -> bool:
    """`x.detach()` of a name whose same value another term of the loss
    reads with its graph: a stop-gradient on purpose (`advantage = ret -
    values.detach()` next to `mse_loss(values, ret)`)."""
    cut_from = inline_cut(cut_node)
    if not isinstance(cut_from, cst.Name):
        return False
    bindings = {b for b, _ in facts.values.scope(cut_from).reaching(cut_from)}
    for summand, live, _ in terms:
        if not live - {UNKNOWN}:
            continue
        for read in facts.index.descendants(summand.expr, cst.Name):
            if read.value == cut_from.value and read is not cut_from and not facts.index.is_inside(read, cut_node):
                if {b for b, _ in facts.values.scope(read).reaching(read)} & bindings:
                    return True
    return False


def _on_instance(facts, name: str, at: cst.CSTNode) -> bool:
    """`name` (`self.encoder`) is a member of the instance of the method around `at`."""
    receiver = facts.index.receiver(at)
    return bool(receiver) and name.startswith(receiver + ".")


def _meant_to_train(facts, module: str, at: cst.CSTNode) -> bool:
    """`self.m` is a trainable member of the module class around `at` that
    the optimizers do not leave out, or (in a class that is no module) one
    an optimizer of the file steps."""
    if module in facts.optimizers.synced_copies() or not _on_instance(facts, module, at) or module.count(".") != 1:
        return False
    owner = facts.modules.class_of(at)
    if owner is not None:
        return module.split(".", 1)[1] in facts.optimizers.meant_to_train(owner)
    return module in facts.optimizers.stepped_modules()


def _detaches(node: cst.CSTNode) -> bool:
    """`x.detach()`, `x.clone().detach()`: a cut written as such, not one by grad mode."""
    return isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value in DETACHING_METHODS


def _cut_place(facts, node: cst.CSTNode):
    """(where to report, whether autograd was off) for a cut that drops a
    value's graph on purpose: `.detach()`, `.data`, a copy into a new tensor
    or into Python, autograd switched off, or an op whose result has no
    gradient by nature (indices, an integer cast)."""
    function = facts.index.enclosing(node, cst.FunctionDef)
    parent = facts.index.parent(node)
    while parent is not None and parent is not function:
        if isinstance(parent, cst.With) and any(
            isinstance(item.item, cst.Call) and facts.names.qualified(item.item.func) in GRAD_OFF_MANAGERS for item in parent.items
        ):
            return parent, True
        parent = facts.index.parent(parent)
    if function is not None:
        # `@torch.no_grad()` on the function the cut runs in: the decorator is the place.
        for decorator in function.decorators:
            expr = decorator.decorator
            if facts.names.qualified(expr.func if isinstance(expr, cst.Call) else expr) in GRAD_OFF_MANAGERS:
                return decorator, True
    if isinstance(node, cst.Attribute):
        return (node, False) if node.attr.value == "data" else None
    if not isinstance(node, cst.Call):
        return None
    if isinstance(node.func, cst.Attribute) and node.func.attr.value in DETACHING_METHODS | TO_PYTHON_METHODS:
        return node, False
    qualified = facts.names.qualified(node.func) or ""
    if qualified in COPYING_CONSTRUCTORS or qualified in ("torch.as_tensor", "torch.from_numpy", "copy.deepcopy") or qualified.startswith("numpy."):
        return node, False
    if False in facts.interpreter.grad_modes(node):
        # Run inside a call made with autograd off: the region around that call is the place.
        outer = next((c for c in facts.interpreter.cut_calls.get(node, ()) if facts.interpreter.grad_modes(c) == {False}), None)
        if outer is not None and outer is not node:
            place = _cut_place(facts, outer)
            if place is not None and place[1]:
                return place if not _switched(facts, place[0]) else None
    if facts.interpreter.grad_modes(node) == {False}:
        return node, True
    # An op whose result has no gradient by nature (`argmax`, the indices of
    # `torch.max(x, 1)`, an integer cast): a cut like any other when what it
    # starves is stepped and reaches no loss by any other path. Not a
    # distribution's `sample()`: its gradient path is `log_prob`, by design.
    if isinstance(node.func, cst.Attribute) and node.func.attr.value == "sample":
        return None
    return node, False


def _switched(facts, place: cst.CSTNode) -> bool:
    """Under an `if` of its function (`if fix_encoder: with torch.no_grad(): ...`):
    a freeze the author switches on, not `if self.training:`, which every step takes."""
    function = facts.index.enclosing(place, cst.FunctionDef)
    for ancestor in facts.index.ancestors(place):
        if ancestor is function:
            return False
        if isinstance(ancestor, cst.If) and not _reads_training_flag(facts, ancestor.test):
            return True
    return False


def _reads_training_flag(facts, test: cst.BaseExpression) -> bool:
    """`if self.training:`, `if not model.training:`: a module's own train/eval flag."""
    return any(node.attr.value == "training" for node in [test, *facts.index.descendants(test, cst.Attribute)] if isinstance(node, cst.Attribute))


def _own_members(facts, method: cst.FunctionDef) -> frozenset:
    """The parameters of the module whose method `method` is, as the interpreter saw them."""
    receiver = facts.index.instance_param(method)
    for name in facts.index.descendants(method.body, cst.Name):
        if name.value == receiver:
            held = facts.interpreter.modules_held(name)
            if held:
                return held
    return frozenset()


def _naming(facts, cut_node: cst.CSTNode, starved: frozenset, never: frozenset, events: list, calls=()) -> list:
    """Expressions in the cut's function that hold the starved modules (or
    parameters), each holding nothing a backward reaches: the fewest that
    cover the most."""
    interpreter = facts.interpreter
    # Where the cut is, then where the loss is backpropagated and the
    # optimizer steps: first what each function names, then what the methods
    # of its instance's class name as members, then the module's globals.
    # Then the functions whose calls led to the cut, nearest first (the
    # attention `forward` that hands its projections to a `@no_grad` rotary module).
    places = [cut_node] + list(reversed(calls)) + [event.node for event in events]
    candidates: dict = {}
    for place in places:
        _candidates(facts, facts.index.scope_of(place), starved, never, candidates)
        if candidates:
            break
    for place in places if not candidates else ():
        receiver = facts.index.receiver(place)
        klass = facts.index.enclosing(place, cst.ClassDef) if receiver else None
        if klass is None:
            continue
        for owner in interpreter.class_chain(klass):
            for method in facts.index.descendants(owner, cst.FunctionDef):
                if facts.index.instance_param(method) == receiver:
                    _candidates(facts, method, starved, never, candidates, prefix=receiver + ".")
        if candidates:
            break
    if not candidates:
        _candidates(facts, facts.module, starved, never, candidates, names_only=True)
    chosen, left = [], set(starved)
    while left and candidates:
        text, held = min(candidates.items(), key=lambda item: (-len(item[1] & left), len(item[0]), item[0]))
        if not held & left:
            break
        chosen.append(text)
        left -= held
        del candidates[text]
    return sorted(chosen)


def _candidates(facts, scope, starved, never, candidates: dict, names_only: bool = False, prefix: str = "") -> None:
    interpreter = facts.interpreter
    for kind in (cst.Name,) if names_only else (cst.Name, cst.Attribute):
        for expr in facts.index.descendants(scope, kind):
            if names_only and facts.index.scope_of(expr) is not facts.module:
                continue
            held = interpreter.modules_held(expr)
            value = interpreter.value_of(expr)
            if not held and value is not None and value.kind == "tensor" and isinstance(expr, cst.Attribute):
                held = interpreter.live(value)  # a parameter: `self.weight`
            if held and held & starved and held <= never:
                text = facts.module.code_for_node(expr)
                if text.startswith(prefix):
                    candidates.setdefault(text, held)


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

    Also flags, wherever the training code is written (a script, a
    function, a trainer's method, a helper it calls, a method of another
    object), a cut that keeps a module's output out of every loss the
    program backpropagates while an optimizer stepped right after that
    backward owns the module's parameters: `feats = encoder(x).detach()` in
    a loop whose `Adam` was built over `encoder.parameters()`, an encoder's
    output handed as `obs.detach()` to the method that steps the encoder's
    optimizer, a helper run under `torch.no_grad()`, an environment's
    `log_probs` that does `logits.clone().detach()`, a `copy.deepcopy` whose
    outputs train only the copy (MAML adapting a deep copy, then stepping the
    meta-optimizer). The program is followed as it runs, from its entry
    points and through the calls it makes, with the objects it builds
    (parameters from any iterable, param groups, `itertools.chain`, weights
    tied by assignment, forward hooks); a model handed in from elsewhere is
    one unknown object whose `.parameters()` and outputs are its own. A
    module some backward reaches, one the program freezes, one whose weights
    it sets by hand (an EMA or target-network update, `load_state_dict` from
    another module, `p.grad = ...`), and one handed to code detachlint
    cannot see are left alone, as is a cut under a switch that is not
    always on.

    Also flags the partial cut, term by term of a backpropagated loss
    (followed through `+`, weights, names, `sum(losses.values())`, the
    entries of a dict a helper returns, and the function that builds the
    loss, `loss, logs = model.compute_loss(x)`): where the function steps
    optimizers after `backward()`, a term that reaches none of the modules
    they step, only a cut output of one of them (the decoder's loss adding
    `self.kld(self.encoder(xp.detach()))`); elsewhere, a term left with no
    graph at all, though computed from a trainable member's output under
    `no_grad`, through `.detach()`, `map(torch.detach, ...)` (also in each
    block of an `nn.ModuleList` of a class of the file), or re-wrapped by
    `torch.tensor([...])`, which copies the values without their graph.
    Values are followed into dict outputs by key (`outputs["weights"]`),
    through loss classes (`criterion(outputs, y)` with `__call__` filling
    `loss["reg"]`), through helpers' returned tuples by position, and into
    the `forward` of a module handed in as an argument when every call of
    the file passes an instance of one class of it (a speaker encoder whose
    `forward` runs its preprocessing under `no_grad` cuts what it is given).
    Such a term's weight changes nothing. A term is also dead when it is
    built only from what forward hooks stored detached on an object
    (`self.features = output.detach()` in a hook function, a bound method,
    a callable instance or a `functools.partial` of one, read back as an
    attribute, a `@property` or a dict of lists): the layer hooked and
    everything feeding it get no gradient from it.

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
    - Members no optimizer steps, when the optimizers say which members
      they step: `SGD(model.head.parameters())` for a linear probe whose
      backbone output is detached. Where an optimizer's parameters cannot be
      read (a list built elsewhere), every trainable member counts.
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
    - A term whose cut input still reaches the stepped module another way
      (a cycle term on a detached latent whose reconstruction the decoder
      makes), a target computed under `no_grad` next to a live prediction,
      and an actor-critic advantage `returns - values.detach()` while
      `mse_loss(values, returns)` trains `values` in the same loss.
    - A detached hook capture used as a target next to a prediction that
      keeps its graph, or read only for logging.
    - A frozen encoder handed in whose `forward` computes only a scale
      under `no_grad` and keeps its input's graph: the generator trains
      through it.

    ## Fix safety
    No automatic fix: whether the cut is a bug or a missing freeze is the
    author's call.

    ## Verification
    The probe checks each kind of finding on the user's code. A cut in
    `forward`: it builds the module that holds the named members (the
    members' own class, or the file's model that builds it) with synthesized
    arguments, runs `forward` on synthesized inputs and
    backward from the outputs; confirmed when every `requires_grad=True`
    parameter of the named submodules or parameters has `grad None`. A loss
    backpropagated after a module's output was cut: confirmed when the graph
    of each loss the named helper (or the cut's own function) backpropagates
    reaches none of the module's trainable parameters. A dead loss term: the
    term's value is read where the code computes it (running the function
    that backpropagates the loss, as the file calls it, when that is not the
    cut's own code; the same for a term built from hook captures); confirmed when it has
    no graph, or one that reaches none of the named modules' trainable
    parameters. Refuted when the members got gradients, the graph reaches
    them, or they have nothing trainable.

    ## References
    - PyTorch docs, "Autograd mechanics": excluding subgraphs from backward.
    """

    code = "DL201"
    name = "detach-freezes-upstream"
    message = "{members} never {verb} gradients: {reason}"
    harm = "wrong-gradients"
    default_enabled = True

    valid = [
        # A target network the optimizer also holds, moved only by a moving average: not meant to train by gradients.
        """
        import copy
        import torch
        from torch import nn

        online = nn.Linear(4, 4)
        target = copy.deepcopy(online)
        opt = torch.optim.SGD(list(online.parameters()) + list(target.parameters()), lr=0.1)
        for x in [torch.randn(2, 4)]:
            z = target(x).detach()
            loss = ((online(x) - z) ** 2).mean()
            opt.zero_grad(); loss.backward(); opt.step()
            with torch.no_grad():
                for pt, po in zip(target.parameters(), online.parameters()):
                    pt.mul_(0.99).add_(po, alpha=0.01)
        """,
        # A linear probe: the encoder is frozen where it is built, though the optimizer lists it.
        """
        import torch
        from torch import nn

        def probe(encoder, head, pairs):
            encoder.requires_grad_(False)
            opt = torch.optim.SGD([*encoder.parameters(), *head.parameters()], lr=0.1)
            for x, y in pairs:
                f = encoder(x).detach()
                loss = nn.functional.cross_entropy(head(f), y)
                opt.zero_grad(); loss.backward(); opt.step()
        """,
        # The detach is a switch the caller may leave off: the encoder trains then.
        """
        import torch
        from torch import nn

        def run(enc, head, batches, freeze_encoder):
            opt = torch.optim.Adam(list(enc.parameters()) + list(head.parameters()))
            for x, y in batches:
                h = enc(x)
                if freeze_encoder:
                    h = h.detach()
                loss = nn.functional.mse_loss(head(h), y)
                opt.zero_grad(); loss.backward(); opt.step()
        """,
        # Every caller runs `update` under no_grad: its backward raises (DL302), nothing is starved.
        """
        import torch
        import torch.nn.functional as F
        from torch import nn

        class Discriminator(nn.Module):
            def __init__(self):
                super().__init__()
                self.trunk = nn.Linear(4, 1)
                self.optimizer = torch.optim.Adam(self.trunk.parameters())

            def update(self, batches):
                for x in batches:
                    d = self.trunk(x)
                    loss = F.binary_cross_entropy_with_logits(d, torch.ones_like(d))
                    self.optimizer.zero_grad()
                    loss.backward()
                    self.optimizer.step()

        def run(disc, batches):
            with torch.no_grad():
                disc.update(batches)
        """,
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
        # A term of the decoder's loss on a detached input still reaches the decoder.
        """
        import torch
        from torch import nn
        import torch.nn.functional as F

        class AutoEncoder(nn.Module):
            def __init__(self):
                super().__init__()
                self.encoder = nn.Linear(8, 2)
                self.decoder = nn.Linear(2, 8)
                self.opt_dec = torch.optim.Adam(self.decoder.parameters())

            def update_decoder(self, x):
                z = self.encoder(x).detach()
                recon = self.decoder(z)
                cycle = F.mse_loss(self.encoder(recon), z)
                loss = F.mse_loss(recon, x) + 0.1 * cycle
                self.opt_dec.zero_grad()
                loss.backward()
                self.opt_dec.step()
        """,
        # Actor-critic: the advantage is a stop-gradient, the value term trains `values`.
        """
        import torch
        import torch.nn.functional as F

        class Worker:
            def __init__(self, net, optimizer):
                self.net = net
                self.optimizer = optimizer
                self.log_probs, self.values = [], []

            def learn(self, returns):
                values = torch.cat(self.values)
                log_probs = torch.cat(self.log_probs)
                advantages = returns - values.detach()
                loss = -(log_probs * advantages).mean() + 0.5 * F.mse_loss(values, returns)
                self.optimizer.zero_grad()
                loss.backward()
                self.optimizer.step()
        """,
        # A target computed under no_grad next to a live prediction: the term trains the student.
        """
        import copy
        import torch
        from torch import nn
        import torch.nn.functional as F

        class Consistency(nn.Module):
            def __init__(self):
                super().__init__()
                self.model = nn.Linear(4, 4)
                self.model_ema = copy.deepcopy(self.model)
                self.model_ema.requires_grad_(False)

            def compute_loss(self, x, x_aug):
                losses = {}
                pred = self.model(x)
                with torch.no_grad():
                    target = self.model_ema(x_aug)
                losses["cons"] = F.mse_loss(pred, target)
                losses["l2"] = pred.pow(2).mean()
                return sum(losses.values()), losses

        def train_step(model, optimizer, x, x_aug):
            loss, logs = model.compute_loss(x, x_aug)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        """,
        # A frozen encoder handed in that keeps its input's graph: the generator trains through it.
        """
        import torch
        from torch import nn
        import torch.nn.functional as F

        class SpeakerEncoder(nn.Module):
            def __init__(self):
                super().__init__()
                self.conv = nn.Conv1d(1, 8, 3, padding=1)

            def forward(self, wav):
                with torch.no_grad():
                    scale = wav.abs().amax(-1, keepdim=True)
                return F.relu(self.conv(wav / (scale + 1e-6))).mean(-1)

        class Generator(nn.Module):
            def __init__(self):
                super().__init__()
                self.net = nn.Linear(4, 64)

            def forward(self, z):
                return torch.tanh(self.net(z)).unsqueeze(1)

        def train_step(generator, speaker_encoder, optimizer, z, wav):
            wav_hat = generator(z)
            loss = F.l1_loss(wav_hat, wav) - F.cosine_similarity(speaker_encoder(wav), speaker_encoder(wav_hat)).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()

        speaker_encoder = SpeakerEncoder().eval()
        speaker_encoder.requires_grad_(False)
        generator = Generator()
        train_step(generator, speaker_encoder, torch.optim.Adam(generator.parameters()), torch.randn(2, 4), torch.rand(2, 1, 64))
        """,
        # A hook keeps a layer's output detached as a target; the term's prediction keeps its graph.
        """
        import torch
        from torch import nn
        import torch.nn.functional as F


        class FeatureTap:
            def __init__(self, layer):
                self.feats = None
                layer.register_forward_hook(self._keep)

            def _keep(self, module, inputs, output):
                self.feats = output.detach()


        class Student(nn.Module):
            def __init__(self):
                super().__init__()
                self.body = nn.Linear(8, 8)
                self.head = nn.Linear(8, 2)
                self.tap = FeatureTap(self.body)

            def forward(self, x):
                return self.head(torch.relu(self.body(x)))

            def loss(self, x, y, hint):
                out = self(x)
                return F.cross_entropy(out, y) + 0.5 * F.mse_loss(self.body(hint), self.tap.feats)


        def train_step(model, optimizer, x, y, hint):
            loss = model.loss(x, y, hint)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()


        model = Student()
        train_step(model, torch.optim.SGD(model.parameters(), lr=0.1), torch.randn(4, 8), torch.randint(0, 2, (4,)), torch.randn(4, 8))
        """,
        # A detached hook capture only feeds a logged number, not the loss.
        """
        import torch
        from torch import nn
        import torch.nn.functional as F


        class FeatureTap:
            def __init__(self, layer):
                self.feats = None
                layer.register_forward_hook(self._keep)

            def _keep(self, module, inputs, output):
                self.feats = output.detach()


        class Student(nn.Module):
            def __init__(self):
                super().__init__()
                self.body = nn.Linear(8, 8)
                self.head = nn.Linear(8, 2)
                self.tap = FeatureTap(self.body)

            def forward(self, x):
                return self.head(torch.relu(self.body(x)))

            def loss(self, x, y, hint):
                out = self(x)
                self.hint_error = F.mse_loss(self.tap.feats, hint).item()
                return F.cross_entropy(out, y)


        def train_step(model, optimizer, x, y, hint):
            loss = model.loss(x, y, hint)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()


        model = Student()
        train_step(model, torch.optim.SGD(model.parameters(), lr=0.1), torch.randn(4, 8), torch.randint(0, 2, (4,)), torch.randn(4, 8))
        """,
    ]

    invalid = [
        # A new head put in place of the backbone's last layer, then run under the forward's no_grad.
        Invalid(
            """
            import torch
            from torch import nn

            class Trunk(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.body = nn.Conv2d(3, 8, 3)
                    self.head = nn.Linear(8, 1000)

                def forward(self, x):
                    return self.head(self.body(x).mean((2, 3)))

            class Clip(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.trunk = Trunk()
                    self.trunk.head = nn.Linear(8, 32)
                    self.rnn = nn.GRU(32, 16)
                    self.out = nn.Linear(16, 2)

                def forward(self, frames):
                    steps = []
                    for t in range(frames.size(1)):
                        with torch.no_grad():
                            steps.append(self.trunk(frames[:, t]))
                    seq, _ = self.rnn(torch.stack(steps))
                    return self.out(seq[-1])

            net = Clip()
            opt = torch.optim.Adam(net.parameters())
            for frames, y in [(torch.randn(2, 3, 3, 8, 8), torch.tensor([0, 1]))]:
                opt.zero_grad()
                nn.functional.cross_entropy(net(frames), y).backward()
                opt.step()
            """,
            line=24,
        ),
        # The models are handed in; the optimizer is built from a comprehension over both.
        Invalid(
            """
            import torch
            import torch.nn as nn

            def train(enc, clf, loader):
                params = [p for p in enc.parameters()] + [p for p in clf.parameters()]
                optim = torch.optim.Adam(params)
                for batch, target in loader:
                    z = enc(batch)
                    z = z.detach()
                    l = nn.functional.mse_loss(clf(z), target)
                    optim.zero_grad(); l.backward(); optim.step()
            """,
            line=9,
            message="`enc` never gets gradients: `z.detach()` on line 9 keeps its output out of the loss `l.backward()` backpropagates, yet `optim` steps its parameters",
        ),
        # A trainer whose helper method cuts, with the optimizer chained over both models.
        Invalid(
            """
            import itertools
            import torch
            from torch import nn

            class Trainer:
                def __init__(self, backbone, classifier):
                    self.backbone = backbone
                    self.classifier = classifier
                    self.opt = torch.optim.AdamW(itertools.chain(backbone.parameters(), classifier.parameters()))

                def embed(self, x):
                    with torch.no_grad():
                        return self.backbone(x)

                def train_step(self, x, y):
                    loss = nn.functional.cross_entropy(self.classifier(self.embed(x)), y)
                    self.opt.zero_grad()
                    loss.backward()
                    self.opt.step()
            """,
            line=12,
            message="`self.backbone` never gets gradients: `with torch.no_grad():` on line 12 keeps its output out of the loss `loss.backward()` backpropagates, yet `self.opt` steps its parameters",
        ),
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
        # The decoder's adversarial term on prior samples reaches the decoder only through a detach.
        Invalid(
            """
            import torch
            from torch import nn
            import torch.nn.functional as F

            class IntroVAE(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.encoder = nn.Linear(8, 4)
                    self.decoder = nn.Linear(2, 8)
                    self.opt_dec = torch.optim.Adam(self.decoder.parameters())

                def kld(self, h):
                    mu, logvar = h.chunk(2, dim=1)
                    return -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp(), dim=1).mean()

                def decoder_losses(self, x, z):
                    xr = self.decoder(z)
                    xp = self.decoder(torch.randn_like(z))
                    return {
                        "rec": F.mse_loss(xr, x),
                        "adv_rec": self.kld(self.encoder(xr)),
                        "adv_samp": self.kld(self.encoder(xp.detach())),
                    }

                def update_decoder(self, x, z):
                    losses = self.decoder_losses(x, z)
                    loss = losses["rec"] + 0.5 * (losses["adv_rec"] + losses["adv_samp"])
                    self.opt_dec.zero_grad()
                    loss.backward()
                    self.opt_dec.step()
            """,
            line=22,
            message="`self.decoder` never gets gradients: the loss term `self.kld(self.encoder(xp.detach()))` reaches it only through `xp.detach()` on line 22",
        ),
        # The student's prediction is pushed through the EMA copy under no_grad: the term is a constant.
        Invalid(
            """
            import copy
            import torch
            from torch import nn
            import torch.nn.functional as F

            class ConsistencyPolicy(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.model = nn.Linear(4, 4)
                    self.model_ema = copy.deepcopy(self.model)
                    self.model_ema.requires_grad_(False)

                def compute_loss(self, x, x_next):
                    losses = {}
                    pred = self.model(x)
                    with torch.no_grad():
                        pred = self.model_ema(pred)
                        target = self.model_ema(x_next)
                    losses["ctm"] = F.mse_loss(pred, target)
                    losses["dsm"] = F.mse_loss(self.model(x_next), x)
                    return sum(losses.values()), losses

            def train_step(model, optimizer, x, x_next):
                loss, logs = model.compute_loss(x, x_next)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
            """,
            line=16,
            message="`self.model` never gets gradients: the loss term `F.mse_loss(pred, target)` reaches it only through `with torch.no_grad():` on line 16",
        ),
        # The policy's log-probabilities re-wrapped by `torch.tensor`: a copy of the values with no graph.
        Invalid(
            """
            import torch
            import torch.nn.functional as F
            from torch.distributions import Categorical

            class Worker:
                def __init__(self, net, optimizer):
                    self.net = net
                    self.optimizer = optimizer
                    self.memory = []

                def act(self, state):
                    probs, value = self.net(state)
                    dist = Categorical(probs)
                    action = dist.sample()
                    self.memory.append((value, dist.log_prob(action)))
                    return action.item()

                def learn(self, returns):
                    values = torch.cat([m[0] for m in self.memory])
                    log_probs = torch.tensor([m[1] for m in self.memory])
                    advantages = returns - values.detach()
                    loss = -(log_probs * advantages).mean() + F.mse_loss(values, returns)
                    self.optimizer.zero_grad()
                    loss.backward()
                    self.optimizer.step()
            """,
            line=20,
            message="`self.net` never gets gradients",
        ),
        # Every layer's auxiliary loss is built from detached tensors only.
        Invalid(
            """
            import torch
            from torch import nn
            import torch.nn.functional as F

            class Layer(nn.Module):
                def __init__(self, dim):
                    super().__init__()
                    self.proj = nn.Linear(dim, dim)
                    self.compress = nn.Linear(dim, dim)

                def forward(self, x):
                    out = self.proj(x)
                    summary = self.compress(x)
                    a, b = map(torch.detach, (out, summary))
                    aux = F.mse_loss(a, b)
                    return out, aux

            class Model(nn.Module):
                def __init__(self, dim, depth):
                    super().__init__()
                    self.layers = nn.ModuleList([Layer(dim) for _ in range(depth)])

                def forward(self, x):
                    aux_loss = 0.0
                    for layer in self.layers:
                        x, aux = layer(x)
                        aux_loss = aux_loss + aux
                    return x, aux_loss

            def train(loader):
                model = Model(16, 2)
                optimizer = torch.optim.Adam(model.parameters())
                for x, y in loader:
                    out, aux_loss = model(x)
                    loss = F.mse_loss(out, y) + aux_loss
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
            """,
            line=14,
            message="`self.compress` and `self.proj` never get gradients: the loss term `F.mse_loss(a, b)`",
        ),
        # A regulariser on a dict output that a helper detached, summed by a loss class.
        Invalid(
            """
            import torch
            from torch import nn
            import torch.nn.functional as F

            def soft_weights(query, cage):
                w = 1.0 / (torch.cdist(query, cage) + 1e-6)
                return w / w.sum(dim=-1, keepdim=True)

            def deform(cage, new_cage, query):
                weights = soft_weights(query, cage)
                weights = weights.detach()
                return torch.bmm(weights, new_cage), weights

            class CageNet(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.encoder = nn.Linear(3, 16)
                    self.cage_head = nn.Linear(16, 18)
                    self.offset_head = nn.Linear(16, 18)

                def forward(self, shape):
                    code = self.encoder(shape).max(dim=1)[0]
                    cage = self.cage_head(code).view(-1, 6, 3)
                    new_cage = cage + self.offset_head(code).view(-1, 6, 3)
                    deformed, weights = deform(cage, new_cage, shape)
                    return {"deformed": deformed, "weights": weights}

            class Losses:
                def __init__(self, reg_weight):
                    self.reg_weight = reg_weight

                def __call__(self, outputs, target):
                    loss = {}
                    loss["fit"] = F.mse_loss(outputs["deformed"], target)
                    loss["reg"] = outputs["weights"].pow(2).sum(-1).mean() * self.reg_weight
                    return loss

            def train_step(net, criterion, optimizer, shape, target):
                outputs = net(shape)
                loss = criterion(outputs, target)
                total = sum(loss.values())
                optimizer.zero_grad()
                total.backward()
                optimizer.step()

            net = CageNet()
            train_step(net, Losses(1.0), torch.optim.Adam(net.parameters()), torch.randn(2, 20, 3), torch.randn(2, 20, 3))
            """,
            line=11,
            message="`self.cage_head` and `self.encoder` never get gradients",
        ),
        # A frozen encoder handed in whose `forward` preprocesses its input under no_grad.
        Invalid(
            """
            import torch
            from torch import nn
            import torch.nn.functional as F

            class SpeakerEncoder(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.conv = nn.Conv1d(1, 8, 3, padding=1)
                    self.fc = nn.Linear(8, 16)

                def forward(self, wav):
                    with torch.no_grad():
                        wav = (wav.abs() + 1e-6).log()
                    h = F.relu(self.conv(wav)).mean(-1)
                    return F.normalize(self.fc(h), dim=-1)

            class Generator(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.net = nn.Linear(4, 64)

                def forward(self, z):
                    return torch.tanh(self.net(z)).unsqueeze(1)

            def generator_loss(generator, speaker_encoder, z, wav):
                wav_hat = generator(z)
                loss_wav = F.l1_loss(wav_hat, wav)
                loss_spk = -F.cosine_similarity(speaker_encoder(wav), speaker_encoder(wav_hat)).mean()
                return loss_wav + 9.0 * loss_spk

            def train_step(generator, speaker_encoder, optimizer, z, wav):
                loss = generator_loss(generator, speaker_encoder, z, wav)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()

            speaker_encoder = SpeakerEncoder().eval()
            speaker_encoder.requires_grad_(False)
            generator = Generator()
            train_step(generator, speaker_encoder, torch.optim.Adam(generator.parameters()), torch.randn(2, 4), torch.rand(2, 1, 64))
            """,
            line=12,
            message="`generator` never gets gradients: the loss term `F.cosine_similarity(",
        ),
        # A forward hook keeps the layer's output detached on an object; the hint term is built from it alone.
        Invalid(
            """
            import torch
            from torch import nn
            import torch.nn.functional as F


            class FeatureTap:
                def __init__(self, layer):
                    self.feats = None
                    layer.register_forward_hook(self._keep)

                def _keep(self, module, inputs, output):
                    self.feats = output.detach()


            class Student(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.body = nn.Linear(8, 8)
                    self.head = nn.Linear(8, 2)
                    self.tap = FeatureTap(self.body)

                def forward(self, x):
                    return self.head(torch.relu(self.body(x)))

                def loss(self, x, y, hint):
                    out = self(x)
                    return F.cross_entropy(out, y) + 0.5 * F.mse_loss(self.tap.feats, hint)


            def train_step(model, optimizer, x, y, hint):
                loss = model.loss(x, y, hint)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()


            model = Student()
            train_step(model, torch.optim.SGD(model.parameters(), lr=0.1), torch.randn(4, 8), torch.randint(0, 2, (4,)), torch.randn(4, 8))
            """,
            line=12,
            message="`layer` and the layers feeding it never get gradients: the forward hook `_keep` stores `output.detach()` in `self.feats` on line 12, so the loss term `F.mse_loss(self.tap.feats, hint)` reaches them only through that store",
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
        if self.facts.values.backward_target(node) is not None:
            self._check_terms(node)

    def finish(self) -> None:
        """Cuts the interpreter saw keep parameters an optimizer steps out of
        every loss the program backpropagates, in whatever function, loop or
        helper they are written."""
        facts = self.facts
        interpreter = facts.interpreter
        never = interpreter.never_trained()
        reported = [r.node for r in self.reports]
        # One finding per place the graph was cut: a `with no_grad()` block
        # counts once for every call under it.
        places: dict = {}
        cut_nodes: dict = {}  # a place's first cut
        for cut_node, starved, backwards, steps in interpreter.starved_cuts():
            if cut_node in interpreter.forced:
                continue  # a new leaf made from the cut values: DL505's, where it is made
            place = _cut_place(facts, cut_node)
            if place is None:
                continue
            node, grad_off = place
            function = facts.index.enclosing(node, cst.FunctionDef)
            if grad_off and function is not None and facts.modules.class_of(function) is not None:
                # Autograd switched off inside a module's own forward freezes its
                # own members on purpose (in its other methods, those it keeps in
                # eval mode); what it is handed is another matter, and so are
                # members the program unfreezes (`requires_grad = True`) or a new
                # head it puts in place of a layer (`backbone.fc = nn.Linear(...)`).
                own = _own_members(facts, function)
                if function.name.value != "forward":
                    own = own & interpreter.eval_switched
                starved = starved - (own - interpreter.thawed - interpreter.grafted)
                if not starved:
                    continue
            cut_nodes.setdefault(node, cut_node)
            found = places.setdefault(node, [set(), [], [], grad_off])
            found[0] |= starved
            found[1].extend(backwards)
            found[2].extend(steps)
        for node, (starved, backwards, steps, grad_off) in places.items():
            if any(r is node or facts.index.is_inside(node, r) or facts.index.is_inside(r, node) for r in reported):
                continue
            members = _naming(facts, node, frozenset(starved), never, backwards + steps, interpreter.cut_calls.get(cut_nodes[node], ()))
            if not members:
                continue
            names, verb, their = _names(members)
            optimizers = sorted({facts.module.code_for_node(s.node.func.value) for s in steps if isinstance(s.node, cst.Call) and isinstance(s.node.func, cst.Attribute)})
            # Where the backward's calls leave the cut's: the helper that
            # backpropagates, called after the cut's value was made.
            backward = backwards[0].node
            cut_calls = interpreter.cut_calls.get(cut_nodes[node], ())
            shared = 0
            while shared < min(len(cut_calls), len(backwards[0].calls)) and cut_calls[shared] is backwards[0].calls[shared]:
                shared += 1
            helper = backwards[0].calls[shared] if shared < len(backwards[0].calls) else None
            if isinstance(node, cst.With):
                how = f"`with {facts.module.code_for_node(node.items[0].item)}:` on line {facts.line_of(node)}"
            elif isinstance(node, cst.Decorator):
                how = f"`@{facts.module.code_for_node(node.decorator)}` on line {facts.line_of(node)}"
            else:
                code = facts.module.code_for_node(node)
                code = code if len(code) <= 60 else code[:57] + "..."
                how = f"`{code}`, run with autograd off on line {facts.line_of(node)}," if grad_off else f"`{code}` on line {facts.line_of(node)}"
            if helper is not None:
                reason = (
                    f"{how} keeps {their} output out of the loss `{facts.module.code_for_node(helper.func)}(...)` backpropagates, "
                    f"yet it steps `{'`, `'.join(optimizers)}` over {their} parameters"
                )
            else:
                reason = (
                    f"{how} keeps {their} output out of the loss `{facts.module.code_for_node(backward.func)}()` backpropagates, "
                    f"yet `{'`, `'.join(optimizers)}` steps {their} parameters"
                )
            self.report(node, members=names, verb=verb, reason=reason)
            reported.append(node)

    def _losses_of(self, scope: cst.CSTNode) -> dict:
        """backward call -> (modules its loss reaches, {module: cut}) for every
        backward of a function or script, followed once per scope."""
        cache = self.__dict__.setdefault("_losses", {})
        if scope not in cache:
            facts = self.facts
            found = {}
            for call in facts.index.calls_in(scope):
                target = facts.values.backward_target(call)
                if target is not None:
                    cuts: dict = {}
                    found[call] = (module_origins(facts, target, 0, cuts), cuts)
            cache[scope] = found
        return cache[scope]

    def _check_terms(self, node: cst.Call) -> None:
        """A term of the backpropagated loss that reaches what it should train
        only through a cut: where the function then steps optimizers, a term
        that reaches none of the modules they step but the output of one of
        them cut (`self.encoder(xp.detach())` in the decoder's loss); else a
        term with no graph left at all, computed from a trainable member's
        output under `no_grad` or through a `.detach()`."""
        facts = self.facts
        seen = facts.interpreter.value_of(node.func.value) if isinstance(node.func, cst.Attribute) else None
        if seen is not None and not seen.opaque and not facts.interpreter.in_graph_value(seen):
            return  # no graph left at all: the backward raises (DL203, DL302, DL303)
        function = facts.index.enclosing(node, cst.FunctionDef)
        steps = []
        if function is not None and not facts.gradient_paths.moves_gradients_by_hand(function):
            # (Gradients handed from a copy to the original by hand: what is
            # stepped is not what the loss reaches.)
            steps = [(s, m) for s, m in facts.optimizers.steps_in(function) if facts.index.before(node, s)]
        stepped = {m for step, modules in steps for m in modules if _on_instance(facts, m, step)}
        reported = self.__dict__.setdefault("_reported_cuts", set())
        terms = []
        for summand in facts.shared("loss_terms", LossTerms).summands(facts.values.backward_target(node)):
            cuts = CutLog()
            terms.append((summand, module_origins(facts, summand.expr, 0, cuts, bound=summand.bound), cuts))
        self._check_hook_captures(node, [summand for summand, _, _ in terms], reported)
        trained = set().union(*(live for _, live, _ in terms)) - {UNKNOWN} if terms else set()
        for summand, live, cuts in terms:
            if UNKNOWN in live:
                continue
            cut_off = {}
            for module, cut_node in cuts.every:
                if module in live or facts.index.enclosing(cut_node, cst.If) is not None:
                    continue
                if isinstance(cut_node, cst.FunctionDef) and facts.index.is_inside(node, cut_node):
                    continue  # the backward itself runs with autograd off: it raises (DL302)
                if _stop_gradient(facts, cut_node, terms):
                    continue  # `values.detach()` next to a term that trains `values`
                cut_off.setdefault(module, cut_node)
            if stepped:
                if live & stepped:
                    continue
                starved = sorted(m for m in cut_off if m in stepped)
            else:
                if live or any(isinstance(n, cst.Call) and copied_module(facts.names, n) is not None for _, n in cuts.every):
                    continue  # the term trains something: a module, or a copy of one
                starved = sorted(
                    m for m, n in cut_off.items() if m != UNKNOWN and (m in trained or _meant_to_train(facts, m, n))
                )
            by_cut: dict = {}
            for module in starved:
                by_cut.setdefault(cut_off[module], []).append(module)
            for cut_node, modules in by_cut.items():
                if cut_node in reported:
                    continue
                reported.add(cut_node)
                names, verb, their = _names(modules)
                term = facts.module.code_for_node(summand.expr)
                term = term if len(term) <= 40 else term[:37] + "..."
                reason = (
                    f"the loss term `{term}` reaches {'them' if len(modules) > 1 else 'it'} only through "
                    f"{_cut_text(facts, cut_node)} on line {facts.line_of(cut_node)}, so the term's weight changes nothing"
                )
                # Where the loss is backpropagated and the term computed: `--verify` runs that code.
                details = {"loss_line": facts.line_of(node), "term_line": facts.line_of(summand.expr) if summand.expr in facts.positions else None}
                self.report(cut_node, details=details, members=names, verb=verb, reason=reason)

    def _check_hook_captures(self, node: cst.Call, summands: list, reported: set) -> None:
        """A term of the backpropagated loss built only from what forward
        hooks stored detached (`self.features = output.detach()`): it has no
        graph, so it trains neither the hooked layer nor what feeds it."""
        facts = self.facts
        for summand in summands:
            for capture in facts.values.across_calls.cut_by_hook_captures(summand.expr):
                if capture.cut in reported:
                    continue
                reported.add(capture.cut)
                term = facts.module.code_for_node(summand.expr)
                term = term if len(term) <= 40 else term[:37] + "..."
                reason = (
                    f"the forward hook `{capture.hook.name.value}` stores `{facts.module.code_for_node(capture.cut)}` "
                    f"in `self.{capture.attribute}` on line {facts.line_of(capture.cut)}, so the loss term `{term}` "
                    "reaches them only through that store: it has no graph and its weight changes nothing"
                )
                hooked = facts.module.code_for_node(capture.hooked)
                details = {"loss_line": facts.line_of(node), "term_line": facts.line_of(summand.expr) if summand.expr in facts.positions else None}
                self.report(capture.cut, details=details, members=f"`{hooked}` and the layers feeding it", verb="get", reason=reason)
