"""Verdicts an audit of the verifier found wrong, each on a small file that
shows the defect: the evidence must describe the tensor that raised, the exact
edit, the stand-ins the run used and only what the run measured.

The session's one verifier worker (tests/conftest.py) serves the file.
"""

from __future__ import annotations

import ast
import textwrap

import pytest

from conftest import line_of, verify_findings

pytest.importorskip("torch")


# DL205: a loop over gradients where the first one is no view and a later one is.
META_GRADS = """
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        return self.fc(self.conv(x).mean(dim=(2, 3)))


def meta_step(net: Net, x):
    loss = net(x).pow(2).sum()
    grads = torch.autograd.grad(loss, net.parameters(), create_graph=True)
    for grad in grads:
        grad.detach_()
    return grads
"""


def test_dl205_evidence_describes_the_tensor_that_raised(verifier, tmp_path):
    verdicts = verify_findings(verifier, tmp_path, "meta_grads.py", META_GRADS, "DL205")
    verification = verdicts[19]
    assert verification.status == "confirmed", verification.evidence
    # The conv weight's gradient (4, 3, 3, 3) is no view; the linear weight's (4, 4) is, and raised.
    assert "(shape (4, 4))" in verification.evidence, verification.evidence
    assert "(4, 3, 3, 3)" not in verification.evidence


# DL101: `.data` after a subscript, as a method call and as an augmented assignment.
ROW_EDITS = """
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)

    def forward(self, x):
        return torch.tanh(self.fc(x))


def step(model: Net, x):
    out = model(x)
    out[0].data.zero_()
    loss = (out * out).sum()
    loss.backward()
    return loss


def step2(model: Net, x):
    out = model(x)
    out[0].data *= 3.0
    loss = (out * out).sum()
    loss.backward()
    return loss
"""


def test_dl101_row_edit_through_a_method_call_is_redone_exactly(verifier, tmp_path):
    verdicts = verify_findings(verifier, tmp_path, "row_edits.py", ROW_EDITS, "DL101")
    verification = verdicts[16]
    # Tanh saved `out`: the row edit through `.detach()` trips the version check.
    # Without the subscript kept, nothing was redone and the verdict was a false refutation.
    assert verification.status == "confirmed", verification.evidence
    assert "modified by an inplace operation" in verification.evidence
    assert "Tanh saved `out`" in verification.evidence


def test_dl101_rewrites_keep_the_subscript():
    from rules.probes import dl101

    cases = {
        "out[0].data.zero_()": ("out[0].detach().zero_()", "out[0].zero_()"),
        "delta_im[i, ci].data *= k": ("__dl_alias = delta_im[i, ci].detach(); __dl_alias *= k", "delta_im[i, ci] *= k"),
        "x.data[0].zero_()": ("x.detach()[0].zero_()", "x[0].zero_()"),
        "x.data *= 2": ("__dl_alias = x.detach(); __dl_alias *= 2", "x *= 2"),
    }
    for source, (detached, visible) in cases.items():
        name = source.split(".")[0].split("[")[0]
        statement = ast.parse(source).body[0]
        missed = []
        got = [ast.unparse(ast.fix_missing_locations(s)) for s in dl101._detach_rewrite(name, missed)(statement)]
        assert "; ".join(got) == detached
        got = [ast.unparse(ast.fix_missing_locations(s)) for s in dl101._visible_rewrite(name, missed)(statement)]
        assert got == ["__dl_old = " + name, f"{name} = {name}.clone()", visible]
        assert missed == []
    # A form it cannot redo exactly is reported, not compared.
    missed = []
    dl101._detach_rewrite("x", missed)(ast.parse("torch.add(x.data, 1, out=x.data)").body[0])
    assert missed == [1]


# Criteria in a dict: the file's own loss class runs, the other is a named stand-in.
CRITERIA = """
import torch
from torch import nn
import torch.nn.functional as F


class AT(nn.Module):
    def __init__(self, p):
        super().__init__()
        self.p = p

    def forward(self, fm_s, fm_t):
        return F.mse_loss(fm_s.pow(2).mean(1), fm_t.pow(2).mean(1))


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        a = self.conv(x)
        return a, self.fc(a.mean(dim=(2, 3)))


def train_step(opt, train_loader, nets, optimizer, criterions):
    snet = nets['snet']
    tnet = nets['tnet']
    criterionCls = criterions['criterionCls']
    criterionAT = criterions['criterionAT']
    for img, target in train_loader:
        a_s, out_s = snet(img)
        a_t, _ = tnet(img)
        cls_loss = criterionCls(out_s, target)
        at_loss = criterionAT(a_s, a_t).detach() * opt.beta
        loss = at_loss + cls_loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return loss
"""


