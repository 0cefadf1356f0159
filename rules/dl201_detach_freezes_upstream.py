from __future__ import annotations

import libcst as cst

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


class DetachFreezesUpstream(Rule):
    """`detach()` in `forward` silently freezes the layers before it.

    ## What it does
    Flags a `.detach()` or a `.data` read in an `nn.Module`'s `forward` (or a
    method `forward` calls) whose result feeds what `forward` returns, when it
    cuts *every* path from some trainable submodules or parameters declared
    in `__init__` to the outputs (`x @ self.weight.data` is such a cut). The
    message names those members and the line of the cut.

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
    message = "{members} never {verb} gradients: the `{cut}` on line {line} cuts {their} {what} off from everything `{method}` returns"
    severity = "error"
    default_enabled = True

    valid = [
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
            self.report(
                cut,
                details=details,
                members=names,
                verb=verb,
                their=their,
                cut=".data" if isinstance(cut, cst.Attribute) else ".detach()",
                what="value" if kinds == {"parameter"} else "output",
                line=str(self.facts.line_of(cut)),
                method="forward",
            )
