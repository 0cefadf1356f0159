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


def _starved(facts: Facts) -> dict:
    """{line of cut: sorted texts of the modules it starves} as DL201 asks it."""
    interpreter = facts.interpreter
    return {facts.line_of(cut): len(starved) for cut, starved, _, _ in interpreter.starved_cuts()}


def test_a_model_handed_in_is_one_object_whatever_it_is_called():
    # No call reaches `fit`: `a` and `b` are unknown, yet each is one object
    # whose parameters the optimizer owns and whose output the cut drops.
    source = """
        import torch

        def fit(a, b, pairs):
            opt = torch.optim.SGD([p for p in a.parameters()] + list(b.parameters()), lr=0.1)
            for x, y in pairs:
                h = a(x).detach()
                loss = ((b(h) - y) ** 2).mean()
                opt.zero_grad()
                loss.backward()
                opt.step()
        """
    assert _starved(_facts(source)) == {7: 1}
    # The same code without the cut starves nothing.
    assert _starved(_facts(source.replace("a(x).detach()", "a(x)"))) == {}


def test_two_instances_of_a_class_build_their_own_layers():
    facts = _facts(
        """
        from torch import nn

        class Critic(nn.Module):
            def __init__(self):
                super().__init__()
                self.q = nn.Linear(4, 1)

        class Agent:
            def __init__(self):
                self.critic = Critic()
                self.target = Critic()
                self.target.load_state_dict(self.critic.state_dict())

        agent = Agent()
        online, frozen = agent.critic, agent.target
        """
    )
    interpreter = facts.interpreter
    online = interpreter.modules_held(_expr(facts, "online", 16))
    target = interpreter.modules_held(_expr(facts, "frozen", 16))
    assert online and target and not online & target
    # The target's weights are copied from the critic's: set by hand, not by gradients.
    assert target <= interpreter.set_by_hand and not online & interpreter.set_by_hand


def test_super_init_and_forward_hooks_run():
    facts = _facts(
        """
        import torch
        from torch import nn

        class Base:
            def __init__(self, net):
                self.net = net

        class Wrapper(Base):
            def __init__(self, net):
                super().__init__(net)
                self.seen = None
                self.net[0].register_forward_hook(self.keep)

            def keep(self, module, inputs, output):
                self.seen = output

            def features(self, x):
                self.net(x)
                return self.seen

        w = Wrapper(nn.Sequential(nn.Linear(3, 3), nn.ReLU()))
        feats = w.features(torch.randn(2, 3))
        """
    )
    interpreter = facts.interpreter
    # `self.net` was set by the base's `__init__`; the hook stored the layer's output.
    assert interpreter.in_graph(_expr(facts, "feats", 23))


def test_graphs_no_backward_uses_are_found_per_call():
    facts = _facts(
        """
        import torch
        from torch import nn

        def run(f, opt, batches, learn):
            outs = []
            for x, y in batches:
                out = f(x)
                outs.append(out)
                if learn:
                    loss = ((out - y) ** 2).mean()
                    opt.zero_grad()
                    loss.backward()
                    opt.step()
            return len(outs)

        if __name__ == "__main__":
            f = nn.Linear(3, 1)
            opt = torch.optim.SGD(f.parameters(), lr=0.1)
            data = [(torch.randn(2, 3), torch.randn(2, 1))]
            run(f, opt, data, True)
            run(f, opt, data, False)
        """
    )
    found = facts.interpreter.graphs_for_nothing()
    # The call made with `learn=False` records graphs no backward uses.
    assert [facts.line_of(where) for where, _ in found] == [8]
    only_training = _facts(facts.module.code.replace("    run(f, opt, data, False)\n", ""))
    assert only_training.interpreter.graphs_for_nothing() == []


def test_a_new_leaf_keeps_the_cut_before_it():
    facts = _facts(
        """
        import numpy as np
        import torch
        from torch import nn

        net = nn.Linear(3, 1)
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        for x in [torch.randn(2, 3)]:
            scores = np.exp(net(x).detach().numpy())
            pred = torch.tensor(scores, requires_grad=True)
            loss = pred.sum()
            opt.zero_grad()
            loss.backward()
            opt.step()
        """
    )
    assert _starved(facts) == {9: 1}


