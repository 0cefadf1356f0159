"""Value facts about leaves: `requires_grad_()` and `requires_grad = True`
in place, jumps that stop an assignment from reaching a read, loop-carried
assignments, submodule parameters, arguments of file helpers, forward-hook
outputs and what a class stores in its containers."""

from __future__ import annotations

import textwrap

import libcst as cst

from detachlint.analysis import Facts, Holds


def facts_of(source: str) -> Facts:
    return Facts(cst.parse_module(textwrap.dedent(source)))


def names_at(facts: Facts, name: str):
    """(line, holds) of every read of `name`."""
    return [
        (facts.line_of(node), facts.values.holds(node))
        for node in facts.index.nodes(cst.Name)
        if node.value == name and not isinstance(facts.index.parent(node), cst.AssignTarget)
    ]


def test_requires_grad_in_place_makes_a_leaf():
    facts = facts_of(
        """
        import torch

        def f(s, model):
            a = s.clone().requires_grad_(True)
            print(a)
            b = s.clone()
            print(b)
            b.requires_grad = True
            print(b)
            c = model(s)
            c.requires_grad_()
            print(c)
            d = s.clone().requires_grad_(False)
            print(d)
        """
    )
    holds = dict(names_at(facts, "a") + names_at(facts, "d"))
    assert holds[6] == Holds.LEAF
    assert not holds[15] & Holds.LEAF
    b = names_at(facts, "b")
    assert b[0] == (8, Holds.NOTHING) and b[-1] == (10, Holds.LEAF)
    assert names_at(facts, "c")[-1][1] == Holds.ACTIVATION  # already computed: unchanged


def test_assignment_followed_by_break_does_not_reach_the_rest_of_the_loop():
    facts = facts_of(
        """
        import torch

        def f(model, image, steps):
            for _ in range(steps):
                out = model(image)
                if out.sum() > 0:
                    image = image.detach()
                    break
                image = image + out
            return image
        """
    )
    reads = names_at(facts, "image")
    line_10 = [holds for line, holds in reads if line == 10]
    assert line_10 and not line_10[0] & Holds.DETACHED


def test_loop_carried_assignments():
    facts = facts_of(
        """
        import torch

        def f(model, image, steps):
            image = image.clone()
            for _ in range(steps):
                image.requires_grad = True
                grad, = torch.autograd.grad(model(image).sum(), image)
                if grad.sum() > 0:
                    image = image.detach()
                    break
                image = image + grad
            return image
        """
    )
    read = next(n for n in facts.index.nodes(cst.Name) if n.value == "image" and facts.line_of(n) == 7)
    carried = facts.values.scope(read).loop_carried(read)
    assert [facts.line_of(binding) for binding, _ in carried] == [12]
    binding, value = carried[0]
    assert facts.values.binding_holds("image", binding, value, Holds.NOTHING) == Holds.ACTIVATION


def test_module_parameter_and_helper_arguments():
    facts = facts_of(
        """
        import torch
        from torch import nn

        def fill(E):
            E[:, 0] = 1.0

        def edit(model, v):
            model.encoder.layer[0].dense.weight[:, 0] += v
            model.config.hidden += 1

        def edit_frozen(model, v):
            model.requires_grad_(False)
            model.encoder.layer[0].dense.weight[:, 0] += v

        class Emb(nn.Module):
            def __init__(self):
                super().__init__()
                self.pos = nn.Embedding(4, 2)
                fill(self.pos.weight)
        """
    )
    weights = [a for a in facts.index.nodes(cst.Attribute) if a.attr.value == "weight"]
    assert [facts.values.module_parameter(w) for w in weights] == [True, False, True]
    param = next(p for p in facts.index.nodes(cst.Param) if p.name.value == "E")
    assert [facts.module.code_for_node(a) for a in facts.values.arguments_for(param)] == ["self.pos.weight"]


def test_forward_hook_outputs_stored_in_a_container():
    facts = facts_of(
        """
        from torch import nn

        class Monitor:
            def __init__(self, model):
                self.outputs = {}
                for name, module in model.named_modules():
                    module.register_forward_hook(self._save(name))

            def _save(self, name):
                def hook(module, inputs, output):
                    self.outputs[name] = output
                return hook

            def stats(self):
                for name, y in self.outputs.items():
                    print(y)
        """
    )
    assert [p.name.value for p in facts.values.hook_outputs] == ["output"]
    assert names_at(facts, "y")[-1][1] == Holds.ACTIVATION


def test_a_value_flows_through_either_branch_that_binds_its_name():
    facts = facts_of(
        """
        def step(model, x, cached, scale):
            if cached:
                z = model.embed(x)
            else:
                z = model.encoder(x)
            for i in range(3):
                w = x * i
            loss = (z * scale).mean()
            total = w.sum()
            return loss, total
        """
    )
    seed = next(c for c in facts.index.nodes(cst.Call) if facts.module.code_for_node(c) == "model.embed(x)")
    scope = facts.values.scope(seed)
    read = next(n for n in facts.index.nodes(cst.Name) if n.value == "z" and facts.line_of(n) == 9)
    # Both branches' bindings may reach the read, the `if` one too (not only the last in source order).
    assert sorted(facts.line_of(b) for b, _ in scope.reaching(read)) == [4, 6]
    flowing = scope.flows_from(seed)
    assert sorted(facts.line_of(a) for a in flowing) == [4, 9]
    # A loop's binding reaches the read after it, as the last one in source order.
    w = next(n for n in facts.index.nodes(cst.Name) if n.value == "w" and facts.line_of(n) == 10)
    assert [facts.line_of(b) for b, _ in scope.reaching(w)] == [8]
