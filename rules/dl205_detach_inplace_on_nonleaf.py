from __future__ import annotations

from typing import Optional

import libcst as cst

from detachlint.analysis import Holds
from detachlint.analysis.aliases import StorageAliases
from detachlint.analysis.views import Views
from detachlint.rule import Invalid, Rule

_CUT = "cuts `{name}` itself out of the graph, not a copy: `{holder}` is used afterwards as if it still had gradients, so backward through it raises or leaves the layers before `{name}` untrained"
_VIEW = "raises \"Can't detach views in-place\": `{name}` is a view (`{origin}`); use `{name} = {name}.detach()`"
_ROW = "raises \"Can't detach views in-place\" when `{iterated}` holds one tensor (`{origin}` gives one): iterating a tensor yields its rows, which are views; check `isinstance({iterated}, tuple)` and detach a single tensor as a whole"
_HELD = "raises \"Can't detach views in-place\" when `{name}` reaches `{element}`, one of the tensors `{iterated}` holds: it is a view (`{origin}` on line {line}); detach it out of place (`{element} = {element}.detach()`)"
_IN_GRAPH = Holds.ACTIVATION | Holds.LOSS
_NOT_ACTIVATION = Holds.PARAM | Holds.LEAF | Holds.DETACHED


class DetachInplaceOnNonleaf(Rule):
    """`t.detach_()` cuts `t` itself out of the graph, for every holder of it.

    ## What it does
    Flags `t.detach_()` on an activation when something else still uses the
    same tensor as if it were in the graph afterwards: `t` itself when the
    call's result is taken as a detached copy (`target = out.detach_()`), or
    another name holding `t` (an alias `a = t`, a list `outs.append(t)`, a
    dict `d[k] = t`) read after the call. Also flags `t.detach_()` when `t`
    is a view: basic indexing of a tensor (`out[:, -1]`), a view method
    (`view`, `t()`, `reshape`, `flatten`, ...), a piece of
    `split`/`chunk`/`unbind`, a gradient returned by
    `torch.autograd.grad`, or what a function of the file returns as one;
    and `for s in state: s.detach_()` when `state` can hold one tensor
    rather than a tuple (a torch factory, or a function of the file that
    returns one on some path, such as a `begin_state()` that gives a GRU a
    tensor and an LSTM an `(h, c)` tuple): its rows are views. And
    `for h in self._all: h.detach_()` in a decoder state's method when one
    of the tensors that attribute (or property) holds is a view, as the
    class, a base or a subclass in the file sets it
    (`self.input_feed = h.new_zeros(b, n).unsqueeze(0)`).

    ## Why is this bad?
    `detach_()` does not make a detached copy: it turns the tensor itself
    into a leaf without history, and every name, list or dict holding it now
    holds a tensor without a graph. The cut cannot be undone. A loss computed
    from any of them either raises "element 0 of tensors does not require
    grad and does not have a grad_fn" at `backward()`, or, when other terms
    still require grad, quietly gives the layers before `t` no gradient.
    On a view, `detach_()` raises "Can't detach views in-place" (whether or
    not anything requires grad): `reshape` of a contiguous tensor, the rows
    got by iterating a tensor, `nn.Linear`'s gradients from
    `torch.autograd.grad` are all views.

    ## Example
    ```python
    import torch.nn.functional as F

    def consistency_loss(model, x, x_aug):
        out = model(x)
        target = out.detach_()
        return F.mse_loss(out, target) + F.mse_loss(model(x_aug), target)
    ```

    Use instead:
    ```python
    import torch.nn.functional as F

    def consistency_loss(model, x, x_aug):
        out = model(x)
        target = out.detach()
        return F.mse_loss(out, target) + F.mse_loss(model(x_aug), target)
    ```

    ## Not flagged
    - `detach_()` on a tensor that is no view: the result of an operation
      (a focal weight `pt = torch.pow(1 - p, gamma)` made constant in place),
      the elements of an LSTM's `(h, c)` tuple.
    - A view detached out of place (`last = last.detach()`).
    - `for s in state: s.detach_()` under a test of `state`'s type
      (`if not isinstance(state, tuple): state.detach_()` with the loop in
      the `else`): the author tells a tensor from a tuple.
    - `detach_()` on parameters and leaves (re-parameterisation helpers call
      `para.detach_()` on freshly built weights).
    - Truncated backpropagation through time: `hidden.detach_()` on the state
      carried between batches, when nothing else holds it.
    - A tensor with no other holder, detached as a statement
      (`feats.detach_()` is `feats = feats.detach()`; whether that freezes
      layers is DL201's question).
    - Holders read afterwards only outside the graph: under
      `torch.no_grad()`, or through `.item()`, `.detach()`, `.cpu()`.
    - Holders never read after the call.
    - Tensors computed under `torch.no_grad()`, which have no graph to lose.

    ## Fix safety
    No automatic fix: whether the author wanted a detached copy
    (`t.detach()`) or meant to cut every holder is a judgement call.

    ## Verification
    The probe runs the code to the call. On a view: confirmed when the call
    raises "Can't detach views in-place", refuted when the tensor is no view
    at run time and the call runs through. On a shared tensor: it reads the
    tensor's graph just before the call and the other holder right after
    it, then watches the backward that follows (or one from what the code
    returns): confirmed when the holder lost the graph and the backward
    raises "does not require grad" or leaves parameters upstream of the
    tensor without gradient. When every one of them still got a gradient
    (from the loss's other terms), it runs again with `x = x.detach()` in
    the call's place and confirms only when the gradients differ, refuting
    when they are the same. Refuted too when there was no graph to cut, even
    with the synthesized inputs requiring grad.

    ## References
    - PyTorch docs, `torch.Tensor.detach_`: "Detaches the Tensor from the
      graph that created it, making it a leaf."
    - PyTorch docs, `torch.Tensor.detach`: the out-of-place version, which
      returns a new tensor.
    """

    code = "DL205"
    name = "detach-inplace-on-nonleaf"
    message = "`{name}.detach_()` {problem}"
    harm = "wrong-gradients"
    default_enabled = True

    valid = [
        # Parameters of a freshly fused conv.
        """
        import torch
        from torch import nn

        class RepBlock(nn.Module):
            def __init__(self, c):
                super().__init__()
                self.conv = nn.Conv2d(c, c, 3, padding=1)

            def reparameterize(self):
                self.reparam = nn.Conv2d(3, 3, 3)
                for para in self.parameters():
                    para.detach_()
        """,
        # Truncated BPTT: the carried hidden state has no other holder.
        """
        import torch

        def train(model, batches, criterion, optimizer):
            output, hidden = model(batches[0][0], None)
            for x, y in batches:
                hidden.detach_()
                output, hidden = model(x, hidden)
                loss = criterion(output, y)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
        """,
        # The only holder: the same as `feats = feats.detach()`.
        """
        import torch
        from torch import nn

        class LinearProbe(nn.Module):
            def __init__(self):
                super().__init__()
                self.backbone = nn.Linear(8, 8)
                self.head = nn.Linear(8, 2)

            def forward(self, x):
                feats = self.backbone(x)
                feats.detach_()
                return self.head(feats)
        """,
        # Holders read afterwards only outside the graph.
        """
        import torch

        def step(model, x, y, criterion, history):
            out = model(x)
            history.append(out)
            out.detach_()
            with torch.no_grad():
                mean = torch.stack(history).mean()
            return mean.item(), history[-1].item()
        """,
        # The holder is not read after the call.
        """
        import torch

        def step(model, x):
            out = model(x)
            snapshot = out
            out.detach_()
            return out
        """,
        # The (h, c) tuple of an LSTM: its elements are whole tensors, not views.
        """
        import torch

        def train(model, loader, criterion, optimizer):
            hidden = None
            for x, y in loader:
                output, hidden = model(x, hidden)
                loss = criterion(output, y)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                for h in hidden:
                    h.detach_()
        """,
        # The state's type is checked: the loop only runs over an (h, c) tuple.
        """
        import torch

        def train_epoch(net, loader, criterion, optimizer):
            state = None
            for x, y in loader:
                if state is None:
                    state = net.begin_state(x.shape[0])
                elif not isinstance(state, tuple):
                    state.detach_()
                else:
                    for s in state:
                        s.detach_()
                y_hat, state = net(x, state)
                loss = criterion(y_hat, y)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
        """,
        # A view detached out of place: a new tensor, no error.
        """
        import torch

        def fast_weights(net, loss, lr):
            params = list(net.parameters())
            grads = [g.detach() for g in torch.autograd.grad(loss, params)]
            last = grads[-1].view(-1)
            last = last.detach()
            return [p - lr * g for p, g in zip(params, grads)], last
        """,
        # The result of an operation is no view (a focal weight made constant in place).
        """
        import torch
        import torch.nn.functional as F

        def focal_loss(logits, targets, gamma=2.0):
            probs = F.softmax(logits, dim=1).gather(1, targets.view(-1, 1)).view(-1)
            pt = torch.pow(1 - probs, gamma)
            pt.detach_()
            return -(pt * probs.log()).mean()
        """,
        # Computed under no_grad: nothing to cut.
        """
        import torch

        def teacher_targets(teacher, x):
            with torch.no_grad():
                logits = teacher(x)
            target = logits.detach_()
            return target, logits
        """,
    ]

    invalid = [
        Invalid(
            """
            import torch

            class DecoderState:
                def detach(self):
                    for h in self._all:
                        h.detach_()

            class RNNDecoderState(DecoderState):
                def __init__(self, hidden, size):
                    self.hidden = (hidden,)
                    self.input_feed = hidden.new_zeros(hidden.size(1), size).unsqueeze(0)

                @property
                def _all(self):
                    return self.hidden + (self.input_feed,)
            """,
            line=6,
            message="when `h` reaches `self.input_feed`, one of the tensors `self._all` holds: it is a view (`.unsqueeze(0)` on line 11)",
        ),
        Invalid(
            """
            import torch.nn.functional as F

            def consistency_loss(model, x, x_aug):
                out = model(x)
                target = out.detach_()
                return F.mse_loss(out, target) + F.mse_loss(model(x_aug), target)
            """,
            line=5,
            column=14,
            message="`out.detach_()` cuts `out` itself out of the graph, not a copy: `out` is used afterwards",
        ),
        Invalid(
            """
            import torch

            def multi_scale_loss(model, images, targets, criterion, metric):
                outputs = []
                for scale in (1.0, 0.5):
                    logits = model(torch.nn.functional.interpolate(images, scale_factor=scale))
                    outputs.append(logits)
                    logits.detach_()
                    metric.update(logits)
                loss = sum(criterion(o, targets) for o in outputs)
                loss.backward()
            """,
            line=8,
            message="`outputs` is used afterwards",
        ),
        Invalid(
            """
            from torch import nn

            class Encoder(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.body = nn.Linear(16, 16)
                    self.head = nn.Linear(16, 4)

                def forward(self, x):
                    h = self.body(x)
                    features = h
                    h.detach_()
                    return self.head(features), h
            """,
            line=12,
            message="`features` is used afterwards",
        ),
        # A helper returns a reshape view; detaching it in place raises.
        Invalid(
            """
            import torch
            from torch import nn

            def to_matrix(q):
                m = torch.stack((q, q * 2, q * 3), -1)
                return m.reshape(q.shape[:-1] + (3, 3))

            class Block(nn.Module):
                def __init__(self, detach_rotations=True):
                    super().__init__()
                    self.to_matrix = to_matrix
                    self.detach_rotations = detach_rotations
                    self.proj = nn.Linear(9, 9)

                def forward(self, q):
                    rotations = self.to_matrix(q)
                    if self.detach_rotations:
                        rotations.detach_()
                    return self.proj(rotations.flatten(-2))
            """,
            line=18,
            message="`rotations.detach_()` raises \"Can't detach views in-place\": `rotations` is a view (`m.reshape(",
        ),
        # Gradients from `autograd.grad` can be views (`nn.Linear`'s are).
        Invalid(
            """
            import torch

            def fast_weights(net, loss, lr):
                params = list(net.parameters())
                grads = torch.autograd.grad(loss, params, create_graph=True)
                for g in grads:
                    g.detach_()
                return [p - lr * g for p, g in zip(params, grads)]
            """,
            line=7,
            message="`g` is a view (`torch.autograd.grad(...)`)",
        ),
        # The state is one tensor for a GRU: iterating it yields row views.
        Invalid(
            """
            import torch
            from torch import nn

            class RNNModel(nn.Module):
                def __init__(self, rnn_layer):
                    super().__init__()
                    self.rnn = rnn_layer

                def begin_state(self, batch_size):
                    if not isinstance(self.rnn, nn.LSTM):
                        return torch.zeros((self.rnn.num_layers, batch_size, self.rnn.hidden_size))
                    shape = (self.rnn.num_layers, batch_size, self.rnn.hidden_size)
                    return torch.zeros(shape), torch.zeros(shape)

            def train_epoch(net, loader, criterion, optimizer):
                state = None
                for x, y in loader:
                    if state is None:
                        state = net.begin_state(x.shape[0])
                    else:
                        for s in state:
                            s.detach_()
                    y_hat, state = net.rnn(x, state)
                    loss = criterion(y_hat, y)
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
            """,
            line=22,
            message="when `state` holds one tensor (`net.begin_state(x.shape[0])` gives one)",
        ),
        # Basic indexing of an activation is a view.
        Invalid(
            """
            from torch import nn

            class LastStep(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.rnn = nn.GRU(8, 8, batch_first=True)
                    self.fc = nn.Linear(8, 2)

                def forward(self, x):
                    out, _ = self.rnn(x)
                    last = out[:, -1]
                    last.detach_()
                    return self.fc(last)
            """,
            line=12,
        ),
    ]

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if not (isinstance(func, cst.Attribute) and func.attr.value == "detach_" and isinstance(func.value, cst.Name)):
            return
        facts = self.facts
        name = func.value.value
        view = facts.shared("views", Views).view_origin(func.value)
        if view is not None and not facts.intent.is_test_code(node):
            origin = facts.module.code_for_node(view)
            if len(origin) > 50 or "\n" in origin:
                origin = facts.module.code_for_node(view.func) + "(...)" if isinstance(view, cst.Call) else "..."
            loop = facts.values.scope(func.value).assignment_before(name, func.value)
            if (
                loop is not None and isinstance(loop[1], cst.For) and isinstance(loop[1].iter, cst.Name)
                and facts.shared("views", Views).tensor_iterated(loop[1], loop[1].iter) is view
            ):
                # `for s in state:` where `state` may hold one tensor: its rows are views.
                problem = _ROW.format(name=name, origin=origin, iterated=loop[1].iter.value)
            else:
                problem = _VIEW.format(name=name, origin=origin)
            self.report(node, name=name, problem=problem)
            return
        loop = facts.values.scope(func.value).assignment_before(name, func.value)
        if loop is not None and isinstance(loop[1], cst.For) and isinstance(loop[1].target, cst.Name):
            # `for h in self._all: h.detach_()` over a state object's tensors.
            held = facts.shared("views", Views).held_view(loop[1])
            if held is not None and not facts.intent.is_test_code(node):
                element, view = held
                origin = facts.module.code_for_node(view)
                if (len(origin) > 50 or "\n" in origin) and isinstance(view, cst.Call) and isinstance(view.func, cst.Attribute):
                    origin = "." + facts.module.code_for_node(view.func.attr) + "(" + ", ".join(facts.module.code_for_node(a) for a in view.args) + ")"
                problem = _HELD.format(
                    name=name, element=facts.module.code_for_node(element), iterated=facts.module.code_for_node(loop[1].iter),
                    origin=origin, line=facts.line_of(view),
                )
                self.report(node, name=name, problem=problem)
                return
        holds = facts.values.holds(func.value)
        if not holds & _IN_GRAPH or holds & _NOT_ACTIVATION:
            return
        aliases = facts.shared("aliases", StorageAliases)
        statement = facts.index.enclosing(node, cst.SimpleStatementLine) or node
        binding = aliases.binding(name, node)
        if self._result_used(node, name) and aliases.value_reads_after(name, binding, statement, in_graph=True):
            self.report(node, name=name, problem=_CUT.format(name=name, holder=name))
            return
        for holder in aliases.holders(name, node):
            holder_name, holder_binding = aliases.holder_binding(holder)
            if aliases.value_reads_after(holder_name, holder_binding, statement, in_graph=True):
                self.report(node, name=name, problem=_CUT.format(name=name, holder=holder.text))
                return

    def _result_used(self, call: cst.Call, name: str) -> bool:
        """`target = out.detach_()`, `f(out.detach_())`: the result is taken as a copy."""
        parent: Optional[cst.CSTNode] = self.facts.index.parent(call)
        if isinstance(parent, cst.Expr):
            return False
        if isinstance(parent, cst.Assign) and all(
            isinstance(t.target, cst.Name) and t.target.value == name for t in parent.targets
        ):
            return False  # `out = out.detach_()`
        return True