def test_stand_in_loss_is_named_and_own_loss_class_runs(verifier, tmp_path):
    verdicts = verify_findings(verifier, tmp_path, "criteria.py", CRITERIA, "DL202")
    verification = verdicts[35]
    # `criterionCls` has no class of the file behind it: a stand-in, so never confirmed.
    assert verification.status in ("plausible", "inconclusive"), verification.evidence
    if verification.status == "plausible":
        assert verification.basis == "stand-in"
        assert "stand-in loss for `criterionCls`" in verification.evidence, verification.evidence
        assert "criterionAT" not in verification.evidence.split("stand-in", 1)[1]


# A function whose parameters and locals merely shadow module-level script variables.
SHADOWING = """
import torch
from torch import nn
from torch.autograd import Variable
from cifar_utils import load_model, read_cifar


class D(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)

    def forward(self, x):
        return self.fc(x)


def acquireInputGradient(netD: D, dataset1, loss_func):
    netD.eval()
    total = 0.0
    for i, data_batch in enumerate(dataset1):
        feature, label = data_batch
        feature, label = Variable(feature), Variable(label)
        outputs = netD(feature)
        error = loss_func(outputs, label)
        error.backward()
        total += error.data[0]
    return total


netD = load_model()
loss_func = load_model()
feature, label = read_cifar()
"""


def test_parameters_and_locals_are_no_script_stand_ins():
    from detachlint.verify.runtime import user_code

    tree = ast.parse(textwrap.dedent(SHADOWING))
    function = next(n for n in tree.body if isinstance(n, ast.FunctionDef))
    local = user_code._local_names(function)
    assert {"netD", "dataset1", "loss_func", "feature", "label", "outputs", "error", "i", "data_batch"} <= local
    script = ast.parse("def f():\n    global model\n    model = 1\n    return model").body[0]
    assert "model" not in user_code._local_names(script)


def test_shadowed_globals_are_not_reported_as_stand_ins(verifier, tmp_path):
    verification = verify_findings(verifier, tmp_path, "shadowing.py", SHADOWING, "DL103")[25]
    # `netD` and `loss_func` are the function's parameters: the module's script variables never run.
    assert "script variables" not in verification.evidence, verification.evidence
    # The parameter `loss_func` is a stand-in, and the evidence says so.
    assert (verification.status, verification.basis) == ("plausible", "stand-in"), verification.evidence
    assert "stand-in loss for `loss_func`" in verification.evidence


# DL601: clipping between the backward and the step: the step does not apply "those plus the new batch's".
CLIPPED = """
import torch
from torch import nn
import torch.nn.functional as F


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 2)

    def forward(self, x):
        return self.fc(x)


def train(model: Net, optimizer, loader):
    for x, y in loader:
        loss = F.mse_loss(model(x), torch.zeros(x.shape[0], 2))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1e-3)
        optimizer.step()
"""


def test_dl601_claims_only_what_it_measured(verifier, tmp_path):
    verdicts = verify_findings(verifier, tmp_path, "clipped.py", CLIPPED, "DL601")
    verification = verdicts[20]
    assert verification.status in ("confirmed", "plausible"), verification.evidence
    assert "plus the new batch's" not in verification.evidence, verification.evidence
    assert "plus what the backward" not in verification.evidence, verification.evidence
    assert "never cleared in between" in verification.evidence


# DL206: a dropped detach of a leaf parameter: nothing upstream to cut.
LEAF = """
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.ones(4))

    def forward(self, x):
        w = self.w
        w.detach()
        return x * w


class Chain(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        h = self.fc(x)
        h.detach()
        return h * 2
"""


def test_dl206_needs_a_graph_upstream(verifier, tmp_path):
    verdicts = verify_findings(verifier, tmp_path, "leaf.py", LEAF, "DL206")
    leaf, chain = verdicts[12], verdicts[23]
    assert leaf.status == "inconclusive", leaf.evidence
    assert "leaf" in leaf.evidence and "grad_fn=None" in leaf.evidence
    assert chain.status == "confirmed", chain.evidence
    assert "grad_fn=AddmmBackward0" in chain.evidence


# DL204: an edit through a detached alias confirms only on an effect on gradients.
ALIAS_EDITS = """
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)
        self.scale = nn.Parameter(torch.ones(3))

    def forward(self, x):
        return self.fc(x)


def logged_scale(model: Net, x, optimizer):
    out = model(x)
    logged = out.detach()
    logged.mul_(100.0)
    loss = out.sum()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return logged


def weighted(model: Net, x, optimizer):
    out = model(x)
    logged = out.detach()
    logged.mul_(100.0)
    loss = (out * model.scale).sum()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return logged
"""