def test_an_object_compared_with_none_selects_the_branch_in_each_context():
    """`if self.opt is not None:` in a step object built twice, with and without
    an optimizer: the backward runs only in the context that has one, so the
    evaluation pass (built with `opt=None`) builds graphs for nothing."""
    facts = _facts(
        """
        import torch
        from torch import nn

        class Step:
            def __init__(self, crit, opt=None):
                self.crit, self.opt = crit, opt

            def __call__(self, out, y):
                loss = self.crit(out, y)
                if self.opt is not None:
                    loss.backward()
                    self.opt.step()
                return loss.item()

        def epoch(net, batches, step):
            return sum(step(net(x), y) for x, y in batches)

        net = nn.Linear(4, 1)
        data = [(torch.randn(2, 4), torch.randn(2, 1))]
        epoch(net, data, Step(nn.MSELoss(), torch.optim.SGD(net.parameters(), lr=0.1)))
        epoch(net, data, Step(nn.MSELoss()))
        """
    )
    found = [(facts.line_of(where), facts.line_of(forward)) for where, forward in facts.interpreter.graphs_for_nothing()]
    assert found == [(17, 17)]  # the generator's `net(x)`, pass after pass, in the second context


def test_a_decorator_the_file_defines_that_applies_no_grad_turns_autograd_off():
    facts = _facts(
        """
        import torch
        from torch import nn

        def quiet(fn):
            def wrapper(*args, **kwargs):
                with torch.inference_mode():
                    return fn(*args, **kwargs)
            return wrapper

        @quiet
        def predict(net, x):
            return net(x)

        net = nn.Linear(4, 1)
        for _ in range(3):
            out = predict(net, torch.randn(2, 4))
        """
    )
    call = _expr(facts, "net(x)", 13)
    assert facts.interpreter.grad_modes(call) == {False}
    assert not facts.interpreter.graphs_for_nothing()


def test_a_backward_run_only_under_a_callers_no_grad_is_found_and_one_on_a_built_graph_is_not():
    facts = _facts(
        """
        import torch
        from torch import nn

        def step_toward(x, y, predict, loss_fn, eps):
            delta = torch.zeros_like(x).requires_grad_()
            loss_fn(predict(x + delta), y).backward()
            return x + eps * delta.grad.sign()

        class Adversary:
            def __init__(self, predict):
                self.predict, self.loss_fn = predict, nn.CrossEntropyLoss()

            def perturb(self, x, y):
                return step_toward(x, y, self.predict, self.loss_fn, 0.1)

        def test(net, pairs, adversary):
            with torch.no_grad():
                for x, y in pairs:
                    net(adversary.perturb(x, y))

        def train(net, pairs, opt):
            for x, y in pairs:
                loss = nn.functional.cross_entropy(net(x), y)
                with torch.no_grad():
                    loss.backward()
                    opt.step()

        net = nn.Linear(4, 3)
        pairs = [(torch.randn(8, 4), torch.randint(0, 3, (8,)))]
        test(net, pairs, Adversary(net))
        train(net, pairs, torch.optim.SGD(net.parameters(), lr=0.1))
        """
    )
    found = [facts.line_of(node) for node in facts.interpreter.backwards_with_autograd_off()]
    assert found == [7]


def test_a_grad_mode_a_function_leaves_off_reaches_its_callers_backward():
    facts = _facts(
        """
        import torch
        from torch import nn

        class Prior(nn.Module):
            def __init__(self, keep=False):
                super().__init__()
                self.body = nn.Linear(4, 4)
                self.keep = keep

            def forward(self, u):
                torch.set_grad_enabled(True)
                v = self.body(u.requires_grad_())
                (g,) = torch.autograd.grad(v.sum(), u, create_graph=True)
                if not self.keep:
                    torch.set_grad_enabled(False)
                return u - g

        class Unrolled(nn.Module):
            def __init__(self, prior, k=3):
                super().__init__()
                self.prior, self.k = prior, k
                self.tau = nn.Parameter(torch.tensor(0.5))

            def forward(self, b):
                u = b
                for _ in range(self.k):
                    u = self.prior(u - self.tau * (u - b))
                return u

        def fit(m, o, b, t):
            o.zero_grad()
            nn.functional.mse_loss(m(b), t).backward()
            o.step()

        m = Unrolled(Prior().requires_grad_(False))
        fit(m, torch.optim.SGD([m.tau], lr=0.1), torch.randn(2, 4), torch.randn(2, 4))
        """
    )
    found = [(facts.line_of(s), facts.line_of(b)) for s, b in facts.interpreter.grad_mode_left_off()]
    assert found == [(16, 33)]


