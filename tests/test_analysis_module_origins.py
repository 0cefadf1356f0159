"""Term-level facts DL201's partial cut stands on: the summands of a
backpropagated loss (through names, weights, dict stores, helpers and loss
classes), and, per summand, which members' outputs it carries with their graph
and which it reaches only through a cut."""

from __future__ import annotations

import textwrap

import libcst as cst

from detachlint.analysis import Facts
from detachlint.analysis.loss_terms import LossTerms
from detachlint.analysis.module_origins import UNKNOWN, CutLog, module_origins


def facts_of(source: str) -> Facts:
    return Facts(cst.parse_module(textwrap.dedent(source)))


def terms_of(facts: Facts) -> list:
    """(summand code, live origins, {module: line of its first cut}) for every backward."""
    found = []
    for call in facts.index.nodes(cst.Call):
        target = facts.values.backward_target(call)
        if target is None:
            continue
        for summand in facts.shared("loss_terms", LossTerms).summands(target):
            cuts = CutLog()
            live = module_origins(facts, summand.expr, 0, cuts, bound=summand.bound)
            found.append((
                facts.module.code_for_node(summand.expr),
                live,
                {module: facts.line_of(node) for module, node in cuts.items()},
            ))
    return found


DICT_LOSSES = """
    import torch
    from torch import nn
    import torch.nn.functional as F

    class VAE(nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = nn.Linear(8, 2)
            self.decoder = nn.Linear(2, 8)
            self.opt = torch.optim.Adam(self.decoder.parameters())

        def losses(self, x):
            z = self.encoder(x)
            xr = self.decoder(z)
            return {"rec": F.mse_loss(xr, x), "cyc": F.mse_loss(self.encoder(xr.detach()), z)}

        def step(self, x):
            losses = self.losses(x)
            loss = losses["rec"] + 0.5 * losses["cyc"]
            self.opt.zero_grad()
            loss.backward()
            self.opt.step()
"""


def test_summands_follow_weights_and_the_dict_a_helper_returns():
    terms = terms_of(facts_of(DICT_LOSSES))
    assert [code for code, _, _ in terms] == [
        "F.mse_loss(xr, x)",
        "F.mse_loss(self.encoder(xr.detach()), z)",
    ]


def test_an_inline_detach_is_a_cut_of_what_it_detaches():
    (_, rec_live, rec_cuts), (_, cyc_live, cyc_cuts) = terms_of(facts_of(DICT_LOSSES))
    assert rec_live == {"self.encoder", "self.decoder"} and rec_cuts == {}
    assert cyc_live == {"self.encoder"}
    assert cyc_cuts == {"self.decoder": 16, "self.encoder": 16}


def test_no_grad_rebinding_and_dict_stores_of_a_loss_method():
    facts = facts_of(
        """
        import torch
        from torch import nn
        import torch.nn.functional as F

        class Policy(nn.Module):
            def __init__(self):
                super().__init__()
                self.model = nn.Linear(4, 4)

            def compute_loss(self, x):
                out = {}
                pred = self.model(x)
                with torch.no_grad():
                    pred = pred * 2
                out["a"] = F.mse_loss(pred, x)
                out["b"] = self.model(x).pow(2).mean()
                return sum(out.values()), out

        def train(policy, optimizer, x):
            loss, logs = policy.compute_loss(x)
            loss.backward()
        """
    )
    (a_code, a_live, a_cuts), (b_code, b_live, _) = terms_of(facts)
    assert a_code == "F.mse_loss(pred, x)" and a_live == set() and a_cuts == {"self.model": 14}
    assert b_live == {"self.model"}


def test_torch_tensor_over_stored_outputs_is_a_cut():
    facts = facts_of(
        """
        import torch

        class Worker:
            def __init__(self, net):
                self.net = net
                self.memory = []

            def act(self, state):
                probs = self.net(state)
                self.memory.append(probs.log())

            def learn(self, returns):
                log_probs = torch.tensor([m for m in self.memory])
                (-(log_probs * returns).mean()).backward()
        """
    )
    [(_, live, cuts)] = terms_of(facts)
    assert live == set() and cuts == {"self.net": 14}


def test_a_callable_handed_in_is_unknown_unless_the_file_passes_one_class():
    unknown = facts_of(
        """
        import torch.nn.functional as F

        def step(model, x, y):
            F.mse_loss(model(x), y).backward()
        """
    )
    [(_, live, _)] = terms_of(unknown)
    assert UNKNOWN in live
    resolved = facts_of(
        """
        from torch import nn
        import torch.nn.functional as F

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(2, 2)

            def forward(self, x):
                return self.fc(x)

        def step(model, x, y):
            F.mse_loss(model(x), y).backward()

        step(Net(), None, None)
        """
    )
    [(_, live, _)] = terms_of(resolved)
    assert live == {"model"}