def test_dl204_confirms_only_what_changes_the_gradients(verifier, tmp_path):
    verdicts = verify_findings(verifier, tmp_path, "alias_edits.py", ALIAS_EDITS, "DL204")
    summed, weighted = verdicts[line_of(ALIAS_EDITS, "logged.mul_(100.0)")], sorted(verdicts.items())[1][1]
    # `sum` saves nothing: the same gradients with or without the edit.
    assert summed.status == "refuted", summed.evidence
    assert "same gradients" in summed.evidence
    # `out * scale` saves `out` for scale's gradient: the edit changes it.
    assert weighted.status == "confirmed", weighted.evidence
    assert "differ from a run where `logged` is a copy" in weighted.evidence


# An error is blamed on a missing import only when it came from its stand-in.
MISSING_IMPORT = """
import tensorflow as tf
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)

    def forward(self, x):
        return self.fc(x)


def predict(model: Net, x):
    shape = tf.shape(x)
    out = model(x)
    row = out[7]
    return row.numpy()


def scaled(model: Net, x):
    out = model(x) * tf.constant(2.0)
    return out.numpy()
"""


def test_an_error_names_a_missing_import_only_when_it_came_from_it(verifier, tmp_path):
    verdicts = verify_findings(verifier, tmp_path, "missing_import.py", MISSING_IMPORT, "DL402")
    own = verdicts[line_of(MISSING_IMPORT, "return row.numpy()")]
    assert "IndexError" in own.evidence and "tensorflow" not in own.evidence, own.evidence
    theirs = verdicts[line_of(MISSING_IMPORT, "return out.numpy()")]
    assert "Missing" in theirs.evidence and "`tensorflow` is not installed" in theirs.evidence, theirs.evidence


# The program's own entry builds the inputs when no call passes them.
PROGRAM_ENTRY = """
import time

import torch
from torch import nn


class Net(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.conv = nn.Conv1d(channels, 4, 3)
        self.fc = nn.Linear(4 * 14, 3)

    def forward(self, x):
        return self.fc(torch.relu(self.conv(x)).flatten(1))


def evaluate(model, signals):
    scores = []
    for signal in signals:
        scores.append(model(signal.unsqueeze(0)).numpy())
    return scores


def main():
    model = Net(7)
    signals = [torch.randn(7, 16) for _ in range(3)]
    print(evaluate(model, signals))


if __name__ == "__main__":
    main()
"""

# ... and when the program trains for long before it gets there, synthesized inputs still decide.
SLOW_PROGRAM = """
import time

import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)

    def forward(self, x):
        return self.fc(x)


def evaluate(model: Net, x):
    return model(x).numpy()


def main():
    model = Net()
    time.sleep(60)
    print(evaluate(model, torch.randn(2, 4)))


if __name__ == "__main__":
    main()
"""


def test_the_programs_own_entry_builds_the_inputs_first(verifier, tmp_path):
    (verdict,) = verify_findings(verifier, tmp_path, "program_entry.py", PROGRAM_ENTRY, "DL402").values()
    assert verdict.status == "confirmed", verdict.evidence
    assert "run through the file's call `main()`" in verdict.evidence
    (slow,) = verify_findings(verifier, tmp_path, "slow_program.py", SLOW_PROGRAM, "DL402").values()
    assert slow.status == "confirmed" and "main()" not in slow.evidence, slow.evidence


# DL303: a no-grad output made a leaf that requires grad after its line
# (through `setattr`, which the linter does not follow): the backward reaches it.
LEAF_AFTER_THE_LINE = """
import torch
from torch import nn
import torch.nn.functional as F


def finetune(model: nn.Module, loader, optimizer, l2=1e-4):
    model.train()
    for images, labels in loader:
        with torch.no_grad():
            logits = model(images)
        loss = F.cross_entropy(logits, labels) + l2 * sum(p.pow(2).sum() for p in model.parameters())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


def refine(model: nn.Module, loader, optimizer, l2=1e-4):
    model.train()
    for images, labels in loader:
        with torch.no_grad():
            logits = model(images)
        setattr(logits, "requires_grad", True)
        loss = F.cross_entropy(logits, labels) + l2 * sum(p.pow(2).sum() for p in model.parameters())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
"""


