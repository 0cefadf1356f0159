"""The abstract interpreter: values seen in their callers' context, on the heap, per grad mode."""

import textwrap

import libcst as cst

from detachlint.analysis import Facts


def _facts(source: str) -> Facts:
    source = textwrap.dedent(source)
    return Facts(cst.parse_module(source), "example.py", source.encode())


def _expr(facts: Facts, code: str, line: int) -> cst.CSTNode:
    for node in facts.index.nodes(cst.Name) + facts.index.nodes(cst.Call) + facts.index.nodes(cst.Attribute) + facts.index.nodes(cst.Subscript):
        if facts.module.code_for_node(node) == code and facts.line_of(node) == line:
            return node
    raise AssertionError(f"no `{code}` on line {line}")


def test_untyped_parameters_hold_what_the_callers_pass():
    facts = _facts(
        """
        import torch
        from torch import nn

        def fit(f, opt, pairs, crit):
            for xs, ys in pairs:
                out = f(xs)
                crit(out, ys).backward()
                opt.step()
                print(out.numpy(), ys.numpy())

        if __name__ == "__main__":
            net = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
            fit(net, torch.optim.SGD(net.parameters(), lr=0.1), [(torch.randn(2, 4), torch.randn(2, 4))], nn.MSELoss())
        """
    )
    interpreter = facts.interpreter
    assert interpreter.in_graph(_expr(facts, "out", 10))
    assert not interpreter.in_graph(_expr(facts, "ys", 10))
    assert interpreter.known_without_graph(_expr(facts, "ys", 10))
    steps = [e for e in interpreter.events if e.kind == "step"]
    backwards = [e for e in interpreter.events if e.kind == "backward"]
    assert steps and backwards and steps[0].value.origins == backwards[0].value.origins


def test_a_function_no_call_reaches_has_unknown_arguments():
    facts = _facts(
        """
        def fit(f, xs):
            out = f(xs)
            return out.numpy()
        """
    )
    interpreter = facts.interpreter
    assert not interpreter.in_graph(_expr(facts, "out", 4))
    assert not interpreter.known_without_graph(_expr(facts, "out", 4))


def test_fields_set_in_one_method_are_read_in_another():
    facts = _facts(
        """
        import torch
        from torch import nn

        class Probe:
            def __init__(self, net):
                self.net = net
                self.cache = None

            def run(self, x):
                self.cache = self.net(x)

            def report(self):
                return self.cache.numpy()

        probe = Probe(nn.Linear(3, 3))
        probe.run(torch.randn(1, 3))
        probe.report()
        """
    )
    assert facts.interpreter.in_graph(_expr(facts, "self.cache", 14))


def test_no_grad_cuts_and_a_literal_flag_selects_its_branch():
    facts = _facts(
        """
        import torch
        from torch import nn

        net = nn.Linear(3, 3)
        x = torch.randn(2, 3)
        with torch.no_grad():
            quiet = net(x)
        loud = net(x)
        USE_DETACH = False
        if USE_DETACH:
            loud = loud.detach()
        print(quiet, loud)
        """
    )
    interpreter = facts.interpreter
    quiet = interpreter.value_of(_expr(facts, "quiet", 13))
    assert not quiet.origins and quiet.cuts
    assert interpreter.in_graph(_expr(facts, "loud", 13))
    assert not interpreter.value_of(_expr(facts, "loud", 13)).cuts


def test_frozen_modules_and_deep_copies():
    facts = _facts(
        """
        import copy
        import torch
        from torch import nn

        online = nn.Linear(3, 3)
        target = copy.deepcopy(online)
        target.requires_grad_(False)
        x = torch.randn(2, 3)
        a = online(x)
        b = target(x)
        print(a, b)
        """
    )
    interpreter = facts.interpreter
    assert interpreter.in_graph(_expr(facts, "a", 12))
    assert not interpreter.in_graph(_expr(facts, "b", 12))
    assert interpreter.known_without_graph(_expr(facts, "b", 12))


def test_containers_keep_what_is_stored_in_them():
    facts = _facts(
        """
        import torch
        from torch import nn

        net = nn.Linear(3, 1)
        history = {"loss": []}
        for _ in range(3):
            loss = net(torch.randn(2, 3)).mean()
            history["loss"].append(loss)
        total = torch.stack(history["loss"]).sum()
        last = history["loss"][-1].item()
        """
    )
    interpreter = facts.interpreter
    assert interpreter.in_graph(_expr(facts, "total", 10))
    assert not interpreter.in_graph(_expr(facts, "last", 11))


def test_a_context_manager_binds_what_its_enter_returns():
    facts = _facts(
        """
        import torch
        from torch import nn

        class Capture:
            def __init__(self, layer):
                self.layer = layer

            def __enter__(self):
                return self.layer

            def __exit__(self, *exc):
                return False

        with Capture(nn.Linear(2, 2)) as layer:
            out = layer(torch.randn(1, 2))
        print(out)
        """
    )
    assert facts.interpreter.in_graph(_expr(facts, "out", 17))


def test_recursion_and_cycles_end():
    facts = _facts(
        """
        import copy
        from torch import nn

        class Node(nn.Module):
            def __init__(self):
                super().__init__()
                self.me = self
                self.fc = nn.Linear(2, 2)

            def forward(self, x):
                return self.forward(x) if x is None else self.fc(x)

        twin = copy.deepcopy(Node())
        y = twin(None)
        """
    )
    assert facts.interpreter.value_of(_expr(facts, "y", 15)) is not None