def test_a_grad_mode_restored_by_with_return_or_the_function_itself_leaves_nothing_off():
    facts = _facts(
        """
        import torch
        from torch import nn

        def target(q, s):
            with torch.no_grad():
                return q(s).max(1).values

        def scored(q, s):
            torch.set_grad_enabled(False)
            out = q(s)
            torch.set_grad_enabled(True)
            return out

        def fit(q, o, s, r):
            for _ in range(2):
                with torch.set_grad_enabled(False):
                    y = r + target(q, s)
                    scored(q, s)
                    if y.sum() > 0:
                        continue
                o.zero_grad()
                nn.functional.mse_loss(q(s).max(1).values, y).backward()
                o.step()

        q = nn.Linear(4, 2)
        fit(q, torch.optim.SGD(q.parameters(), lr=0.1), torch.randn(3, 4), torch.randn(3))
        """
    )
    assert facts.interpreter.grad_mode_left_off() == []
    assert facts.interpreter.backwards_with_autograd_off() == []


def test_a_script_that_turns_autograd_off_runs_its_loop_with_it_off():
    facts = _facts(
        """
        import torch
        from torch import nn

        net = nn.Linear(4, 2).eval()
        torch.set_grad_enabled(False)
        kept = []
        for x in [torch.randn(3, 4) for _ in range(4)]:
            kept.append(net(x).argmax(1))
        """
    )
    assert facts.interpreter.grad_modes(_expr(facts, "net(x)", 9)) == {False}
    assert facts.interpreter.graphs_for_nothing() == []


def test_a_backward_fine_on_its_own_raises_when_called_inside_a_no_grad_region():
    facts = _facts(
        """
        import torch
        from torch import nn

        class Probe:
            def __init__(self, f):
                self.f = f

            def saliency(self, x):
                x = x.clone().requires_grad_(True)
                self.f(x).sum().backward()
                return x.grad.abs()

        f = nn.Linear(4, 2)
        probe = Probe(f)
        maps = [probe.saliency(torch.randn(1, 4))]
        with torch.no_grad():
            for x in [torch.randn(1, 4)]:
                scores = f(x)
                maps.append(probe.saliency(x))
        """
    )
    found = [(facts.line_of(c), facts.line_of(b)) for c, b in facts.interpreter.backwards_run_with_autograd_off()]
    assert found == [(20, 11)]


def test_a_function_run_from_module_level_reads_the_globals_as_they_stand_then():
    facts = _facts(
        """
        import torch
        from torch import nn

        net = nn.Linear(1, 1)
        preds = net(torch.randn(4, 1))
        preds.sum().backward()

        preds = list()

        def gather(models):
            for m in models:
                with torch.no_grad():
                    preds.append(m(torch.randn(4, 1)))
            return torch.stack(preds).var(dim=0)

        spread = gather([net, nn.Linear(1, 1)])
        """
    )
    assert not facts.interpreter.in_graph(_expr(facts, "torch.stack(preds)", 15))
    assert facts.interpreter.in_graph(_expr(facts, "preds.sum()", 7))


def test_a_model_given_a_checkpoints_weights_runs_for_nothing_in_an_inference_loop():
    facts = _facts(
        """
        import torch
        from torch import nn

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.body = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))

            def forward(self, x):
                return self.body(x)

        def predict(checkpoint, batches):
            net = Net()
            net.load_state_dict(torch.load(checkpoint))
            labels = []
            for x in batches:
                labels.append(net(x).argmax(1))
            return labels

        def shapes(batches):
            net = Net()
            return [net(x).shape for x in batches]

        if __name__ == "__main__":
            data = [torch.randn(4, 8) for _ in range(3)]
            print(predict("net.pt", data), shapes(data))
        """
    )
    found = [facts.line_of(where) for where, _ in facts.interpreter.graphs_for_nothing()]
    assert found == [18]


def test_a_forward_that_runs_its_own_modules_is_followed_once_not_unrolled():
    facts = _facts(
        """
        import torch
        from torch import nn

        class Stack(nn.Module):
            def __init__(self):
                super().__init__()
                self.a = nn.Linear(4, 4)
                self.b = nn.Linear(4, 2)

            def forward(self, x):
                for module in list(self.modules())[1:]:
                    x = module(x)
                return x

        net = Stack()
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        for epoch in range(3):
            for x, y in [(torch.randn(2, 4), torch.randn(2, 2))]:
                opt.zero_grad()
                ((net(x) - y) ** 2).mean().backward()
                opt.step()
        for x in [torch.randn(2, 4)]:
            print(net(x).argmax(1))
        """
    )
    backward = next(e for e in facts.interpreter.events if e.kind == "backward")
    layers = facts.interpreter.modules_held(_expr(facts, "self.a", 8)) | facts.interpreter.modules_held(_expr(facts, "self.b", 9))
    assert layers and layers <= facts.interpreter.live(backward.value)  # the loss reaches the layers run in the loop