def test_dl303_reads_the_value_when_the_backward_runs(verifier, tmp_path):
    verdicts = verify_findings(verifier, tmp_path, "leaf_after.py", LEAF_AFTER_THE_LINE, "DL303")
    dropped = verdicts[line_of(LEAF_AFTER_THE_LINE, "logits = model(images)")]
    made_leaf = verdicts[line_of(LEAF_AFTER_THE_LINE, 'setattr(logits, "requires_grad", True)') - 1]
    assert dropped.status in ("confirmed", "plausible"), dropped.evidence
    assert "none of its gradient comes through `logits`" in dropped.evidence
    assert made_leaf.status not in ("confirmed", "plausible"), made_leaf.evidence
    assert "required grad when the backward after it ran (set after the line)" in made_leaf.evidence


# DL602: the finding names one error, the run raises the other (the only
# caller passes `retain=False`): both are the generator step failing on the
# graph the discriminator's backward went through.
SHARED_OUTPUT = """
import torch
from torch import nn


class Generator(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 8), nn.Tanh())

    def forward(self, z):
        return self.net(z)


class Discriminator(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(8, 32), nn.LeakyReLU(0.2), nn.Linear(32, 1), nn.Sigmoid())

    def forward(self, x):
        return self.net(x).view(-1)


def shared_output(G: Generator, D: Discriminator, real, steps=2, retain=True):
    opt_D = torch.optim.Adam(D.parameters(), lr=1e-4)
    opt_G = torch.optim.Adam(G.parameters(), lr=1e-4)
    for _ in range(steps):
        fake = G(torch.randn(real.size(0), 16))
        prob_real = D(real)
        prob_fake = D(fake)
        D_loss = -torch.mean(torch.log(prob_real) + torch.log(1.0 - prob_fake))
        G_loss = torch.mean(torch.log(1.0 - prob_fake))
        opt_D.zero_grad()
        D_loss.backward(retain_graph=retain)
        opt_D.step()
        opt_G.zero_grad()
        G_loss.backward()
        opt_G.step()


if __name__ == "__main__":
    shared_output(Generator(), Discriminator(), torch.rand(8, 8) * 2 - 1, retain=False)
"""


def test_dl602_confirms_on_either_error_of_the_generator_step(verifier, tmp_path):
    verdicts = verify_findings(verifier, tmp_path, "shared_output.py", SHARED_OUTPUT, "DL602")
    verification = verdicts[line_of(SHARED_OUTPUT, "prob_fake = D(fake)")]
    assert (verification.status, verification.basis) == ("confirmed", "user-code"), verification.evidence
    assert "raised RuntimeError: Trying to backward through the graph a second time" in verification.evidence


# DL205: `detach_()` on features a list also holds. Whether the cut matters
# depends on the loss: a term with weight 0 changes no gradient (refuted),
# a real term does (confirmed), and a ReLU that saved the features makes
# the backward itself raise (confirmed on torch's own error).
HISTORY = """
import torch
import torch.nn.functional as F
from torch import nn


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Linear(8, 16)

    def forward(self, x):
        return self.net(x)


def train_step(encoder: Encoder, head: nn.Linear, x, y, opt):
    feats = encoder(x)
    logits = head(feats * 2.0)
    history = [feats]
    feats.detach_()
    loss = F.cross_entropy(logits, y) + WEIGHT * history[0].pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    return loss.item()


if __name__ == "__main__":
    enc, head = Encoder(), nn.Linear(16, 3)
    opt = torch.optim.SGD(list(enc.parameters()) + list(head.parameters()), lr=0.1)
    train_step(enc, head, torch.randn(4, 8), torch.randint(0, 3, (4,)), opt)
"""


@pytest.mark.parametrize("weight, status", [("0.0", "refuted"), ("1.0", "confirmed")])
def test_dl205_confirms_only_a_cut_that_changes_the_gradients(verifier, tmp_path, weight, status):
    source = HISTORY.replace("WEIGHT", weight)
    verification = verify_findings(verifier, tmp_path, "history.py", source, "DL205")[line_of(source, "feats.detach_()")]
    assert (verification.status, verification.basis) == (status, "user-code"), verification.evidence
    assert "a run with `feats.detach()` in its place" in verification.evidence


def test_dl205_a_backward_that_raises_on_the_cut_saved_tensor_confirms(verifier, tmp_path):
    source = HISTORY.replace("WEIGHT", "1.0").replace("nn.Linear(8, 16)", "nn.Sequential(nn.Linear(8, 16), nn.ReLU())")
    source = source.replace("head(feats * 2.0)", "head(feats)")  # the head saves the features too
    verification = verify_findings(verifier, tmp_path, "history_relu.py", source, "DL205")[line_of(source, "feats.detach_()")]
    assert (verification.status, verification.basis) == ("confirmed", "user-code"), verification.evidence
    assert "raised RuntimeError: Trying to use a saved tensor that has been detached in-place" in verification.evidence
